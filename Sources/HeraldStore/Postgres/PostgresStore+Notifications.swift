import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
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

    /// A group commit's accepts in three statements, whatever their number: the named users'
    /// locks, their settings and devices in one read, and one write of everything
    /// (``write(_:_:)``). Over a network each statement is a round trip, so one per accept
    /// would bound a batch by latency, not by the database. Idempotency keys are claimed one by
    /// one, in order, since a later request may replay an earlier one of the same batch.
    static func accept(batch requests: [AcceptRequest], _ session: PostgresSession, modules: StorageModules) async throws -> [AcceptOutcome] {
        var named: [String] = []
        var seen = Set<String>()
        for request in requests {
            guard case .users(let userIDs, _) = request.plan else { continue }
            for user in userIDs where seen.insert(user).inserted { named.append(user) }
        }
        // Each named user's lock from before their devices are read until the commit: a
        // registration that moves one of them to another user, or an erasure, waits for this
        // batch and then fails what it queued (and every process withdraws what it handed off),
        // or goes first and this read no longer finds the device. Without it a move committed
        // between this read and the commit failed nothing of this batch, and its hand-off
        // pushed to the device's new owner. The same locks order the history rows written below.
        if !named.isEmpty { try await lockHistory(of: named, session) }
        let contexts = try await Self.recipientsByID(session, userIDs: named)
        let earlier = try await claimInKeyOrder(requests, session)
        var outcomes: [AcceptOutcome] = []
        var stored: [(notification: HeraldNotification, recipients: Int)] = []
        var deliveries: [StoredDelivery] = []
        // Per accept: its hand-off plan and the indexes of its leased rows in `deliveries`.
        var handOffs: [(outcome: Int, plan: HandOffPlan, rows: [Int])] = []
        for (index, request) in requests.enumerated() {
            if let earlier = earlier[index] {
                outcomes.append(AcceptOutcome(result: earlier))
                continue
            }
            let notification = request.notification
            let count = request.plan.recipients
            let (planned, writesHistory): ([PlannedDelivery], Bool)
            switch request.plan {
            case .planned(_, let given):
                (planned, writesHistory) = (given, false)
            case .users(let userIDs, let route):
                (planned, writesHistory) = (userIDs.flatMap { route(contexts[$0] ?? RecipientContext(userID: $0)) }, true)
            }
            stored.append((notification, count))
            // A scheduled broadcast's deliveries wait for its instant.
            let at = micros(notification.goesOutAt)
            let plan = writesHistory ? request.handOff.map { HandOffPlan($0, notification: notification, recipients: contexts) } : nil
            var leasedRows: [Int] = []
            for delivery in planned {
                let written = writesHistory && delivery.isHistoryWrite
                let leasedUntil = plan?.leaseEnd(for: delivery)
                if leasedUntil != nil { leasedRows.append(deliveries.count) }
                deliveries.append(StoredDelivery(notification: notification.id, at: at, delivery: delivery, historyWritten: written, leasedUntil: leasedUntil))
            }
            if let plan, !leasedRows.isEmpty { handOffs.append((outcomes.count, plan, leasedRows)) }
            outcomes.append(AcceptOutcome(result: .accepted(NotificationReceipt(id: notification.id, recipients: count))))
        }
        // Only named users' history is written here, and their locks are held (above).
        let history = StoredWrites.historyRows(of: deliveries)
        // Other processes' workers are woken only for rows they may claim now.
        let claimable = deliveries.contains { !$0.historyWritten && $0.leasedUntil == nil }
        let leasedIDs = try await write(
            StoredWrites(notifications: stored, history: history, deliveries: deliveries, wakeWorkers: claimable), session)
        try await runModuleStatements(after: deliveries, modules, session)
        // `write` returns the leased rows' ids in the order of `deliveries`, which is the order
        // `handOffs` lists them in.
        let idByRow = Dictionary(uniqueKeysWithValues: zip(handOffs.flatMap(\.rows), leasedIDs))
        for (outcome, plan, rows) in handOffs {
            // A row whose id did not come back stays leased, and is claimed when its lease runs out.
            outcomes[outcome].handedOff = rows.compactMap { row in idByRow[row].map { plan.delivery(deliveries[row].delivery, id: $0) } }
        }
        return outcomes
    }

    /// A delivery to insert; `historyWritten` when its history row is written in the same
    /// transaction, so it is stored as delivered.
    struct StoredDelivery {
        var notification: ObjectID
        var at: Int64
        var delivery: PlannedDelivery
        var historyWritten = false
        /// Stored leased until then, its first attempt counted, for a hand-off.
        var leasedUntil: Int64?
    }

    /// Rows an accept writes, all in one statement.
    struct StoredWrites {
        var notifications: [(notification: HeraldNotification, recipients: Int)] = []
        /// History rows, written once per (notification, user) and announced to live streams;
        /// the caller holds ``lockHistory(of:_:)`` for their users.
        var history: [(notification: String, user: String, at: Int64)] = []
        var deliveries: [StoredDelivery] = []
        /// Wakes idle workers in every process once the transaction commits.
        var wakeWorkers = false

        /// The history rows of those of `deliveries` stored as delivered because their rows are
        /// written with them (``StoredDelivery/historyWritten``).
        static func historyRows(of deliveries: [StoredDelivery]) -> [(notification: String, user: String, at: Int64)] {
            deliveries.filter(\.historyWritten).map { ($0.notification.hex, $0.delivery.userID, $0.at) }
        }
    }

    /// Everything in `writes` in one statement (``WriteStatement``).
    /// - Returns: the ids of the deliveries stored leased, in the order of `writes.deliveries`.
    @discardableResult
    static func write(_ writes: StoredWrites, _ session: PostgresSession) async throws -> [Int64] {
        try await session.row(try WriteStatement(writes))?.cell("leased_ids").decode([Int64]?.self) ?? []
    }

    /// Everything in a ``StoredWrites`` in one statement, whatever the number of rows: over a
    /// network each statement is a round trip the group commit waits for, and its batch with it.
    /// Arrays cannot carry NULLs here, so optional columns travel with a flag saying whether they
    /// are set ('' stands for an absent device or topic, -1 for no lease).
    struct WriteStatement: PreparedQuery {
        static let name = "herald_write"
        // An empty batch encodes no target, so it cannot throw.
        static let sql = (try? WriteStatement(StoredWrites()))?.query.sql ?? ""
        /// The history rows' live-stream notices, written once rather than for every group commit.
        private static let historyNotices = StoreChangeMessage.historyNotices(of: "written", channel: changeChannel)
        let query: PostgresQuery

        init(_ writes: StoredWrites) throws {
            let all = writes.notifications.map(\.notification)
            let ids = all.map(\.id.hex)
            let types = all.map(\.type)
            let titles = all.map(\.title)
            let bodies = all.map(\.body)
            let urls = all.map { $0.url ?? "" }
            let hasURL = all.map { $0.url != nil }
            let data = all.map { StoredJSON.encode(data: $0.data) }
            let timestamps = all.map { micros($0.timestamp) }
            let distributions = all.map(\.distribution.rawValue)
            let priorities = all.map { Int64($0.priority) }
            let expiries = all.map { $0.expiresAt.map(micros) ?? 0 }
            let hasExpiry = all.map { $0.expiresAt != nil }
            let collapseKeys = all.map { $0.collapseKey ?? "" }
            let hasCollapseKey = all.map { $0.collapseKey != nil }
            let idempotencyKeys = all.map { $0.idempotencyKey ?? "" }
            let hasIdempotencyKey = all.map { $0.idempotencyKey != nil }
            let targets = try all.map { try StoredJSON.encode(target: $0.target) }
            let recipients = writes.notifications.map { Int64($0.recipients) }
            let routingInputs = all.map { $0.routingInputs ?? "" }
            let sendAts = all.map { $0.sendAt.map(micros) ?? -1 }
            let sendAtLocals = all.map { $0.sendAtLocal?.description ?? "" }
            let digestKeys = all.map { $0.digestKey ?? "" }
            let digestWindows = all.map { $0.digestWindow ?? 0 }

            let deliveries = writes.deliveries
            let deliveryNotifications = deliveries.map(\.notification.hex)
            let deliveryTimes = deliveries.map(\.at)
            let sinks = deliveries.map(\.delivery.sink)
            let deliveryUsers = deliveries.map(\.delivery.userID)
            let devices = deliveries.map { $0.delivery.deviceID?.hex ?? "" }
            let topics = deliveries.map { $0.delivery.topic ?? "" }
            let deliveryDistributions = deliveries.map(\.delivery.distribution.rawValue)
            let delivered = deliveries.map(\.historyWritten)
            let leasedUntil = deliveries.map { $0.leasedUntil ?? -1 }
            let folds = deliveries.map { $0.delivery.fold?.stored ?? "" }

            let historyNotifications = writes.history.map(\.notification)
            let historyUsers = writes.history.map(\.user)
            let historyTimes = writes.history.map(\.at)
            // Sub-statements of one WITH cannot see each other's rows; none needs to. The delivery
            // ids are drawn in `planned` (materialised once: it calls nextval) so the leased ones
            // come back paired with their place in the arrays, whatever order the insert takes.
            query = """
                WITH stored AS (
                    INSERT INTO notifications (id, type, title, body, url, data, timestamp, distribution, priority, expires_at,
                        collapse_key, idempotency_key, target, recipients, routing_inputs, send_at, send_at_local, digest_key, digest_window)
                    SELECT id, type, title, body, CASE WHEN has_url THEN url END, data, ts, distribution, priority,
                        CASE WHEN has_expiry THEN expires_at END, CASE WHEN has_collapse_key THEN collapse_key END,
                        CASE WHEN has_idempotency_key THEN idempotency_key END, target, recipients, NULLIF(routing_inputs, ''), NULLIF(send_at, -1),
                        NULLIF(send_at_local, ''), NULLIF(digest_key, ''), NULLIF(digest_window, 0)
                    FROM UNNEST(\(ids)::text[], \(types)::text[], \(titles)::text[], \(bodies)::text[], \(urls)::text[], \(hasURL)::bool[],
                        \(data)::text[], \(timestamps)::int8[], \(distributions)::text[], \(priorities)::int8[], \(expiries)::int8[], \(hasExpiry)::bool[],
                        \(collapseKeys)::text[], \(hasCollapseKey)::bool[], \(idempotencyKeys)::text[], \(hasIdempotencyKey)::bool[],
                        \(targets)::text[], \(recipients)::int8[], \(routingInputs)::text[], \(sendAts)::int8[], \(sendAtLocals)::text[],
                        \(digestKeys)::text[], \(digestWindows)::int8[])
                        AS n(id, type, title, body, url, has_url, data, ts, distribution, priority, expires_at, has_expiry, collapse_key,
                            has_collapse_key, idempotency_key, has_idempotency_key, target, recipients, routing_inputs, send_at, send_at_local,
                            digest_key, digest_window)
                ), planned AS MATERIALIZED (
                    SELECT \(unescaped: DeliveryIDs.next) AS id, p.*
                    FROM UNNEST(\(deliveryNotifications)::text[], \(deliveryTimes)::int8[], \(sinks)::text[], \(deliveryUsers)::text[], \(devices)::text[],
                        \(topics)::text[], \(deliveryDistributions)::text[], \(delivered)::bool[], \(leasedUntil)::int8[],
                        \(folds)::text[]) WITH ORDINALITY
                        AS p(notification_id, at, sink, user_id, device_id, topic_key, distribution, written, leased_until, fold, ord)
                ), queued AS (
                    INSERT INTO deliveries (id, notification_id, sink, user_id, device_id, topic_key, distribution, state, attempts, next_attempt_at, updated_at,
                        leased, fold)
                    -- For a schema from before v23, whose ids were an identity (a conversion's rehearsal).
                    OVERRIDING SYSTEM VALUE
                    SELECT id, notification_id, sink, user_id, NULLIF(device_id, ''), NULLIF(topic_key, ''), distribution,
                        CASE WHEN written THEN 'delivered' WHEN fold <> '' THEN 'held' ELSE 'pending' END, CASE WHEN written OR leased_until >= 0 THEN 1 ELSE 0 END,
                        CASE WHEN written THEN NULL WHEN leased_until >= 0 THEN leased_until ELSE at END, at, CASE WHEN leased_until >= 0 THEN 1 ELSE 0 END,
                        NULLIF(fold, '')
                    FROM planned
                ), written AS (
                    INSERT INTO history (notification_id, user_id, read, created_at, type)
                    SELECT notification_id, user_id, 0, created_at,
                        -- This statement's own notifications are not visible to its sub-statements.
                        COALESCE((SELECT w.type FROM UNNEST(\(ids)::text[], \(types)::text[]) AS w(id, type) WHERE w.id = entry.notification_id),
                            \(unescaped: InboxSQL.type(of: "entry.notification_id")))
                    FROM UNNEST(\(historyNotifications)::text[], \(historyUsers)::text[], \(historyTimes)::int8[]) AS entry(notification_id, user_id, created_at)
                    ON CONFLICT (notification_id, user_id) DO NOTHING
                    RETURNING user_id
                ), \(unescaped: Self.historyNotices), woken AS (
                    SELECT pg_notify(\(workChannel), '') WHERE \(writes.wakeWorkers)
                )
                SELECT (SELECT COUNT(*) FROM announced) AS notices, (SELECT COUNT(*) FROM woken) AS woken,
                    (SELECT array_agg(id ORDER BY ord) FILTER (WHERE leased_until >= 0) FROM planned) AS leased_ids
                """
        }
    }

    /// Inserts the notification and claims its idempotency key; returns what the key stands for
    /// instead (nothing stored) when it was claimed since `since`.
    static func insert(
        _ notification: HeraldNotification, recipients: Int, _ session: PostgresSession, idempotency: IdempotencyClaim?, since: Date
    ) async throws -> AcceptResult? {
        if let earlier = try await claim(idempotency, for: notification, recipients: recipients, session, since: since) { return earlier }
        try await write(StoredWrites(notifications: [(notification, recipients)]), session)
        return nil
    }

    /// Claims the batch's idempotency keys in (scope, key) order, a key twice in the batch in
    /// request order: a claim takes the key's row lock until the commit, so two processes whose
    /// batches held the same keys in opposite orders would each wait for the other (a deadlock
    /// PostgreSQL breaks by failing one whole batch). - Returns: by request index, what a key
    /// already stands for.
    static func claimInKeyOrder(_ requests: [AcceptRequest], _ session: PostgresSession) async throws -> [Int: AcceptResult] {
        let keyed = requests.enumerated().compactMap { index, request in request.idempotency.map { (index: index, claim: $0) } }
        var earlier: [Int: AcceptResult] = [:]
        for (index, claim) in keyed.sorted(by: { ($0.claim.scope, $0.claim.key, $0.index) < ($1.claim.scope, $1.claim.key, $1.index) }) {
            let request = requests[index]
            earlier[index] = try await Self.claim(
                claim, for: request.notification, recipients: request.plan.recipients, session, since: request.idempotencySince)
        }
        return earlier
    }

    /// Claims `idempotency` (if any) for `notification`; returns what the key stands for instead
    /// when it was claimed since `since`.
    static func claim(
        _ idempotency: IdempotencyClaim?, for notification: HeraldNotification, recipients: Int, _ session: PostgresSession, since: Date
    ) async throws -> AcceptResult? {
        guard let claim = idempotency else { return nil }
        // The upsert takes the key's row lock, so a duplicate accepted at the same moment (in
        // this process or another) waits for the first to commit, then sees its receipt.
        let claimed = try await session.count(
            """
            INSERT INTO idempotency_keys (scope, key, request_hash, notification_id, recipients, created_at)
            VALUES (\(claim.scope), \(claim.key), \(claim.requestHash), \(notification.id.hex), \(recipients), \(micros(notification.timestamp)))
            ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, notification_id = excluded.notification_id,
                recipients = excluded.recipients, created_at = excluded.created_at
            WHERE idempotency_keys.created_at < \(micros(since))
            RETURNING key
            """
        )
        guard claimed == 0 else { return nil }
        return try await receipt(session, claim: claim, since: micros(since))
    }

    /// Inserts one notification's deliveries (``write(_:_:)`` for those of several), then runs
    /// the modules' statements for them.
    /// - Parameter writingHistory: their history rows (``PlannedDelivery/isHistoryWrite``) are
    ///   written too, their history deliveries stored as delivered, as an accept for users writes
    ///   them, so the history sink has nothing left to claim for them (docs/performance.md,
    ///   "Scheduled sends at scale"); the caller holds ``lockHistory(of:_:)`` for their users.
    static func insert(
        _ deliveries: [PlannedDelivery], of notification: ObjectID, _ session: PostgresSession, at now: Int64, writingHistory: Bool = false,
        modules: StorageModules
    ) async throws {
        let stored = deliveries.map {
            StoredDelivery(notification: notification, at: now, delivery: $0, historyWritten: writingHistory && $0.isHistoryWrite)
        }
        try await write(StoredWrites(history: StoredWrites.historyRows(of: stored), deliveries: stored), session)
        try await runModuleStatements(after: stored, modules, session)
    }

    /// The modules' statements for deliveries just written (``StorageModule/whenDeliveriesStored``),
    /// one notification at a time in the order written; none, and no round trip, when no module asks.
    static func runModuleStatements(after deliveries: [StoredDelivery], _ modules: StorageModules, _ session: PostgresSession) async throws {
        guard modules.watchDeliveries else { return }
        var start = deliveries.startIndex
        while start < deliveries.endIndex {
            let first = deliveries[start]
            let end = deliveries[start...].firstIndex { $0.notification != first.notification || $0.at != first.at } ?? deliveries.endIndex
            for statement in modules.afterStoring(deliveries[start..<end].map(\.delivery), of: first.notification, at: first.at) {
                _ = try await run(statement, session)
            }
            start = end
        }
    }

    public func receipt(for claim: IdempotencyClaim, since: Date) async throws -> AcceptResult? {
        try await withConnection { session in try await Self.receipt(session, claim: claim, since: Self.micros(since)) }
    }

    static func receipt(_ session: PostgresSession, claim: IdempotencyClaim, since: Int64) async throws -> AcceptResult? {
        guard
            let row = try await session.row(
                """
                SELECT \(unescaped: StoredRecords.receiptColumns)
                WHERE k.scope = \(claim.scope) AND k.key = \(claim.key) AND k.created_at >= \(since)
                """
            )
        else { return nil }
        return try StoredRecords.claimed(row, by: claim)
    }

    public func status(of id: ObjectID) async throws -> NotificationStatus? {
        try await withConnection { session -> NotificationStatus? in
            guard let row = try await session.row("SELECT * FROM notifications WHERE id = \(id.hex)") else { return nil }
            let deliveries = try await session.rows(
                "SELECT * FROM deliveries WHERE notification_id = \(id.hex) ORDER BY id LIMIT \(NotificationStatus.deliveryListLimit)"
            ).map(StoredRecords.deliveryRecord)
            var summary: [String: [DeliveryState: Int]] = [:]
            for count in try await session.rows(
                "SELECT sink, state, COUNT(*) AS n FROM deliveries WHERE notification_id = \(id.hex) GROUP BY sink, state"
            ) {
                if let state = DeliveryState(rawValue: try count.text("state")) { summary[try count.text("sink"), default: [:]][state] = try count.int("n") }
            }
            return NotificationStatus(
                notification: try StoredRecords.notification(row), recipients: try row.int("recipients"), deliveries: deliveries, summary: summary,
                fanOut: try await Self.fanOutProgress(session, of: id)
            )
        }
    }

    public func notification(id: ObjectID) async throws -> HeraldNotification? {
        try await withConnection { session -> HeraldNotification? in
            guard let row = try await session.row("SELECT * FROM notifications WHERE id = \(id.hex)") else { return nil }
            var notification = try StoredRecords.notification(row)
            notification.routingInputs = try row.optionalText("routing_inputs")
            return notification
        }
    }

    public func recordRoutingInputs(_ inputs: RoutingInputs) async throws {
        var binds = PostgresBindings()
        binds.append(inputs.id)
        binds.append(inputs.json)
        binds.append(Self.micros(Date()))
        let query = PostgresQuery(unsafeSQL: RoutingRecordSQL.recordInputs, binds: binds)
        try await withConnection { session in try await session.execute(query) }
    }

    public func routingInputs(id: String) async throws -> RoutingInputs? {
        let json = try await withConnection { session in try await session.row("SELECT inputs FROM routing_inputs WHERE id = \(id)")?.text("inputs") }
        return try json.map(RoutingInputs.init(json:))
    }

    public func deliveries(of id: ObjectID, userID: String) async throws -> [DeliveryRecord] {
        try await withConnection { session in
            try await session.rows("SELECT * FROM deliveries WHERE notification_id = \(id.hex) AND user_id = \(userID) ORDER BY id").map(
                StoredRecords.deliveryRecord)
        }
    }

    public func sinkCounters(finishedSince: Date) async throws -> [SinkCounters] {
        var binds = PostgresBindings()
        binds.append(Self.micros(finishedSince))
        let finished = PostgresQuery(unsafeSQL: SinkCountersSQL.finishedSince, binds: binds)
        return try await withConnection { session in
            let rows =
                try await session.rows(PostgresQuery(unsafeSQL: SinkCountersSQL.waiting))
                + session.rows(finished)
            var counters = try StoredRecords.sinkCounters(rows)
            for index in counters.indices {
                var binds = PostgresBindings()
                binds.append(counters[index].sink)
                binds.append(Self.micros(finishedSince))
                counters[index].lastError = try await session.row(PostgresQuery(unsafeSQL: SinkCountersSQL.lastError, binds: binds))?.optionalText("last_error")
            }
            return counters
        }
    }
}
