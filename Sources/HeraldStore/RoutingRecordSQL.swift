import HeraldCore

/// What an accepted notification is explained with later (docs/routing.md, "Explaining a
/// decision"), the same on both engines: the routing inputs each configuration routed with,
/// once per configuration, named by the notifications accepted under it; and each user's
/// settings versions, so the settings in force at a notification's accept time can be read
/// back. Nothing is written per recipient or per sink.
enum RoutingRecordSQL {
    /// The tables and the notifications' column. Settings saved before versions were kept are
    /// one version saved at ``unversioned``: in force since before any stored notification.
    static let migration = [
        "CREATE TABLE routing_inputs (id TEXT PRIMARY KEY, inputs TEXT NOT NULL, recorded_at BIGINT NOT NULL)",
        """
        CREATE TABLE settings_versions (
            user_id TEXT NOT NULL,
            saved_at BIGINT NOT NULL,
            settings TEXT NOT NULL,
            PRIMARY KEY (user_id, saved_at)
        )
        """,
        "ALTER TABLE notifications ADD COLUMN routing_inputs TEXT",
        "INSERT INTO settings_versions (user_id, saved_at, settings) SELECT id, \(unversioned), settings FROM users WHERE settings IS NOT NULL",
    ]

    /// The `saved_at` of settings saved before Herald kept versions.
    static let unversioned: Int64 = 0

    /// Bind the id, the inputs' JSON and the time.
    static let recordInputs = "INSERT INTO routing_inputs (id, inputs, recorded_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"

    /// Bind the user, the time and the settings' JSON. Two saves in one microsecond keep the later.
    static let appendVersion = """
        INSERT INTO settings_versions (user_id, saved_at, settings) VALUES ($1, $2, $3)
        ON CONFLICT (user_id, saved_at) DO UPDATE SET settings = excluded.settings
        """

    /// Bind the user, then the time for a database holding no notification (now). Removes the
    /// user's versions no stored notification can need: those older than the version in force
    /// when the oldest stored notification was accepted. Run as a version is appended, so a
    /// user keeps one version plus those saved since the oldest notification, however long
    /// the deployment runs, and no maintenance pass has to scan every user's.
    static let pruneVersions = """
        DELETE FROM settings_versions WHERE user_id = $1 AND saved_at < (
            SELECT MAX(saved_at) FROM settings_versions WHERE user_id = $1
                AND saved_at <= COALESCE((SELECT MIN(timestamp) FROM notifications), $2))
        """

    /// Bind the user and the time: the version in force then, if any.
    static let versionAt = "SELECT saved_at, settings FROM settings_versions WHERE user_id = $1 AND saved_at <= $2 ORDER BY saved_at DESC LIMIT 1"

    /// A row of ``versionAt``.
    static func version(_ row: some StoredRow) throws -> SettingsVersion {
        let savedAt = try row.integer("saved_at")
        return SettingsVersion(
            settings: try row.json(UserSettings.self, "settings") ?? UserSettings(),
            savedAt: savedAt == unversioned ? nil : Timestamp.date(microseconds: savedAt))
    }
}
