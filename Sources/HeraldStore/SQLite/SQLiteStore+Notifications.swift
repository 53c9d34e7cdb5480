import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func accept(
        _ notification: HeraldNotification, recipients: Int, deliveries: [PlannedDelivery], idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        try await accepts.accept(notification, recipients: recipients, deliveries: deliveries, idempotency: idempotency, idempotencySince: idempotencySince)
    }

    public func acceptUsers(
        _ notification: HeraldNotification, userIDs: [String], route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery],
        idempotency: IdempotencyClaim?, idempotencySince: Date, handOff: DeliveryHandOff?
    ) async throws -> AcceptResult {
        try await accepts.acceptUsers(
            notification, userIDs: userIDs, route: route, idempotency: idempotency, idempotencySince: idempotencySince, handOff: handOff)
    }

    /// One accept inside a group-commit transaction. An accept for users writes their history
    /// rows here too (``PlannedDelivery/isHistoryWrite``) and appends them to `historyUsers`,
    /// and stores the deliveries its hand-off admits leased (``AcceptOutcome/handedOff``).
    /// - Parameter recipients: the batch's recipients (``recipients(_:of:)``), by user.
    static func accept(
        _ request: AcceptRequest, _ db: Database, recipients: [String: RecipientContext], historyUsers: inout [String], modules: StorageModules
    ) throws -> AcceptOutcome {
        let notification = request.notification
        let (count, deliveries, writesHistory): (Int, [PlannedDelivery], Bool)
        switch request.plan {
        case .planned(let recipients, let planned):
            (count, deliveries, writesHistory) = (recipients, planned, false)
        case .users(let userIDs, let route):
            let contexts = userIDs.map { recipients[$0] ?? RecipientContext(userID: $0) }
            (count, deliveries, writesHistory) = (contexts.count, contexts.flatMap(route), true)
        }
        if let earlier = try insert(notification, recipients: count, db, idempotency: request.idempotency, since: request.idempotencySince) {
            return AcceptOutcome(result: earlier)
        }
        // A scheduled broadcast's deliveries wait for its instant.
        let at = micros(notification.goesOutAt)
        var handedOff: [Delivery] = []
        if writesHistory {
            let handOff = request.handOff.map { HandOffPlan($0, notification: notification, recipients: recipients) }
            let written = try insertWritingHistory(deliveries, of: notification.id, type: notification.type, db, at: at, handOff: handOff, modules: modules)
            historyUsers += written.historyUsers
            handedOff = handOff.map { plan in written.leased.map { plan.delivery($0.delivery, id: $0.id) } } ?? []
        } else {
            try insert(deliveries, of: notification.id, db, at: at, modules: modules)
        }
        return AcceptOutcome(
            result: .accepted(NotificationReceipt(id: notification.id, recipients: count)),
            handedOff: handedOff
        )
    }

    /// Routed deliveries with their history rows (``PlannedDelivery/isHistoryWrite``) written
    /// in the same transaction, their history deliveries stored as delivered: an accept for
    /// users, a job's page and recipients due at their local time all write them so, and the
    /// history sink has nothing left to claim for them (docs/performance.md, "Scheduled sends at
    /// scale").
    /// - Returns: the users whose history rows were written, and the deliveries stored leased.
    static func insertWritingHistory(
        _ deliveries: [PlannedDelivery], of notification: ObjectID, type: String, _ db: Database, at now: Int64, handOff: HandOffPlan? = nil,
        modules: StorageModules
    ) throws -> (historyUsers: [String], leased: [(delivery: PlannedDelivery, id: Int64)]) {
        let history = deliveries.filter(\.isHistoryWrite).map(\.userID)
        try writeHistory(history.map { (notification.hex, $0) }, type: type, at: now, db)
        let leased = try insert(deliveries, of: notification, db, at: now, historyWritten: true, handOff: handOff, modules: modules)
        return (history, leased)
    }

    /// Inserts the notification and claims its idempotency key; returns what the key stands for
    /// instead (nothing stored) when it was claimed since `since`.
    static func insert(
        _ notification: HeraldNotification, recipients: Int, _ db: Database, idempotency: IdempotencyClaim?, since: Date
    ) throws -> AcceptResult? {
        let now = Self.micros(notification.timestamp)
        if let claim = idempotency {
            if let earlier = try Self.receipt(db, claim: claim, since: Self.micros(since)) {
                return earlier
            }
            try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO idempotency_keys (scope, key, request_hash, notification_id, recipients, created_at) VALUES (?, ?, ?, ?, ?, ?)"
            ).execute(arguments: [claim.scope, claim.key, claim.requestHash, notification.id.hex, recipients, now])
        }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO notifications (id, type, title, body, url, data, timestamp, distribution, priority, expires_at,
                    collapse_key, idempotency_key, target, recipients, routing_inputs, send_at, send_at_local, digest_key, digest_window)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        )
        try insert.execute(arguments: [
            notification.id.hex, notification.type, notification.title, notification.body, notification.url,
            StoredJSON.encode(data: notification.data), now, notification.distribution.rawValue, notification.priority,
            notification.expiresAt.map(Self.micros), notification.collapseKey, notification.idempotencyKey,
            try StoredJSON.encode(target: notification.target), recipients, notification.routingInputs, notification.sendAt.map(Self.micros),
            notification.sendAtLocal?.description, notification.digestKey, notification.digestWindow,
        ])
        return nil
    }

    /// - Parameter historyWritten: the history rows of these deliveries were written in this
    ///   transaction, so their deliveries are stored as delivered.
    /// - Parameter handOff: the deliveries it admits are stored leased, their first attempt
    ///   counted, as a claim leaves them.
    /// - Parameter modules: whose statements run after the deliveries (``StorageModule/whenDeliveriesStored``).
    /// - Returns: the deliveries stored leased, with their ids.
    @discardableResult
    static func insert(
        _ deliveries: [PlannedDelivery], of notification: ObjectID, _ db: Database, at now: Int64, historyWritten: Bool = false, handOff: HandOffPlan? = nil,
        modules: StorageModules
    ) throws -> [(delivery: PlannedDelivery, id: Int64)] {
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO deliveries (notification_id, sink, user_id, device_id, topic_key, distribution, state, attempts, next_attempt_at, updated_at, leased,
                    fold)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        )
        var leased: [(delivery: PlannedDelivery, id: Int64)] = []
        for delivery in deliveries {
            let written = historyWritten && delivery.isHistoryWrite
            let leasedUntil = handOff?.leaseEnd(for: delivery)
            // One that may fold waits, held, for the digest worker (docs/timing.md).
            let state = written ? DeliveryState.delivered : delivery.fold == nil ? DeliveryState.pending : DeliveryState.held
            let attempts = written || leasedUntil != nil ? 1 : 0
            try insert.execute(arguments: [
                notification.hex, delivery.sink, delivery.userID, delivery.deviceID?.hex, delivery.topic, delivery.distribution.rawValue,
                state.rawValue, attempts, written ? nil : leasedUntil ?? now, now, leasedUntil == nil ? 0 : 1, delivery.fold?.stored,
            ])
            if leasedUntil != nil { leased.append((delivery, db.lastInsertedRowID)) }
        }
        for statement in modules.afterStoring(deliveries, of: notification, at: now) { _ = try run(statement, db) }
        return leased
    }

    public func receipt(for claim: IdempotencyClaim, since: Date) async throws -> AcceptResult? {
        try await writer.read { db in try Self.receipt(db, claim: claim, since: Self.micros(since)) }
    }

    public func status(of id: ObjectID) async throws -> NotificationStatus? {
        try await writer.read { db -> NotificationStatus? in
            guard let row = try Row.fetchOne(try db.cachedStatement(sql: "SELECT * FROM notifications WHERE id = ?"), arguments: [id.hex]) else {
                return nil
            }
            let deliveries = try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT * FROM deliveries WHERE notification_id = ? ORDER BY id LIMIT ?"),
                arguments: [id.hex, NotificationStatus.deliveryListLimit]
            ).map(StoredRecords.deliveryRecord)
            var summary: [String: [DeliveryState: Int]] = [:]
            for count in try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT sink, state, COUNT(*) AS n FROM deliveries WHERE notification_id = ? GROUP BY sink, state"),
                arguments: [id.hex])
            {
                let stateText: String = try count.decode(forColumn: "state")
                if let state = DeliveryState(rawValue: stateText) {
                    summary[try count.decode(forColumn: "sink"), default: [:]][state] = try count.decode(forColumn: "n")
                }
            }
            return NotificationStatus(
                notification: try StoredRecords.notification(row), recipients: try row.decode(forColumn: "recipients"), deliveries: deliveries,
                summary: summary,
                fanOut: try Self.fanOutProgress(db, of: id))
        }
    }

    public func notification(id: ObjectID) async throws -> HeraldNotification? {
        try await writer.read { db in
            guard let row = try Row.fetchOne(try db.cachedStatement(sql: "SELECT * FROM notifications WHERE id = ?"), arguments: [id.hex]) else {
                return nil
            }
            var notification = try StoredRecords.notification(row)
            notification.routingInputs = try row.optionalText("routing_inputs")
            return notification
        }
    }

    public func recordRoutingInputs(_ inputs: RoutingInputs) async throws {
        try await writer.write { db in
            try db.execute(sql: RoutingRecordSQL.recordInputs, arguments: [inputs.id, inputs.json, Self.micros(Date())])
        }
    }

    public func routingInputs(id: String) async throws -> RoutingInputs? {
        let json = try await writer.read { db in
            try String.fetchOne(try db.cachedStatement(sql: "SELECT inputs FROM routing_inputs WHERE id = ?"), arguments: [id])
        }
        return try json.map(RoutingInputs.init(json:))
    }

    public func deliveries(of id: ObjectID, userID: String) async throws -> [DeliveryRecord] {
        try await writer.read { db in
            try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT * FROM deliveries WHERE notification_id = ? AND user_id = ? ORDER BY id"), arguments: [id.hex, userID]
            ).map(StoredRecords.deliveryRecord)
        }
    }

    public func sinkCounters(finishedSince: Date) async throws -> [SinkCounters] {
        let since = Self.micros(finishedSince)
        return try await writer.read { db in
            let rows =
                try Row.fetchAll(try db.cachedStatement(sql: SinkCountersSQL.waiting))
                + Row.fetchAll(try db.cachedStatement(sql: SinkCountersSQL.finishedSince), arguments: [since])
            var counters = try StoredRecords.sinkCounters(rows)
            for index in counters.indices {
                counters[index].lastError = try String.fetchOne(
                    try db.cachedStatement(sql: SinkCountersSQL.lastError), arguments: [counters[index].sink, since])
            }
            return counters
        }
    }

    static func receipt(_ db: Database, claim: IdempotencyClaim, since: Int64) throws -> AcceptResult? {
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(
                    sql: "SELECT \(StoredRecords.receiptColumns) WHERE k.scope = ? AND k.key = ? AND k.created_at >= ?"
                ),
                arguments: [claim.scope, claim.key, since]
            )
        else { return nil }
        return try StoredRecords.claimed(row, by: claim)
    }
}
