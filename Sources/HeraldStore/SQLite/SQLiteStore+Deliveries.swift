import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func claimDue(now: Date, limit: Int, lease: Duration, sinks: SinkFilter) async throws -> [Delivery] {
        try await backgroundWrite { db in
            let nowMicros = Self.micros(now)
            let claimed = try Self.sinksToClaim(sinks, db)
            // Each sink read on its own, earliest first, and the earliest of all kept: the same
            // deliveries as one read in due order, without walking an open circuit's backlog
            // (DueDeliveriesSQL).
            func due(_ attempts: String) throws -> [Int64] {
                let statement = try db.cachedStatement(sql: DueDeliveriesSQL.dueOfSink(attempts))
                var rows: [(id: Int64, due: Int64)] = []
                for sink in claimed {
                    for row in try Row.fetchAll(statement, arguments: [sink, nowMicros, limit]) {
                        rows.append((try row.decode(Int64.self, atIndex: 0), try row.decode(Int64.self, atIndex: 1)))
                    }
                }
                if claimed.count > 1 { rows.sort { ($0.due, $0.id) < ($1.due, $1.id) } }
                return rows.prefix(max(limit, 0)).map(\.id)
            }
            // First attempts and retries apart, each through its own index (DueDeliveriesSQL):
            // retries take a bounded share (RetryShare).
            let firsts = try due(DueDeliveriesSQL.firstAttempt)
            let retries = try due(DueDeliveriesSQL.retry).prefix(RetryShare.of(limit, firstAttempts: firsts.count))
            let ids = Array(retries) + firsts.prefix(max(0, limit - retries.count))
            guard !ids.isEmpty else { return [] }
            // The lease is the next due time: a worker that dies before recording leaves the
            // delivery due again once the lease runs out. The attempt is counted at claim time so
            // a delivery that crashes its worker still runs out of attempts.
            let leaseUntil = nowMicros.saturatingAdd(Int64(saturating: lease.seconds * 1_000_000))
            let (list, listArguments) = Self.inList(ids)
            // Cached statements: these run for every batch, and preparing SQL costs more than running it.
            try db.cachedStatement(sql: "UPDATE deliveries SET next_attempt_at = ?, attempts = attempts + 1, leased = 1, updated_at = ? WHERE id IN (\(list))")
                .execute(arguments: StatementArguments([leaseUntil, nowMicros]) + listArguments)
            let rows = try PositionedRow.fetchAll(
                try db.cachedStatement(
                    sql: """
                        SELECT \(StoredRecords.claimedColumns)
                        FROM deliveries c
                        JOIN notifications n ON n.id = c.notification_id
                        LEFT JOIN devices dev ON dev.id = c.device_id AND dev.user_id = c.user_id
                        WHERE c.id IN (\(list))
                        ORDER BY c.id
                        """),
                arguments: listArguments
            )
            return try StoredRecords.claimedDeliveries(rows)
        }
    }

    public func record(_ updates: [DeliveryUpdate], at date: Date) async throws {
        guard !updates.isEmpty else { return }
        try await backgroundWrite { db in
            let now = Self.micros(date)
            // Fenced by the attempt: a stale worker's outcome changes nothing.
            let statement = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET state = ?, last_error = ?, next_attempt_at = ?, leased = 0, updated_at = ?, attempts = attempts - ?
                    WHERE id = ? AND attempts = ? AND state = 'pending'
                    """
            )
            var applied: [DeliveryUpdate] = []
            for update in updates {
                try statement.execute(arguments: [
                    update.state.rawValue, update.lastError, update.state == .pending ? update.nextAttemptAt.map(Self.micros) ?? now : nil, now,
                    update.attemptsGivenBack, update.id, update.attempts,
                ])
                if db.changesCount > 0 { applied.append(update) }
            }
            for update in applied {
                if let device = update.removeDevice {
                    try Self.removeDevice(db, id: device.hex, reason: "device token was reported gone: \(update.lastError ?? "unregistered")", at: now)
                }
            }
        }
    }

    public func extendLeases(_ leases: [DeliveryLease], until: Date) async throws {
        guard !leases.isEmpty else { return }
        // Not in the background writes' turns: a heartbeat is small, and one waiting behind
        // claims and pages could let the leases it keeps run out.
        try await writer.write { db in
            let statement = try db.cachedStatement(
                sql: "UPDATE deliveries SET next_attempt_at = ? WHERE id = ? AND attempts = ? AND state = 'pending' AND leased = 1"
            )
            for lease in leases { try statement.execute(arguments: [Self.micros(until), lease.id, lease.attempt]) }
        }
    }

    public func queueStats() async throws -> QueueStats {
        try await writer.read { db in
            guard let row = try Row.fetchOne(try db.cachedStatement(sql: QueueStatsSQL.queueStats)) else {
                return QueueStats(pending: 0, oldestPendingSince: nil)
            }
            return try StoredRecords.queueStats(row)
        }
    }

    public func oldestPendingBySink() async throws -> [String: Date] {
        try await writer.read { db in
            try StoredRecords.oldestPendingBySink(try Row.fetchAll(try db.cachedStatement(sql: QueueStatsSQL.oldestBySink)))
        }
    }

    public func nextDueDate(sinks: SinkFilter) async throws -> Date? {
        try await writer.read { db in
            let (filter, arguments) = Self.sinkCondition(sinks)
            return Self.date(try Int64.fetchOne(try db.cachedStatement(sql: DueDeliveriesSQL.nextDue(filter: filter)), arguments: arguments + arguments))
        }
    }

    /// The sinks a claim reads: the one probed, or every sink with a pending delivery
    /// (``QueueStatsSQL/pendingSinks``, one search each) but those left out.
    static func sinksToClaim(_ sinks: SinkFilter, _ db: Database) throws -> [String] {
        if case .only(let sink) = sinks { return [sink] }
        let pending = try String.fetchAll(try db.cachedStatement(sql: QueueStatsSQL.sinksWithPending))
        guard case .excluding(let left) = sinks else { return pending }
        return pending.filter { !left.contains($0) }
    }

    /// ` AND pending_sinks.sink [NOT] IN (…)` for a filter, with its arguments.
    static func sinkCondition(_ sinks: SinkFilter) -> (String, StatementArguments) {
        let (included, names) = sinks.names
        guard !names.isEmpty else { return ("", []) }
        return (" AND pending_sinks.sink \(included ? "" : "NOT ")IN (\(placeholders(names.count)))", StatementArguments(names))
    }
}
