import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func settings(userID: String) async throws -> UserSettings {
        try await withConnection { session in try await Self.settings(session, userID: userID) }
    }

    public func updateSettings(userID: String, _ change: @escaping @Sendable (inout UserSettings) throws -> Void) async throws -> UserSettings {
        // `change` is escaping, not wrapped in withoutActuallyEscaping: the supervised operation
        // that runs the transaction may release its closure after this call has its result, and
        // withoutActuallyEscaping traps when the closure outlives the call.
        try await transaction { session in
            // The row lock serialises concurrent read-change-writes of one user's settings.
            try await Self.ensureUser(session, userID, at: Self.micros(Date()))
            let text = try await session.row("SELECT settings FROM users WHERE id = \(userID) FOR UPDATE")?.optionalText("settings")
            var settings = try StoredJSON.decode(UserSettings.self, from: text) ?? UserSettings()
            try change(&settings)
            try await session.execute(
                "UPDATE users SET settings = \(try StoredJSON.encode(settings)), updated_at = \(Self.micros(Date())) WHERE id = \(userID)"
            )
            return settings
        }
    }

    public func setAttributes(_ attributes: UserAttributes, userID: String) async throws {
        let text = try StoredJSON.encode(attributes)
        try await transaction { session in
            try await session.execute(
                """
                INSERT INTO users (id, attributes, updated_at) VALUES (\(userID), \(text), \(Self.micros(Date())))
                ON CONFLICT (id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at
                """
            )
            try await session.announce(.attributes(users: [userID]))
        }
    }

    public func attributes(userID: String) async throws -> UserAttributes? {
        try await withConnection { session in
            try await session.row("SELECT attributes FROM users WHERE id = \(userID)")?.json(UserAttributes.self, "attributes")
        }
    }

    public func registerDevice(
        userID: String, registration: DeviceRegistration, newID: ObjectID, at date: Date, keepingAtMost keep: Int?
    ) async throws
        -> RegisteredDevice
    {
        let device = try await register(userID: userID, registration: registration, newID: newID, at: date)
        guard let keep else { return RegisteredDevice(device: device, evicted: []) }
        // Almost always within the limit: one statement says so, without a transaction's round
        // trips. Read after this registration committed, so of two registrations at once the
        // later one's read counts both.
        let over = try await withConnection { session in
            try await session.count("SELECT 1 FROM devices WHERE user_id = \(userID) OFFSET \(max(keep, 0)) LIMIT 1")
        }
        guard over > 0 else { return RegisteredDevice(device: device, evicted: []) }
        // A transaction of its own, unlike SQLite's: locking the user's devices while this
        // device's row is locked could deadlock with a registration moving a device the other
        // way. PostgreSQL commits transactions in parallel, so the second costs no queue.
        return RegisteredDevice(device: device, evicted: try await trimDevices(userID: userID, keep: keep, at: date))
    }

    /// Four round trips (begin, the user, the device, commit) where there were nine: on two
    /// cores a registration's statements cost PostgreSQL and Herald about as much CPU each.
    private func register(userID: String, registration: DeviceRegistration, newID: ObjectID, at date: Date) async throws -> Device {
        let stored = try StoredRecords.storedAddress(registration)
        let (provider, key) = (registration.address.provider, registration.address.key)
        return try await transaction { session in
            let now = Self.micros(date)
            try await Self.subscribeRecommendedOnce(session, userID, at: now)
            // Inserted, or updated in place (ON CONFLICT waits for and locks a row another
            // registration of this address holds, so two serialise). Whatever was queued for
            // the device's other users fails: it must never reach the new owner.
            let upsert: PostgresQuery = """
                WITH device AS (
                    INSERT INTO devices (id, user_id, provider, address_key, address_json, app, options, platform, app_version, region, locale,
                        created_at, updated_at)
                    VALUES (\(newID.hex), \(userID), \(provider), \(key), \(stored.json), \(registration.app), \(stored.options),
                        \(registration.platform), \(registration.appVersion), \(registration.region), \(registration.locale), \(now), \(now))
                    ON CONFLICT (provider, address_key) DO UPDATE SET user_id = excluded.user_id, address_json = excluded.address_json,
                        app = excluded.app, options = excluded.options, platform = COALESCE(excluded.platform, devices.platform),
                        app_version = COALESCE(excluded.app_version, devices.app_version), region = COALESCE(excluded.region, devices.region),
                        locale = COALESCE(excluded.locale, devices.locale), updated_at = excluded.updated_at
                    RETURNING *
                ), moved AS (
                    UPDATE deliveries SET state = 'failed', last_error = 'device was registered by another user', next_attempt_at = NULL,
                        updated_at = \(now)
                    WHERE device_id = (SELECT id FROM device) AND state = 'pending' AND user_id <> \(userID)
                )
                SELECT * FROM device
                """
            guard let device = try await session.row(upsert) else {
                throw HeraldError(.internal, code: "storage_error", "device vanished while registering")
            }
            return try StoredRecords.device(device)
        }
    }

    public func unregisterDevice(userID: String, provider: String, addressKey: String, at date: Date) async throws -> Bool {
        try await transaction { session in
            let find: PostgresQuery = "SELECT id FROM devices WHERE provider = \(provider) AND address_key = \(addressKey) AND user_id = \(userID) FOR UPDATE"
            guard let row = try await session.row(find) else { return false }
            try await Self.removeDevice(session, id: try row.text("id"), reason: "device was unregistered", at: Self.micros(date))
            return true
        }
    }

    public func devices(userID: String) async throws -> [Device] {
        try await withConnection { session in
            try await session.rows("SELECT * FROM devices WHERE user_id = \(userID) ORDER BY id").map { try StoredRecords.device($0) }
        }
    }

    public func recipients(userIDs: [String]) async throws -> [RecipientContext] {
        try await withConnection { session in try await Self.recipients(session, userIDs: userIDs) }
    }

    /// Keeps the user's `keep` most recently registered devices and removes the rest (their
    /// pending pushes fail). - Returns: the removed devices.
    private func trimDevices(userID: String, keep: Int, at date: Date) async throws -> [Device] {
        try await transaction { session in
            // Lock the user's devices, so two registrations trim one after the other.
            let extra = try await session.rows(
                "SELECT * FROM devices WHERE user_id = \(userID) ORDER BY updated_at DESC, id DESC OFFSET \(max(keep, 0)) FOR UPDATE"
            ).map { try StoredRecords.device($0) }
            for device in extra {
                try await Self.removeDevice(
                    session, id: device.id.hex, reason: "device removed: the user registered more than \(keep) devices", at: Self.micros(date))
            }
            return extra
        }
    }

    public func pruneDevices(registeredBefore before: Date, limit: Int, at date: Date) async throws -> Int {
        try await transaction { session in
            let stale = try await session.rows(
                "SELECT id FROM devices WHERE updated_at < \(Self.micros(before)) ORDER BY updated_at LIMIT \(limit) FOR UPDATE SKIP LOCKED"
            ).map { try $0.text("id") }
            for id in stale {
                try await Self.removeDevice(
                    session, id: id, reason: "device removed: not registered again since \(Timestamp.format(before))", at: Self.micros(date))
            }
            return stale.count
        }
    }

    static func recipients(_ session: PostgresSession, userIDs: [String]) async throws -> [RecipientContext] {
        var settings: [String: UserSettings] = [:]
        var devices: [String: [Device]] = [:]
        let rows = try await session.rows(RecipientsStatement(userIDs: userIDs))
        for row in rows {
            let recipient = try row.text("recipient")
            if settings[recipient] == nil, let stored = try row.json(UserSettings.self, "recipient_settings") { settings[recipient] = stored }
            if try row.optionalText("id") != nil { devices[recipient, default: []].append(try StoredRecords.device(row)) }
        }
        return userIDs.map { RecipientContext(userID: $0, settings: settings[$0] ?? UserSettings(), devices: devices[$0] ?? []) }
    }

    /// Named users' settings and devices in one read (a round trip saved): a row per device,
    /// or one without when a user has none.
    struct RecipientsStatement: PreparedQuery {
        static let name = "herald_recipients"
        static let sql = RecipientsStatement(userIDs: []).query.sql
        /// The device columns, listed once rather than for every group commit.
        private static let deviceColumns = StoredRecords.deviceColumns(of: "d")
        let query: PostgresQuery

        init(userIDs: [String]) {
            query = """
                SELECT r.user_id AS recipient, u.settings AS recipient_settings, \(unescaped: Self.deviceColumns)
                FROM (SELECT DISTINCT UNNEST(\(userIDs)::text[]) AS user_id) AS r
                LEFT JOIN users u ON u.id = r.user_id
                LEFT JOIN devices d ON d.user_id = r.user_id
                ORDER BY d.id
                """
        }
    }

    static func settings(_ session: PostgresSession, userID: String) async throws -> UserSettings {
        try await session.row("SELECT settings FROM users WHERE id = \(userID)")?.json(UserSettings.self, "settings") ?? UserSettings()
    }

    /// Deletes a device and fails whatever was still queued for it.
    static func removeDevice(_ session: PostgresSession, id: String, reason: String, at now: Int64) async throws {
        try await session.execute("DELETE FROM devices WHERE id = \(id)")
        try await session.execute(
            """
            UPDATE deliveries SET state = 'failed', last_error = \(reason), next_attempt_at = NULL, updated_at = \(now)
            WHERE device_id = \(id) AND state = 'pending'
            """
        )
    }

    /// Makes sure the user has a row: Forced subjects reach every user Herald knows.
    static func ensureUser(_ session: PostgresSession, _ userID: String, at now: Int64) async throws {
        try await session.execute("INSERT INTO users (id, updated_at) VALUES (\(userID), \(now)) ON CONFLICT (id) DO NOTHING")
    }

    /// At a user's first device registration, subscribes them to every Recommended subject.
    /// One statement makes sure of the user's row and marks the first registration.
    static func subscribeRecommendedOnce(_ session: PostgresSession, _ userID: String, at now: Int64) async throws {
        let first = try await session.count(
            """
            INSERT INTO users (id, updated_at, recommended_at) VALUES (\(userID), \(now), \(now))
            ON CONFLICT (id) DO UPDATE SET recommended_at = excluded.recommended_at WHERE users.recommended_at IS NULL
            RETURNING id
            """
        )
        guard first > 0 else { return }
        try await session.execute(
            """
            INSERT INTO subscriptions (user_id, topic_key, created_at)
            SELECT \(userID), topic_key, \(now) FROM subjects WHERE level = \(SubscriptionLevel.recommended.rawValue)
            ON CONFLICT DO NOTHING
            """
        )
    }
}
