import Foundation
import HeraldCore
import PostgresNIO

/// What a group commit of registrations answers each request: its device as stored, and
/// whether its user may be over the device limit (then the request trims, in a transaction of
/// its own).
struct RegistrationOutcome: Sendable {
    var device: Device
    var overLimit: Bool
}

extension PostgresStore {
    public func registerDevice(
        userID: String, registration: DeviceRegistration, newID: ObjectID, at date: Date, keepingAtMost keep: Int?
    ) async throws
        -> RegisteredDevice
    {
        let request = try StoredRegistration(userID: userID, registration: registration, newID: newID, at: date, keep: keep)
        let outcome = try await registrations.submit(request)
        guard let keep, outcome.overLimit else { return RegisteredDevice(device: outcome.device, evicted: []) }
        // A transaction of its own, unlike SQLite's: locking the user's devices while this
        // device's row is locked could deadlock with a registration moving a device the other
        // way. PostgreSQL commits transactions in parallel, so the second costs no queue.
        return RegisteredDevice(device: outcome.device, evicted: try await trimDevices(userID: userID, keep: keep, at: date))
    }

    /// A group commit's registrations: one transaction of two statements or more, whatever their
    /// number (each registration used to be four round trips and a commit of its own, and
    /// PostgreSQL and Herald spent about as much CPU on each), then one read of which users may
    /// be over their device limit.
    static func register(
        batch requests: [StoredRegistration], _ pool: PostgresPool, preparation: StatementPreparation, logger: Logger
    ) async throws -> [RegistrationOutcome] {
        let devices = try await transaction(pool, preparation: preparation, logger: logger) { session in
            try await register(batch: requests, session)
        }
        // Read after the registrations committed, so of two batches at once the later one's
        // read counts both. When the read fails, every limited request trims: the trim's own
        // locked read decides, so a failure here costs a transaction, never the limit.
        let limited = requests.filter { $0.keep != nil }
        let over: Set<String>
        if limited.isEmpty {
            over = []
        } else if let found = try? await usersOverLimit(limited, pool, preparation: preparation, logger: logger) {
            over = found
        } else {
            over = Set(limited.map(\.userID))
        }
        return zip(requests, devices).map { request, device in
            RegistrationOutcome(device: device, overLimit: request.keep != nil && over.contains(request.userID))
        }
    }

    /// The batch's devices, inserted or updated, in the order of `requests`. A batch that
    /// registers one address more than once does so in rounds (PostgreSQL refuses to update a
    /// row twice in one statement), later requests after earlier ones, as if one by one.
    static func register(batch requests: [StoredRegistration], _ session: PostgresSession) async throws -> [Device] {
        var firstAt: [String: Int64] = [:]
        for request in requests where firstAt[request.userID] == nil { firstAt[request.userID] = micros(request.at) }
        try await subscribeRecommendedOnce(session, users: firstAt)
        try await lockOwners(ofMoving: requests, session)

        var rounds: [[Int]] = []
        var occurrences: [AddressKey: Int] = [:]
        for (index, request) in requests.enumerated() {
            let key = AddressKey(request.registration.address)
            let round = occurrences[key, default: 0]
            occurrences[key] = round + 1
            if round == rounds.count { rounds.append([]) }
            rounds[round].append(index)
        }
        var devices = [Device?](repeating: nil, count: requests.count)
        for round in rounds {
            let rows = try await session.rows(try RegistrationStatement(round.map { requests[$0] }).query)
            var stored: [AddressKey: Device] = [:]
            for row in rows {
                let device = try StoredRecords.device(row)
                stored[AddressKey(device.address)] = device
            }
            for index in round { devices[index] = stored[AddressKey(requests[index].registration.address)] }
        }
        return try devices.map { device in
            guard let device else { throw HeraldError(.internal, code: "storage_error", "device vanished while registering") }
            return device
        }
    }

    /// Locks the devices `requests` take from another user, then those users' locks
    /// (``lockHistory(of:_:)``), before the registration statement: an accept that read such a
    /// device for its owner commits first, and the statement, whose snapshot then includes it,
    /// fails what it queued (withdrawing what it handed off); a later accept no longer finds the
    /// device. The row locks keep the owners read here the owners when the statement runs.
    static func lockOwners(ofMoving requests: [StoredRegistration], _ session: PostgresSession) async throws {
        let (providers, keys, users) = (
            requests.map(\.registration.address.provider), requests.map(\.registration.address.key), requests.map(\.userID)
        )
        let owners = try await session.rows(
            """
            SELECT d.user_id FROM devices d
            JOIN UNNEST(\(providers)::text[], \(keys)::text[], \(users)::text[]) AS g(provider, address_key, user_id)
                ON d.provider = g.provider AND d.address_key = g.address_key AND d.user_id <> g.user_id
            ORDER BY d.provider, d.address_key
            FOR NO KEY UPDATE OF d
            """
        ).map { try $0.text("user_id") }
        if !owners.isEmpty { try await lockHistory(of: owners, session) }
    }

    /// A device's identity: its provider and address key, unique together.
    private struct AddressKey: Hashable {
        var provider: String
        var key: String

        init(_ address: DeviceAddress) {
            (provider, key) = (address.provider, address.key)
        }
    }

    /// At a user's first device registration, subscribes them to every Recommended subject; one
    /// statement for all `users` (id → when), which also makes sure of their rows.
    static func subscribeRecommendedOnce(_ session: PostgresSession, users: [String: Int64]) async throws {
        // Sorted, so two batches with users in common lock their rows in the same order.
        let ordered = users.sorted { $0.key < $1.key }
        let (ids, times) = (ordered.map(\.key), ordered.map(\.value))
        try await session.execute(
            """
            WITH first AS (
                INSERT INTO users (id, updated_at, recommended_at)
                SELECT id, at, at FROM UNNEST(\(ids)::text[], \(times)::int8[]) AS u(id, at) ORDER BY id
                ON CONFLICT (id) DO UPDATE SET recommended_at = excluded.recommended_at WHERE users.recommended_at IS NULL
                RETURNING id, recommended_at
            )
            INSERT INTO subscriptions (user_id, topic_key, created_at)
            SELECT first.id, s.topic_key, first.recommended_at FROM first JOIN subjects s ON s.level = \(SubscriptionLevel.recommended.rawValue)
            ON CONFLICT DO NOTHING
            """
        )
    }

    /// Inserts each registration's device, or updates it in place when its address is known (ON
    /// CONFLICT waits for and locks a row another transaction holds, so two serialise); whatever
    /// was queued for a device's other users fails, and every process's hand-off drops its
    /// copies (``WithdrawalMessage``): it must never reach the new owner. Rows
    /// travel as one JSON array, since optional columns cannot be NULL inside arrays.
    struct RegistrationStatement {
        let query: PostgresQuery

        /// `requests` register each address once.
        init(_ requests: [StoredRegistration]) throws {
            let rows = requests.map { request in
                let (registration, address) = (request.registration, request.registration.address)
                return Row(
                    id: request.newID.hex, user_id: request.userID, provider: address.provider, address_key: address.key,
                    address_json: request.stored.json, app: registration.app, options: request.stored.options,
                    platform: registration.platform, app_version: registration.appVersion, region: registration.region,
                    locale: registration.locale, installation_id: registration.installationID, at: PostgresStore.micros(request.at))
            }
            let json = try StoredJSON.encode(rows)
            query = """
                WITH given AS (
                    SELECT * FROM json_to_recordset(\(json)::json) AS r(id text, user_id text, provider text, address_key text,
                        address_json text, app text, options text, platform text, app_version text, region text, locale text,
                        installation_id text, at int8)
                ), device AS (
                    INSERT INTO devices (id, user_id, provider, address_key, address_json, app, options, platform, app_version, region, locale,
                        installation_id, created_at, updated_at)
                    SELECT id, user_id, provider, address_key, address_json, app, options, platform, app_version, region, locale,
                        installation_id, at, at
                    FROM given ORDER BY provider, address_key
                    ON CONFLICT (provider, address_key) DO UPDATE SET user_id = excluded.user_id, address_json = excluded.address_json,
                        app = excluded.app, options = excluded.options, platform = COALESCE(excluded.platform, devices.platform),
                        app_version = COALESCE(excluded.app_version, devices.app_version), region = COALESCE(excluded.region, devices.region),
                        locale = COALESCE(excluded.locale, devices.locale), updated_at = excluded.updated_at,
                        \(unescaped: DeviceInstallationSQL.update(given: "excluded.installation_id", owner: "excluded.user_id"))
                    RETURNING *
                ), moved AS (
                    UPDATE deliveries SET state = 'failed', last_error = 'device was registered by another user', next_attempt_at = NULL,
                        updated_at = device.updated_at
                    FROM device
                    WHERE deliveries.device_id = device.id AND deliveries.user_id <> device.user_id AND deliveries.id IN (
                        SELECT p.id FROM deliveries p JOIN device ON p.device_id = device.id
                        WHERE p.state = 'pending' AND p.user_id <> device.user_id ORDER BY p.id FOR UPDATE OF p)
                    RETURNING deliveries.id, deliveries.leased
                ), \(unescaped: WithdrawalMessage.notices(of: "moved"))
                SELECT device.*, (SELECT COUNT(*) FROM withdrawn) AS withdrawal_notices FROM device
                """
        }

        /// One registration as `json_to_recordset` reads it: an absent key is NULL.
        private struct Row: Encodable {
            var id, user_id, provider, address_key: String
            var address_json, app, options, platform, app_version, region, locale, installation_id: String?
            var at: Int64
        }
    }

    /// The users of `requests` who have more devices than their request keeps.
    private static func usersOverLimit(
        _ requests: [StoredRegistration], _ pool: PostgresPool, preparation: StatementPreparation, logger: Logger
    ) async throws -> Set<String> {
        var keep: [String: Int64] = [:]
        for request in requests {
            guard let limit = request.keep else { continue }
            keep[request.userID] = min(keep[request.userID] ?? Int64.max, Int64(max(limit, 0)))
        }
        let pairs = Array(keep)
        let (ids, limits) = (pairs.map(\.key), pairs.map(\.value))
        return try await pool.withConnection { connection in
            let session = PostgresSession(connection: connection, preparation: preparation, logger: logger)
            let rows = try await session.rows(
                """
                SELECT u.id FROM UNNEST(\(ids)::text[], \(limits)::int8[]) AS u(id, keep)
                WHERE (SELECT COUNT(*) FROM devices d WHERE d.user_id = u.id) > u.keep
                """
            )
            return Set(try rows.map { try $0.text("id") })
        }
    }

    /// Keeps the user's `keep` most recently registered devices and removes the rest (their
    /// pending pushes fail). - Returns: the removed devices.
    private func trimDevices(userID: String, keep: Int, at date: Date) async throws -> [Device] {
        try await transaction { session in
            // Lock the user's devices, so two registrations trim one after the other; in the
            // order a group commit of registrations locks them (by address), so a trim and a
            // batch registering two of the user's devices cannot each hold one the other needs.
            let devices = try await session.rows(
                "SELECT * FROM devices WHERE user_id = \(userID) ORDER BY provider, address_key FOR UPDATE"
            ).map { try StoredRecords.device($0) }
            let extra = devices.sorted { ($0.updatedAt, $0.id.hex) > ($1.updatedAt, $1.id.hex) }.dropFirst(max(keep, 0))
            for device in extra {
                try await Self.removeDevice(
                    session, id: device.id.hex, reason: Device.removedOverLimit(keep: keep), at: Self.micros(date))
            }
            return Array(extra)
        }
    }
}
