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
            let before = try StoredJSON.decode(UserSettings.self, from: text) ?? UserSettings()
            var settings = before
            try change(&settings)
            let now = Self.micros(Date())
            let saved = try StoredJSON.encode(settings)
            try await session.execute("UPDATE users SET settings = \(saved), updated_at = \(now) WHERE id = \(userID)")
            if settings != before {
                var binds = PostgresBindings()
                binds.append(userID)
                binds.append(now)
                binds.append(saved)
                try await session.execute(PostgresQuery(unsafeSQL: RoutingRecordSQL.appendVersion, binds: binds))
                var pruneBinds = PostgresBindings()
                pruneBinds.append(userID)
                pruneBinds.append(now)
                try await session.execute(PostgresQuery(unsafeSQL: RoutingRecordSQL.pruneVersions, binds: pruneBinds))
            }
            return settings
        }
    }

    public func settingsVersion(userID: String, at date: Date) async throws -> SettingsVersion? {
        try await withConnection { session in
            var binds = PostgresBindings()
            binds.append(userID)
            binds.append(Self.micros(date))
            return try await session.row(PostgresQuery(unsafeSQL: RoutingRecordSQL.versionAt, binds: binds)).map(RoutingRecordSQL.version)
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

    public func unregisterDevice(userID: String, provider: String, addressKey: String, at date: Date) async throws -> Bool {
        try await transaction { session in
            let find: PostgresQuery = "SELECT id FROM devices WHERE provider = \(provider) AND address_key = \(addressKey) AND user_id = \(userID) FOR UPDATE"
            guard let row = try await session.row(find) else { return false }
            // An accept that read this device for the user commits first, so the removal fails
            // what it queued (``lockHistory(of:_:)``).
            try await Self.lockHistory(of: [userID], session)
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

    /// ``recipients(_:userIDs:)`` by user id; none read (no round trip) for no user.
    static func recipientsByID(_ session: PostgresSession, userIDs: [String]) async throws -> [String: RecipientContext] {
        guard !userIDs.isEmpty else { return [:] }
        return Dictionary(try await recipients(session, userIDs: userIDs).map { ($0.userID, $0) }, uniquingKeysWith: { first, _ in first })
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

    public func eraseUser(userID: String, at date: Date) async throws -> UserErasure {
        try await transaction { [modules] session in
            var erased = UserErasure()
            let now = Self.micros(date)
            // The user's row first, as a registration's batch locks it (``subscribeRecommendedOnce``)
            // before its device rows: taken last, by the delete below, a user re-registering
            // their own device during the erasure held it while waiting for a device row this
            // erasure held, and PostgreSQL failed one of the two as a deadlock. Upserted, as the
            // registration does, so it is locked even when there is none yet (one a registration
            // creates meanwhile would otherwise be the next registration's to lock).
            try await session.execute(
                "INSERT INTO users (id, updated_at) VALUES (\(userID), \(now)) ON CONFLICT (id) DO UPDATE SET updated_at = users.updated_at")
            // Device rows in the order registrations lock them, then the user's lock: an accept
            // for them in progress commits first, so what it queued and wrote is failed and
            // deleted below, where before an accept that read their devices just before this
            // commit wrote a history row and a push after the erasure (``lockHistory(of:_:)``).
            let devices = try await session.rows(
                "SELECT id FROM devices WHERE user_id = \(userID) ORDER BY provider, address_key FOR UPDATE"
            ).map { try $0.text("id") }
            try await Self.lockHistory(of: [userID], session)
            // All of their queued deliveries at once, in id order: failed device by device, the
            // rows of two devices interleave, and a worker's heartbeat taking them in id order
            // could hold one of the second device's while waiting for one of the first's.
            // Found through the queue's indexes (DueDeliveriesSQL.unfinished), not among every
            // delivery ever stored.
            let unfinished = "ARRAY(\(DueDeliveriesSQL.unfinished(user: "(SELECT user_id FROM erased)")))"
            try await session.execute(
                """
                WITH erased AS (SELECT \(userID)::text AS user_id)
                SELECT id FROM deliveries WHERE id = ANY(\(unescaped: unfinished)) ORDER BY id FOR UPDATE
                """)
            for id in devices { try await Self.removeDevice(session, id: id, reason: "the user was erased", at: now) }
            erased.devices = devices.count
            // What is still queued for them in other sinks (history, webhooks) is never done
            // (those rows are locked already, above).
            try await session.execute(
                """
                WITH erased AS (SELECT \(userID)::text AS user_id), failed AS (
                    UPDATE deliveries SET state = 'failed', last_error = 'the user was erased', next_attempt_at = NULL, updated_at = \(now)
                    WHERE id = ANY(\(unescaped: unfinished))
                    RETURNING id, leased
                ), \(unescaped: WithdrawalMessage.notices(of: "failed"))
                SELECT COUNT(*) AS notices FROM withdrawn
                """
            )
            erased.history = try await session.rows("DELETE FROM history WHERE user_id = \(userID) RETURNING 1 AS erased").count
            try await session.execute("DELETE FROM inbox_counts WHERE user_id = \(userID)")
            try await session.execute("DELETE FROM users WHERE id = \(userID)")
            try await session.execute("DELETE FROM settings_versions WHERE user_id = \(userID)")
            // A send waiting for their own time would otherwise bring rows for them back.
            try await session.execute("DELETE FROM scheduled_recipients WHERE user_id = \(userID)")
            try await session.execute("DELETE FROM fold_counters WHERE user_id = \(userID)")
            try await session.execute("DELETE FROM digest_items WHERE user_id = \(userID)")
            // Feature modules' rows (the cards module's pool, history and events among them).
            for (statement, counted) in modules.erasure(of: userID) {
                let rows = try await Self.run(statement, session).count
                counted?(&erased, rows)
            }
            // Every token issued for them so far ends with their data (docs/security.md).
            try await Self.endTokens(session, userID: userID, issuedBefore: date)
            try await session.announce(.attributes(users: [userID]))
            return erased
        }
    }

    /// Deletes a device and fails whatever was still queued for it, telling every process to
    /// drop the copies its hand-off holds. Deliveries are locked in id order, as a worker's
    /// record and lease extension take theirs: updated in whatever order the plan visits them,
    /// two statements over the same rows could each hold one the other waited for.
    static func removeDevice(_ session: PostgresSession, id: String, reason: String, at now: Int64) async throws {
        try await session.execute("DELETE FROM devices WHERE id = \(id)")
        try await session.execute(
            """
            WITH failed AS (
                UPDATE deliveries SET state = 'failed', last_error = \(reason), next_attempt_at = NULL, updated_at = \(now)
                WHERE id IN (SELECT id FROM deliveries WHERE device_id = \(id) AND state = 'pending' ORDER BY id FOR UPDATE)
                RETURNING id, leased
            ), \(unescaped: WithdrawalMessage.notices(of: "failed"))
            SELECT COUNT(*) AS notices FROM withdrawn
            """
        )
    }

    /// Makes sure the user has a row: Forced subjects reach every user Herald knows.
    static func ensureUser(_ session: PostgresSession, _ userID: String, at now: Int64) async throws {
        try await session.execute("INSERT INTO users (id, updated_at) VALUES (\(userID), \(now)) ON CONFLICT (id) DO NOTHING")
    }
}
