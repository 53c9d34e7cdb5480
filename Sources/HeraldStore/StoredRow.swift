import Foundation
import HeraldCore

/// One result row, whichever engine read it. Both stores keep the same column names and
/// types (TEXT, 64-bit integers, JSON as text, times as microseconds), so one set of mappers
/// in ``StoredRecords`` turns rows into model values for both.
package protocol StoredRow {
    func text(_ column: String) throws -> String
    func optionalText(_ column: String) throws -> String?
    func integer(_ column: String) throws -> Int64
    func optionalInteger(_ column: String) throws -> Int64?
}

extension StoredRow {
    /// A required column from the optional read: NULL is a storage error, not a crash. Engines
    /// whose own decoder refuses NULL (PostgreSQL's) keep their own.
    package func text(_ column: String) throws -> String {
        guard let value = try optionalText(column) else { throw StoredRecords.null(column) }
        return value
    }

    package func integer(_ column: String) throws -> Int64 {
        guard let value = try optionalInteger(column) else { throw StoredRecords.null(column) }
        return value
    }

    package func int(_ column: String) throws -> Int { Int(try integer(column)) }

    package func bool(_ column: String) throws -> Bool { try integer(column) != 0 }

    package func date(_ column: String) throws -> Date { Timestamp.date(microseconds: try integer(column)) }

    package func optionalDate(_ column: String) throws -> Date? { try optionalInteger(column).map(Timestamp.date(microseconds:)) }

    /// A column that must hold a 24-hex id; a corrupt value is a storage error, not a crash.
    package func objectID(_ column: String) throws -> ObjectID {
        let text = try text(column)
        guard let id = ObjectID(text) else { throw StoredRecords.corrupt(column, text) }
        return id
    }

    package func optionalObjectID(_ column: String) throws -> ObjectID? {
        guard let text = try optionalText(column) else { return nil }
        guard let id = ObjectID(text) else { throw StoredRecords.corrupt(column, text) }
        return id
    }

    package func json<T: Decodable>(_ type: T.Type, _ column: String) throws -> T? {
        try StoredJSON.decode(type, from: try optionalText(column))
    }

    package func list(_ column: String) throws -> [String] {
        try json([String].self, column) ?? []
    }
}

/// Rows to model values, shared by the SQLite and PostgreSQL stores.
package enum StoredRecords {
    package static func null(_ column: String) -> HeraldError {
        HeraldError(.internal, code: "storage_corrupt", "column \(column) is null")
    }

    package static func corrupt(_ column: String, _ value: String) -> HeraldError {
        HeraldError(.internal, code: "storage_corrupt", "column \(column) holds '\(value)', not an id")
    }

    /// A row of `notifications` (or a join that selects its columns under their own names).
    package static func notification(_ row: some StoredRow) throws -> HeraldNotification {
        var notification = HeraldNotification(
            id: try row.objectID("id"), type: try row.text("type"), title: try row.text("title"), body: try row.text("body"),
            url: try row.optionalText("url"), data: try row.json([String: String].self, "data") ?? [:],
            timestamp: try row.date("timestamp"), distribution: Distribution(rawValue: try row.text("distribution")) ?? .alert,
            priority: try row.int("priority"), expiresAt: try row.optionalDate("expires_at"), collapseKey: try row.optionalText("collapse_key"),
            idempotencyKey: try row.optionalText("idempotency_key"), target: try StoredJSON.decodeTarget(try row.text("target"))
        )
        notification.sendAt = try row.optionalDate("send_at")
        notification.sendAtLocal = try row.optionalText("send_at_local").flatMap(LocalSendTime.init)
        notification.digestKey = try row.optionalText("digest_key")
        notification.digestWindow = try row.optionalInteger("digest_window")
        return notification
    }

    /// What a stored idempotency key (`notification_id`, `recipients`, `request_hash`) means for
    /// `claim`: the first answer again for the same request, a reused key for another.
    /// An idempotency key (`k`) with its notification's schedule, for ``claimed(_:by:)``;
    /// append the `WHERE`.
    static let receiptColumns = """
        k.notification_id, k.recipients, k.request_hash, n.send_at, n.send_at_local
        FROM idempotency_keys k LEFT JOIN notifications n ON n.id = k.notification_id
        """

    package static func claimed(_ row: some StoredRow, by claim: IdempotencyClaim) throws -> AcceptResult {
        // A scheduled send's first answer said when it goes out: the replay says it again.
        let receipt = NotificationReceipt(
            id: try row.objectID("notification_id"), recipients: try row.int("recipients"), sendAt: try row.optionalDate("send_at"),
            sendAtLocal: try row.optionalText("send_at_local").flatMap(LocalSendTime.init))
        return try row.text("request_hash") == claim.requestHash ? .replayed(receipt) : .keyReused(receipt)
    }

    package static func deliveryRecord(_ row: some StoredRow) throws -> DeliveryRecord {
        DeliveryRecord(
            id: try row.integer("id"), sink: try row.text("sink"), userID: try row.text("user_id"), deviceID: try row.optionalObjectID("device_id"),
            topic: try row.optionalText("topic_key"), distribution: Distribution(rawValue: try row.text("distribution")) ?? .alert,
            state: DeliveryState(rawValue: try row.text("state")) ?? .pending, attempts: try row.int("attempts"),
            lastError: try row.optionalText("last_error"), nextAttemptAt: try row.optionalDate("next_attempt_at"), updatedAt: try row.date("updated_at")
        )
    }

    /// A claimed delivery: `delivery_*` columns, the notification's own, and the device's as `dev_*`.
    package static func claimedDelivery(_ row: some StoredRow, notification: HeraldNotification) throws -> Delivery {
        // LEFT JOIN: no dev_id when the device was removed since the delivery was planned.
        let device = try row.optionalText("dev_id") == nil ? nil : try self.device(row, prefix: "dev_")
        return Delivery(
            id: try row.integer("delivery_id"), sink: try row.text("sink"), notification: notification,
            recipient: DeliveryRecipient(userID: try row.text("recipient_id"), device: device, topic: try row.optionalText("delivery_topic")),
            distribution: Distribution(rawValue: try row.text("delivery_distribution")) ?? notification.distribution, attempt: try row.int("attempts")
        )
    }

    /// A session joined with its (unrevoked) API key.
    static let portalSessionSQL = """
        SELECT s.id_hash, s.key_id, s.csrf, s.expires_at, k.id, k.name, k.role, k.created_at, k.revoked_at
        FROM portal_sessions s JOIN api_keys k ON k.id = s.key_id
        """

    package static func portalSession(_ row: some StoredRow) throws -> PortalSessionEntry {
        PortalSessionEntry(
            session: PortalSessionRecord(
                idHash: try row.text("id_hash"), keyID: try row.objectID("key_id"), csrf: try row.text("csrf"), expiresAt: try row.date("expires_at")
            ),
            key: try apiKey(row)
        )
    }

    package static func queueStats(_ row: some StoredRow) throws -> QueueStats {
        QueueStats(pending: try row.int("pending"), oldestPendingSince: try row.optionalDate("oldest"))
    }

    package static func oldestPendingBySink(_ rows: [some StoredRow]) throws -> [String: Date] {
        var bySink: [String: Date] = [:]
        // A sink whose oldest pending delivery lost its notification shows no age.
        for row in rows { bySink[try row.text("sink")] = try row.optionalDate("oldest") }
        return bySink
    }

    /// ``SinkCountersSQL``'s rows (`sink`, `state`, `n`) as counters, sorted by sink. A state
    /// this build does not know (written by a newer one) is left out.
    package static func sinkCounters(_ rows: [some StoredRow]) throws -> [SinkCounters] {
        var counters: [String: SinkCounters] = [:]
        for row in rows {
            let sink = try row.text("sink")
            guard let state = DeliveryState(rawValue: try row.text("state")) else { continue }
            counters[sink, default: SinkCounters(sink: sink, counts: [:], lastError: nil)].counts[state] = try row.int("n")
        }
        return counters.values.sorted { $0.sink < $1.sink }
    }

    /// Claimed rows to deliveries, decoding each notification once.
    package static func claimedDeliveries(_ rows: [some StoredRow]) throws -> [Delivery] {
        var notifications: [String: HeraldNotification] = [:]
        return try rows.map { row in
            let notificationID = try row.text("id")
            let notification = try notifications[notificationID] ?? Self.notification(row)
            notifications[notificationID] = notification
            return try claimedDelivery(row, notification: notification)
        }
    }

    /// A row of `devices`, or a join that selects its columns as `<prefix><column>`.
    /// A token address is its key; an object address is kept as JSON in `address_json`.
    package static func device(_ row: some StoredRow, prefix: String = "") throws -> Device {
        let key = try row.text(prefix + "address_key")
        let value = try row.json(JSONValue.self, prefix + "address_json") ?? .string(key)
        return Device(
            id: try row.objectID(prefix + "id"), userID: try row.text(prefix + "user_id"),
            address: DeviceAddress(provider: try row.text(prefix + "provider"), value: value, key: key), app: try row.optionalText(prefix + "app"),
            options: try row.json([String: String].self, prefix + "options") ?? [:],
            platform: try row.optionalText(prefix + "platform"), appVersion: try row.optionalText(prefix + "app_version"),
            region: try row.optionalText(prefix + "region"), locale: try row.optionalText(prefix + "locale"),
            installationID: try row.optionalText(prefix + "installation_id"),
            createdAt: try row.date(prefix + "created_at"), updatedAt: try row.date(prefix + "updated_at")
        )
    }

    /// The stored forms of a registration's address and options: tokens need no JSON.
    package static func storedAddress(_ registration: DeviceRegistration) throws -> (json: String?, options: String?) {
        // A token keyed as sent is read back from its key; one keyed otherwise (an APNs token in
        // upper case) is kept as sent beside it.
        let json: String? = registration.address.token == registration.address.key ? nil : registration.address.value.canonicalText
        return (json, registration.options.isEmpty ? nil : try StoredJSON.encode(registration.options))
    }

    /// The columns ``notification(_:)`` reads, from the table aliased `table`. Named rather
    /// than `*`, so a column added by a later migration changes no statement's result.
    package static func notificationColumns(of table: String) -> String {
        [
            "id", "type", "title", "body", "url", "data", "timestamp", "distribution", "priority", "expires_at", "collapse_key", "idempotency_key", "target",
            "send_at", "send_at_local", "digest_key", "digest_window",
        ]
        .map { "\(table).\($0)" }.joined(separator: ", ")
    }

    /// The columns ``device(_:prefix:)`` reads, from the table aliased `table`, each selected
    /// as `<prefix><column>`.
    package static func deviceColumns(of table: String, prefix: String = "") -> String {
        [
            "id", "user_id", "provider", "address_key", "address_json", "app", "options", "platform", "app_version", "region", "locale",
            "installation_id", "created_at", "updated_at",
        ].map { "\(table).\($0) AS \(prefix)\($0)" }.joined(separator: ", ")
    }

    /// What a claim selects for ``claimedDeliveries(_:)``, from `c` (the claimed deliveries),
    /// `n` (their notifications) and `dev` (their devices, left-joined). Both engines use it.
    static let claimedColumns = """
        c.id AS delivery_id, c.sink, c.user_id AS recipient_id, c.distribution AS delivery_distribution,
        c.attempts, c.topic_key AS delivery_topic, \(notificationColumns(of: "n")), \(deviceColumns(of: "dev", prefix: "dev_"))
        """

    package static func apiKey(_ row: some StoredRow) throws -> APIKeyRecord {
        let roleText = try row.text("role")
        guard let role = Role(rawValue: roleText) else {
            throw HeraldError(.internal, code: "storage_corrupt", "api key has unknown role '\(roleText)'")
        }
        return APIKeyRecord(
            id: try row.objectID("id"), name: try row.text("name"), role: role, createdAt: try row.date("created_at"),
            revokedAt: try row.optionalDate("revoked_at")
        )
    }

    /// The columns ``historyItem(_:)`` reads, from `history h JOIN notifications n`.
    package static let historyColumns = "h.seq, h.read, h.seen, h.archived, h.snoozed_until, n.id, n.title, n.body, n.type, n.url, n.timestamp"

    package static func historyItem(_ row: some StoredRow) throws -> HistoryItem {
        HistoryItem(
            notificationID: try row.objectID("id"), title: try row.text("title"), body: try row.text("body"), type: try row.text("type"),
            url: try row.optionalText("url"), timestamp: try row.date("timestamp"), read: try row.bool("read"), seen: try row.bool("seen"),
            archived: try row.bool("archived"), snoozedUntil: try row.optionalDate("snoozed_until")
        )
    }

    package static func sequencedHistoryItem(_ row: some StoredRow) throws -> SequencedHistoryItem {
        SequencedHistoryItem(sequence: try row.integer("seq"), item: try historyItem(row))
    }

    package static func archivedMessage(_ row: some StoredRow) throws -> ArchivedMessage {
        ArchivedMessage(
            msiKey: try row.text("msi_key"), topicKey: try row.text("topic_key"), title: try row.text("title"), desc: try row.text("description"),
            message: try row.text("message"), distribution: TopicDistribution(rawValue: try row.text("distribution")) ?? .alert,
            timestamp: try row.integer("timestamp"), sender: try row.text("sender")
        )
    }

    package static func feedMessage(_ row: some StoredRow) throws -> FeedMessage {
        FeedMessage(
            id: try row.objectID("id"), title: try row.text("title"), body: try row.text("body"), url: try row.optionalText("url"),
            postedAt: try row.date("posted_at"), expiresAt: try row.date("expires_at"), priority: try row.int("priority"),
            targetRegions: try row.list("target_regions"), targetVersion: try row.optionalText("target_version")
        )
    }

    package static func subject(_ row: some StoredRow) throws -> Subject {
        Subject(
            id: try row.objectID("id"), name: try row.text("name"), desc: try row.text("description"), access: try row.list("access"),
            tags: try row.list("tags"), topicKey: try row.text("topic_key"),
            opt: SubjectOptions(
                level: SubscriptionLevel(rawValue: try row.text("level")) ?? .optIn,
                distribution: TopicDistribution(rawValue: try row.text("distribution")) ?? .alert
            )
        )
    }

    package static func area(_ row: some StoredRow, subjects: [Subject]) throws -> Area {
        Area(id: try row.objectID("id"), name: try row.text("name"), desc: try row.text("description"), access: try row.list("access"), subjects: subjects)
    }

    package static func channel(_ row: some StoredRow, areas: [Area]) throws -> Channel {
        Channel(id: try row.objectID("id"), name: try row.text("name"), desc: try row.text("description"), access: try row.list("access"), areas: areas)
    }

    /// A subject joined with its area's and channel's names (``TopicLookupSQL/entries``-shaped rows).
    package static func entry(_ row: some StoredRow) throws -> SubjectEntry {
        SubjectEntry(channel: try row.text("channel_name"), area: try row.text("area_name"), subject: try subject(row))
    }

    /// Nests subjects into areas and areas into channels, keeping the rows' order.
    package static func hierarchy(channels: [some StoredRow], areas: [some StoredRow], subjects: [some StoredRow]) throws -> [Channel] {
        var subjectsByArea: [String: [Subject]] = [:]
        for row in subjects { subjectsByArea[try row.text("area_id"), default: []].append(try subject(row)) }
        var areasByChannel: [String: [Area]] = [:]
        for row in areas {
            areasByChannel[try row.text("channel_id"), default: []].append(try area(row, subjects: subjectsByArea[try row.text("id")] ?? []))
        }
        return try channels.map { try channel($0, areas: areasByChannel[try $0.text("id")] ?? []) }
    }

    /// The row sequence a paging cursor stands for; no cursor means "from the newest".
    package static func sequence(before cursor: String?) throws -> Int64 {
        guard let cursor else { return Int64.max }
        guard let seq = Int64(cursor), seq > 0 else {
            throw HeraldError(.badRequest, code: "invalid_cursor", "'before' is not a cursor this server returned")
        }
        return seq
    }

    /// The next-page cursor: the last row's sequence when one more row than `limit` was read.
    package static func nextCursor(_ rows: [some StoredRow], limit: Int, column: String = "seq") throws -> String? {
        guard rows.count > limit else { return nil }
        return String(try rows[limit - 1].integer(column))
    }
}
