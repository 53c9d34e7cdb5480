import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func claimDue(now: Date, limit: Int, lease: Duration, sinks: SinkFilter) async throws -> [Delivery] {
        let nowMicros = Self.micros(now)
        let leaseUntil = nowMicros.saturatingAdd(Int64(saturating: lease.seconds * 1_000_000))
        let rows = try await withConnection { session in
            try await session.rows(ClaimStatement(now: nowMicros, leaseUntil: leaseUntil, limit: limit, sinks: sinks))
        }
        return try StoredRecords.claimedDeliveries(rows)
    }

    /// Claims due deliveries with their notifications and devices. The lease is the next due
    /// time: a process that dies before recording leaves the delivery due again once the lease
    /// runs out. SKIP LOCKED lets workers in several processes claim disjoint batches without
    /// waiting for each other. The attempt is counted at claim time so a delivery that crashes
    /// its worker still runs out of attempts.
    struct ClaimStatement: PreparedQuery {
        static let name = "herald_claim"
        static let sql = ClaimStatement(now: 0, leaseUntil: 0, limit: 0, sinks: .all).query.sql
        let query: PostgresQuery

        init(now: Int64, leaseUntil: Int64, limit: Int, sinks: SinkFilter) {
            let (included, names) = sinks.names
            // First attempts and retries apart: retries take at most what first attempts leave,
            // and at least half the batch (RetryShare). Each sink taken is read on its own
            // (LATERAL), earliest first, and the earliest of all kept, so that an open circuit's
            // backlog left out is not walked (DueDeliveriesSQL). Rows looked at and not taken are
            // locked only for this statement.
            query = """
                \(unescaped: QueueStatsSQL.pendingSinks), claimed_sinks AS (
                    SELECT sink FROM pending_sinks
                    WHERE sink IS NOT NULL AND (cardinality(\(names)::text[]) = 0 OR (sink = ANY(\(names)::text[])) = \(included))
                ), firsts AS (
                    SELECT id, row_number() OVER (ORDER BY next_attempt_at, id) AS n FROM (
                        SELECT due.id, due.next_attempt_at FROM claimed_sinks CROSS JOIN LATERAL (
                            SELECT id, next_attempt_at FROM deliveries
                            WHERE state = 'pending' AND \(unescaped: DueDeliveriesSQL.firstAttempt) AND sink = claimed_sinks.sink AND next_attempt_at <= \(now)
                            ORDER BY next_attempt_at, id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                        ) due
                        ORDER BY due.next_attempt_at, due.id LIMIT \(limit)
                    ) f
                ), retries AS (
                    SELECT id, row_number() OVER (ORDER BY next_attempt_at, id) AS n FROM (
                        SELECT due.id, due.next_attempt_at FROM claimed_sinks CROSS JOIN LATERAL (
                            SELECT id, next_attempt_at FROM deliveries
                            WHERE state = 'pending' AND \(unescaped: DueDeliveriesSQL.retry) AND sink = claimed_sinks.sink AND next_attempt_at <= \(now)
                            ORDER BY next_attempt_at, id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                        ) due
                        ORDER BY due.next_attempt_at, due.id LIMIT \(limit)
                    ) r
                ), taken AS (
                    SELECT id FROM retries WHERE n <= GREATEST(\(limit) - (SELECT count(*) FROM firsts), (\(limit) + 1) / 2)
                ), due AS (
                    SELECT id FROM taken
                    UNION ALL
                    SELECT id FROM firsts WHERE n <= \(limit) - (SELECT count(*) FROM taken)
                ), claimed AS (
                    UPDATE deliveries d SET next_attempt_at = \(leaseUntil), attempts = d.attempts + 1, leased = 1, updated_at = \(now)
                    FROM due WHERE d.id = due.id
                    RETURNING d.id, d.notification_id, d.sink, d.user_id, d.device_id, d.topic_key, d.distribution, d.attempts
                )
                SELECT \(unescaped: StoredRecords.claimedColumns)
                FROM claimed c
                JOIN notifications n ON n.id = c.notification_id
                LEFT JOIN devices dev ON dev.id = c.device_id AND dev.user_id = c.user_id
                ORDER BY c.id
                """
        }
    }

    public func record(_ updates: [DeliveryUpdate], at date: Date) async throws {
        guard !updates.isEmpty else { return }
        let now = Self.micros(date)
        let removals = updates.compactMap { $0.removeDevice?.hex }
        try await transaction { session in
            // The devices to remove before the deliveries: an unregistration, an erasure or a
            // registration moving the device locks its row, then fails its deliveries; taken
            // the other way round, each waited for the other's row and PostgreSQL failed one.
            if !removals.isEmpty {
                try await session.execute("SELECT id FROM devices WHERE id = ANY(\(removals)) ORDER BY provider, address_key FOR UPDATE")
            }
            // Fenced by the attempt: a stale worker's outcome changes nothing.
            let applied = Set(try await session.rows(RecordStatement(updates.sorted { $0.id < $1.id }, at: now)).map { try $0.integer("id") })
            for update in updates where applied.contains(update.id) {
                guard let device = update.removeDevice else { continue }
                try await Self.removeDevice(session, id: device.hex, reason: "device token was reported gone: \(update.lastError ?? "unregistered")", at: now)
            }
            // Retries scheduled here may be due sooner than other processes' idle workers look.
            if updates.contains(where: { $0.state == .pending }) { try await session.notifyWork() }
        }
    }

    /// A batch of outcomes in one statement, each applied only to the attempt it is for.
    /// Arrays cannot carry NULLs here: a missing error travels as '' and a missing next attempt
    /// as -1, and both become NULL again in SQL.
    struct RecordStatement: PreparedQuery {
        static let name = "herald_record"
        static let sql = RecordStatement([], at: 0).query.sql
        let query: PostgresQuery

        init(_ updates: [DeliveryUpdate], at now: Int64) {
            let ids = updates.map(\.id)
            let states = updates.map(\.state.rawValue)
            let attempts = updates.map { Int64($0.attempts) }
            let errors = updates.map { $0.lastError ?? "" }
            let nextAttempts = updates.map { $0.state == .pending ? $0.nextAttemptAt.map(PostgresStore.micros) ?? now : -1 }
            let givenBack = updates.map { Int64($0.attemptsGivenBack) }
            query = """
                UPDATE deliveries d SET state = u.state, last_error = NULLIF(u.last_error, ''),
                    next_attempt_at = NULLIF(u.next_attempt_at, -1), leased = 0, updated_at = \(now), attempts = d.attempts - u.given_back
                FROM UNNEST(\(ids)::bigint[], \(states)::text[], \(attempts)::bigint[], \(errors)::text[], \(nextAttempts)::bigint[], \(givenBack)::bigint[])
                    AS u(id, state, attempts, last_error, next_attempt_at, given_back)
                WHERE d.id = u.id AND d.attempts = u.attempts AND d.state = 'pending'
                RETURNING d.id
                """
        }
    }

    public func extendLeases(_ leases: [DeliveryLease], until: Date) async throws {
        guard !leases.isEmpty else { return }
        let ids = leases.map(\.id)
        let attempts = leases.map { Int64($0.attempt) }
        // Locked in id order, as an unregistration or an erasure locks the deliveries it fails:
        // updated in the order the plan visits them, the two could each hold a row the other
        // waited for (a heartbeat runs every third of a lease, beside everything else).
        try await Self.retryingConflicts(logger: logger) {
            try await withConnection { session in
                try await session.execute(
                    """
                    UPDATE deliveries SET next_attempt_at = \(Self.micros(until))
                    WHERE id IN (
                        SELECT d.id FROM deliveries d JOIN UNNEST(\(ids)::bigint[], \(attempts)::bigint[]) AS l(id, attempt)
                            ON d.id = l.id AND d.attempts = l.attempt
                        WHERE d.state = 'pending' AND d.leased = 1 ORDER BY d.id FOR UPDATE OF d)
                    """
                )
            }
        }
    }

    public func watchForWork(_ heard: @escaping @Sendable (WorkNotice) -> Void) async throws {
        try await listen(on: Self.workChannel) { (payload: String) in heard(WithdrawalMessage.notice(payload)) }
    }

    public func queueStats() async throws -> QueueStats {
        try await withConnection { session in
            guard let row = try await session.row(PostgresQuery(unsafeSQL: QueueStatsSQL.queueStats)) else {
                return QueueStats(pending: 0, oldestPendingSince: nil)
            }
            return try StoredRecords.queueStats(row)
        }
    }

    public func oldestPendingBySink() async throws -> [String: Date] {
        try await withConnection { session in
            try StoredRecords.oldestPendingBySink(try await session.rows(PostgresQuery(unsafeSQL: QueueStatsSQL.oldestBySink)))
        }
    }

    public func nextDueDate(sinks: SinkFilter) async throws -> Date? {
        let (included, names) = sinks.names
        var binds = PostgresBindings()
        binds.append(names)
        binds.append(included)
        let query = PostgresQuery(
            unsafeSQL: DueDeliveriesSQL.nextDue(filter: " AND (cardinality($1::text[]) = 0 OR (pending_sinks.sink = ANY($1::text[])) = $2)"), binds: binds)
        return try await withConnection { session in try await session.row(query)?.optionalDate("due") }
    }
}
