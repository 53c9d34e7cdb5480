import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func settings(userID: String) async throws -> UserSettings {
        try await writer.read { db in try Self.settings(db, userID: userID) }
    }

    public func updateSettings(userID: String, _ change: @escaping @Sendable (inout UserSettings) throws -> Void) async throws -> UserSettings {
        try await groupCommitted { db in
            let before = try Self.settings(db, userID: userID)
            var settings = before
            try change(&settings)
            let now = Self.micros(Date())
            let text = try StoredJSON.encode(settings)
            try db.execute(
                sql: """
                    INSERT INTO users (id, settings, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at
                    """,
                arguments: [userID, text, now]
            )
            if settings != before {
                try db.execute(sql: RoutingRecordSQL.appendVersion, arguments: [userID, now, text])
                try db.execute(sql: RoutingRecordSQL.pruneVersions, arguments: [userID, now])
            }
            return settings
        }
    }

    public func settingsVersion(userID: String, at date: Date) async throws -> SettingsVersion? {
        try await writer.read { db in
            try Row.fetchOne(try db.cachedStatement(sql: RoutingRecordSQL.versionAt), arguments: [userID, Self.micros(date)]).map(RoutingRecordSQL.version)
        }
    }

    public func setAttributes(_ attributes: UserAttributes, userID: String) async throws {
        try await groupCommitted { db in
            try db.execute(
                sql: """
                    INSERT INTO users (id, attributes, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at
                    """,
                arguments: [userID, try StoredJSON.encode(attributes), Self.micros(Date())]
            )
        }
        changes.send(.attributes(users: [userID]))
    }

    public func attributes(userID: String) async throws -> UserAttributes? {
        try await writer.read { db in
            let text = try String.fetchOne(try db.cachedStatement(sql: "SELECT attributes FROM users WHERE id = ?"), arguments: [userID])
            return try StoredJSON.decode(UserAttributes.self, from: text)
        }
    }

    public func registerDevice(
        userID: String, registration: DeviceRegistration, newID: ObjectID, at date: Date, keepingAtMost keep: Int?
    ) async throws
        -> RegisteredDevice
    {
        let request = try StoredRegistration(userID: userID, registration: registration, newID: newID, at: date, keep: keep)
        return try await groupCommitted { db in try Self.register(request, db) }
    }

    /// One registration inside a group commit: the device is inserted, or updated (and taken
    /// from its previous owner) when its address is known; then the user's devices are trimmed
    /// to the limit, in the same transaction (a second one took SQLite's writer again for every
    /// registration: ×1.45–1.65 registrations/s without it).
    static func register(_ request: StoredRegistration, _ db: Database) throws -> RegisteredDevice {
        let device = try registerDevice(request, db)
        guard let keep = request.keep else { return RegisteredDevice(device: device, evicted: []) }
        return RegisteredDevice(device: device, evicted: try trimDevices(db, userID: request.userID, keep: keep, at: request.at))
    }

    private static func registerDevice(_ request: StoredRegistration, _ db: Database) throws -> Device {
        let (userID, registration, newID) = (request.userID, request.registration, request.newID)
        let stored = request.stored
        let address = registration.address
        let now = Self.micros(request.at)
        try Self.subscribeRecommendedOnce(db, userID, at: now)
        let find = try db.cachedStatement(sql: "SELECT * FROM devices WHERE provider = ? AND address_key = ?")
        if let row = try Row.fetchOne(find, arguments: [address.provider, address.key]) {
            let previousOwner: String = try row.decode(forColumn: "user_id")
            let deviceID: String = try row.decode(forColumn: "id")
            if !UserID.same(previousOwner, userID) {
                // The device now belongs to someone else: what was queued for the old owner
                // must never reach the new one.
                try db.execute(
                    sql:
                        "UPDATE deliveries SET state = 'failed', last_error = ?, next_attempt_at = NULL, updated_at = ? WHERE device_id = ? AND state = 'pending'",
                    arguments: ["device was registered by another user", now, deviceID]
                )
            }
            try db.cachedStatement(
                sql: """
                    UPDATE devices SET user_id = ?, address_json = ?, app = ?, options = ?, platform = COALESCE(?, platform),
                        app_version = COALESCE(?, app_version), region = COALESCE(?, region), locale = COALESCE(?, locale), updated_at = ?,
                        \(DeviceInstallationSQL.update(given: "?", owner: "?"))
                    WHERE id = ?
                    """
            ).execute(arguments: [
                userID, stored.json, registration.app, stored.options, registration.platform, registration.appVersion, registration.region,
                registration.locale, now, registration.installationID, userID, deviceID,
            ])
        } else {
            try db.cachedStatement(
                sql: """
                    INSERT INTO devices (id, user_id, provider, address_key, address_json, app, options, platform, app_version, region, locale,
                        installation_id, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                newID.hex, userID, address.provider, address.key, stored.json, registration.app, stored.options, registration.platform,
                registration.appVersion, registration.region, registration.locale, registration.installationID, now, now,
            ])
        }
        guard let row = try Row.fetchOne(find, arguments: [address.provider, address.key]) else {
            throw HeraldError(.internal, code: "storage_error", "device vanished while registering")
        }
        return try StoredRecords.device(row)
    }

    public func unregisterDevice(userID: String, provider: String, addressKey: String, at date: Date) async throws -> Bool {
        try await groupCommitted { db in
            let find = try db.cachedStatement(sql: "SELECT id FROM devices WHERE provider = ? AND address_key = ? AND user_id = ?")
            guard let deviceID = try String.fetchOne(find, arguments: [provider, addressKey, userID]) else { return false }
            try Self.removeDevice(db, id: deviceID, reason: "device was unregistered", at: Self.micros(date))
            return true
        }
    }

    public func devices(userID: String) async throws -> [Device] {
        try await writer.read { db in
            try Row.fetchAll(try db.cachedStatement(sql: "SELECT * FROM devices WHERE user_id = ? ORDER BY id"), arguments: [userID]).map {
                try StoredRecords.device($0)
            }
        }
    }

    public func recipients(userIDs: [String]) async throws -> [RecipientContext] {
        try await writer.read { db in try Self.recipients(db, userIDs: userIDs) }
    }

    /// Keeps the user's `keep` most recently registered devices and removes the rest (their
    /// pending pushes fail). - Returns: the removed devices.
    private static func trimDevices(_ db: Database, userID: String, keep: Int, at date: Date) throws -> [Device] {
        let extra = try Row.fetchAll(
            try db.cachedStatement(sql: "SELECT * FROM devices WHERE user_id = ? ORDER BY updated_at DESC, id DESC LIMIT -1 OFFSET ?"),
            arguments: [userID, max(keep, 0)]
        ).map { try StoredRecords.device($0) }
        for device in extra {
            try removeDevice(db, id: device.id.hex, reason: Device.removedOverLimit(keep: keep), at: micros(date))
        }
        return extra
    }

    public func pruneDevices(registeredBefore before: Date, limit: Int, at date: Date) async throws -> Int {
        try await writer.write { db in
            let stale = try String.fetchAll(
                db, sql: "SELECT id FROM devices WHERE updated_at < ? ORDER BY updated_at LIMIT ?", arguments: [Self.micros(before), limit])
            for id in stale {
                try Self.removeDevice(db, id: id, reason: "device removed: not registered again since \(Timestamp.format(before))", at: Self.micros(date))
            }
            return stale.count
        }
    }

    static func recipients(_ db: Database, userIDs: [String]) throws -> [RecipientContext] {
        let contexts = try recipientsByID(db, userIDs: userIDs)
        return userIDs.map { contexts[$0] ?? RecipientContext(userID: $0) }
    }

    /// The recipients of every accept for users in a group commit, read in one pair of
    /// statements for the batch rather than a pair per accept. Nothing an accept writes
    /// changes them, so they hold for the whole transaction.
    static func recipients(_ db: Database, of requests: [AcceptRequest]) throws -> [String: RecipientContext] {
        var userIDs: [String] = []
        for request in requests {
            if case .users(let ids, _) = request.plan { userIDs += ids }
        }
        return try recipientsByID(db, userIDs: userIDs)
    }

    /// Each of `userIDs` with its stored settings and devices (defaults and none for a user
    /// Herald does not know), by user.
    static func recipientsByID(_ db: Database, userIDs: [String]) throws -> [String: RecipientContext] {
        var settings: [String: UserSettings] = [:]
        var devices: [String: [Device]] = [:]
        let unique = userIDs.uniqued()
        for chunk in unique.chunked(500) {
            let (list, arguments) = Self.inList(chunk)
            for row in try Row.fetchAll(try db.cachedStatement(sql: "SELECT id, settings FROM users WHERE id IN (\(list))"), arguments: arguments) {
                settings[try row.text("id")] = try StoredJSON.decode(UserSettings.self, from: try row.optionalText("settings"))
            }
            for row in try PositionedRow.fetchAll(
                try db.cachedStatement(sql: "SELECT * FROM devices WHERE user_id IN (\(list)) ORDER BY id"), arguments: arguments)
            {
                let device = try StoredRecords.device(row)
                devices[device.userID, default: []].append(device)
            }
        }
        var contexts: [String: RecipientContext] = [:]
        for id in unique { contexts[id] = RecipientContext(userID: id, settings: settings[id] ?? UserSettings(), devices: devices[id] ?? []) }
        return contexts
    }

    static func settings(_ db: Database, userID: String) throws -> UserSettings {
        let text = try String.fetchOne(try db.cachedStatement(sql: "SELECT settings FROM users WHERE id = ?"), arguments: [userID])
        return try StoredJSON.decode(UserSettings.self, from: text) ?? UserSettings()
    }

    public func eraseUser(userID: String, at date: Date) async throws -> UserErasure {
        let erased = try await writer.write { [modules] db in
            var erased = UserErasure()
            let now = Self.micros(date)
            let devices = try String.fetchAll(db, sql: "SELECT id FROM devices WHERE user_id = ?", arguments: [userID])
            for id in devices { try Self.removeDevice(db, id: id, reason: "the user was erased", at: now) }
            erased.devices = devices.count
            // What is still queued for them in other sinks (history, webhooks) is never done.
            try db.execute(
                sql: """
                    UPDATE deliveries SET state = 'failed', last_error = ?1, next_attempt_at = NULL, updated_at = ?2
                    WHERE id IN (\(DueDeliveriesSQL.unfinished(user: "?3")))
                    """,
                arguments: ["the user was erased", now, userID]
            )
            try db.execute(sql: "DELETE FROM history WHERE user_id = ?", arguments: [userID])
            erased.history = db.changesCount
            try db.execute(sql: "DELETE FROM inbox_counts WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM users WHERE id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM settings_versions WHERE user_id = ?", arguments: [userID])
            // A send waiting for their own time would otherwise bring rows for them back.
            try db.execute(sql: "DELETE FROM scheduled_recipients WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM fold_counters WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM digest_items WHERE user_id = ?", arguments: [userID])
            // Feature modules' rows (the cards module's pool, history and events among them).
            for (statement, counted) in modules.erasure(of: userID) {
                let rows = try Self.run(statement, db).count
                counted?(&erased, rows)
            }
            // Every token issued for them so far ends with their data (docs/security.md).
            try Self.endTokens(db, userID: userID, issuedBefore: date)
            return erased
        }
        changes.send(.attributes(users: [userID]))
        return erased
    }

    /// Deletes a device and fails whatever was still queued for it.
    static func removeDevice(_ db: Database, id: String, reason: String, at now: Int64) throws {
        try db.execute(sql: "DELETE FROM devices WHERE id = ?", arguments: [id])
        try db.execute(
            sql: "UPDATE deliveries SET state = 'failed', last_error = ?, next_attempt_at = NULL, updated_at = ? WHERE device_id = ? AND state = 'pending'",
            arguments: [reason, now, id]
        )
    }
}

extension Array {
    /// The elements in runs of at most `size`, in order.
    package func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

extension Array where Element: Hashable {
    /// The elements in order, each once.
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
