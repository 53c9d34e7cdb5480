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
        idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        try await accepts.acceptUsers(notification, userIDs: userIDs, route: route, idempotency: idempotency, idempotencySince: idempotencySince)
    }

    /// One accept inside a group-commit transaction.
    static func accept(_ request: AcceptRequest, _ session: PostgresSession) async throws -> AcceptResult {
        let notification = request.notification
        let (count, deliveries): (Int, [PlannedDelivery])
        switch request.plan {
        case .planned(let recipients, let planned):
            (count, deliveries) = (recipients, planned)
        case .users(let userIDs, let route):
            let contexts = try await recipients(session, userIDs: userIDs)
            (count, deliveries) = (contexts.count, contexts.flatMap(route))
        }
        if let earlier = try await insert(notification, recipients: count, session, idempotency: request.idempotency, since: request.idempotencySince) {
            return earlier
        }
        try await insert(deliveries, of: notification.id, session, at: micros(notification.timestamp))
        return .accepted(NotificationReceipt(id: notification.id, recipients: count))
    }

    /// Inserts the notification and claims its idempotency key; returns what the key stands for
    /// instead (nothing stored) when it was claimed since `since`.
    static func insert(
        _ notification: HeraldNotification, recipients: Int, _ session: PostgresSession, idempotency: IdempotencyClaim?, since: Date
    ) async throws -> AcceptResult? {
        let now = micros(notification.timestamp)
        if let claim = idempotency {
            // The upsert takes the key's row lock, so a duplicate accepted at the same moment (in
            // this process or another) waits for the first to commit, then sees its receipt.
            let claimed = try await session.count(
                """
                INSERT INTO idempotency_keys (scope, key, request_hash, notification_id, recipients, created_at)
                VALUES (\(claim.scope), \(claim.key), \(claim.requestHash), \(notification.id.hex), \(recipients), \(now))
                ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, notification_id = excluded.notification_id,
                    recipients = excluded.recipients, created_at = excluded.created_at
                WHERE idempotency_keys.created_at < \(micros(since))
                RETURNING key
                """
            )
            if claimed == 0, let earlier = try await receipt(session, claim: claim, since: micros(since)) {
                return earlier
            }
        }
        try await session.execute(
            """
            INSERT INTO notifications (id, type, title, body, url, data, timestamp, distribution, priority, expires_at,
                collapse_key, idempotency_key, target, recipients)
            VALUES (\(notification.id.hex), \(notification.type), \(notification.title), \(notification.body), \(notification.url),
                \(try StoredJSON.encode(notification.data)), \(now), \(notification.distribution.rawValue), \(notification.priority),
                \(notification.expiresAt.map(micros)), \(notification.collapseKey), \(notification.idempotencyKey),
                \(try StoredJSON.encode(target: notification.target)), \(recipients))
            """
        )
        return nil
    }

    /// Inserts deliveries in one statement. Arrays cannot carry NULLs here, so an absent device
    /// or topic travels as '' and becomes NULL again in SQL.
    static func insert(_ deliveries: [PlannedDelivery], of notification: ObjectID, _ session: PostgresSession, at now: Int64) async throws {
        guard !deliveries.isEmpty else { return }
        for chunk in deliveries.chunked(5_000) {
            let sinks = chunk.map(\.sink)
            let users = chunk.map(\.userID)
            let devices = chunk.map { $0.deviceID?.hex ?? "" }
            let topics = chunk.map { $0.topic ?? "" }
            let distributions = chunk.map(\.distribution.rawValue)
            try await session.execute(
                """
                INSERT INTO deliveries (notification_id, sink, user_id, device_id, topic_key, distribution, state, attempts, next_attempt_at, updated_at)
                SELECT \(notification.hex), sink, user_id, NULLIF(device_id, ''), NULLIF(topic_key, ''), distribution, 'pending', 0, \(now), \(now)
                FROM UNNEST(\(sinks)::text[], \(users)::text[], \(devices)::text[], \(topics)::text[], \(distributions)::text[])
                    AS planned(sink, user_id, device_id, topic_key, distribution)
                """
            )
        }
    }

    public func receipt(for claim: IdempotencyClaim, since: Date) async throws -> AcceptResult? {
        try await withConnection { session in try await Self.receipt(session, claim: claim, since: Self.micros(since)) }
    }

    static func receipt(_ session: PostgresSession, claim: IdempotencyClaim, since: Int64) async throws -> AcceptResult? {
        guard
            let row = try await session.row(
                """
                SELECT notification_id, recipients, request_hash FROM idempotency_keys
                WHERE scope = \(claim.scope) AND key = \(claim.key) AND created_at >= \(since)
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

    public func sinkCounters() async throws -> [SinkCounters] {
        try await withConnection { session in
            var counters: [String: SinkCounters] = [:]
            for row in try await session.rows("SELECT sink, state, COUNT(*) AS n FROM deliveries GROUP BY sink, state") {
                let sink = try row.text("sink")
                guard let state = DeliveryState(rawValue: try row.text("state")) else { continue }
                counters[sink, default: SinkCounters(sink: sink, counts: [:], lastError: nil)].counts[state] = try row.int("n")
            }
            for sink in counters.keys {
                counters[sink]?.lastError = try await session.row(
                    """
                    SELECT last_error FROM deliveries WHERE sink = \(sink) AND last_error IS NOT NULL
                    ORDER BY updated_at DESC, id DESC LIMIT 1
                    """
                )?.optionalText("last_error")
            }
            return counters.values.sorted { $0.sink < $1.sink }
        }
    }
}
