import Foundation
import HTTPTypes
import HeraldCore
import HeraldHTTP
import HeraldStore
import Hummingbird

/// The backend-facing endpoints: send, inspect a notification, set user attributes, erase a
/// user or end their tokens.
struct NotificationRoutes {
    let service: NotificationService
    let store: any (NotificationStore & UserStore & UserCredentialStore)
    let endedTokens: EndedTokens

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/notifications", send)
        table.add(router, .get, "/api/notifications/{id}", status)
        table.add(router, .delete, "/api/notifications/{id}", cancel)
        table.add(router, .put, "/api/users/{id}", putUser)
        table.add(router, .delete, "/api/users/{id}", eraseUser)
        table.add(router, .post, "/api/users/{id}/sign-out", signOut)
    }

    @Sendable func send(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let key = try context.requireKey([.backend, .admin])
        var (submission, bytes) = try await JSONBody.decodeKeepingBytes(
            NotificationSubmission.self, from: request, context: context, knownFields: NotificationSubmission.fieldNames
        )
        // The key may come as the `Idempotency-Key` header (IETF draft) or the body field.
        if let header = try request.headers.text(Self.idempotencyHeader) {
            // By bytes: the key is stored, and looked up, as the header has it.
            if let field = submission.idempotencyKey, !field.utf8.elementsEqual(header.utf8) {
                throw HeraldError.invalidField("idempotency_key", "differs from the Idempotency-Key header; give one, or the same in both")
            }
            submission.idempotencyKey = header
        }
        if submission.dryRun == true { return try await dryRun(submission) }
        let hash = submission.idempotencyKey == nil ? "" : try IdempotencyHash.of(bytes)
        let result = try await service.send(submission, scope: key.id.hex, requestHash: hash)
        let receipt = result.receipt
        context.logFields.set("notification_id", receipt.id.hex)
        // Written directly (JSONEncoder was 1.5 % of an accept's CPU), keys in JSONBody's order.
        var body = JSONWriter(capacity: 64)
        body.object { body in
            body.member("id", receipt.id.hex)
            body.key("recipients")
            body.integer(receipt.recipients)
            if receipt.isScheduled { body.member("status", "scheduled") }
            if let sendAt = receipt.sendAt { body.member("send_at", Timestamp.format(sendAt)) }
            if let local = receipt.sendAtLocal { body.member("send_at_local", local.description) }
        }
        var response = JSONBody.response(bytes: body.bytes, status: .accepted)
        if case .replayed = result { response.headers[Self.replayedHeader] = "true" }
        return response
    }

    /// `"dry_run": true`: what would happen, with each push provider's own validation; nothing
    /// is stored or sent.
    func dryRun(_ submission: NotificationSubmission) async throws -> Response {
        let report = try await service.dryRun(submission)
        struct Recipient: Encodable {
            var user_id: String
            var device_id: String?
            var provider: String?
            var topic: String?
        }
        struct Payload: Encodable {
            var type: String
            var title: String
            var body: String
            var url: Nullable<String>
            var data: [String: String]
            var distribution: String
        }
        struct PlannedDelivery: Encodable {
            var sink: String
            var recipient: Recipient
            var payload: Payload
        }
        struct ProviderAnswer: Encodable {
            var sink: String
            var valid: Bool?
            var error: String?
        }
        struct Answer: Encodable {
            var dry_run = true
            var recipients: Int
            var deliveries: [PlannedDelivery]
            var provider: [ProviderAnswer]
        }
        let n = report.notification
        let deliveries = report.deliveries.map { d in
            PlannedDelivery(
                sink: d.sink,
                recipient: Recipient(
                    user_id: d.recipient.userID, device_id: d.recipient.device?.id.hex, provider: d.recipient.device?.address.provider, topic: d.recipient.topic
                ),
                payload: Payload(type: n.type, title: n.title, body: n.body, url: Nullable(n.url), data: n.data, distribution: d.distribution.rawValue)
            )
        }
        let provider = report.provider.map { answer -> ProviderAnswer in
            switch answer.result {
            case .valid: ProviderAnswer(sink: answer.sink, valid: true)
            case .invalid(let reason): ProviderAnswer(sink: answer.sink, valid: false, error: reason)
            case .unsupported: ProviderAnswer(sink: answer.sink, valid: nil, error: "this sink cannot ask its provider to validate")
            }
        }
        return try JSONBody.response(Answer(recipients: report.recipients, deliveries: deliveries, provider: provider))
    }

    static let idempotencyHeader = HTTPField.Name("Idempotency-Key")!
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!

    /// `DELETE /api/notifications/{id}` (docs/timing.md): cancels what has not gone out; 409
    /// when everything had.
    @Sendable func cancel(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let text = try context.parameters.require("id")
        guard let id = ObjectID(text), let cancellation = try await store.cancel(id: id, at: Date()) else {
            throw HeraldError.notFound("notification '\(text)'")
        }
        guard !cancellation.isEmpty else {
            throw HeraldError(.conflict, code: "already_sent", "notification '\(text)' has nothing left to cancel: every delivery went out")
        }
        context.logFields.set("notification_id", id.hex)
        struct Answer: Encodable {
            var id: String
            var cancelled_deliveries: Int
            var cancelled_recipients: Int
        }
        return try JSONBody.response(Answer(id: id.hex, cancelled_deliveries: cancellation.deliveries, cancelled_recipients: cancellation.recipients))
    }

    @Sendable func status(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let text = try context.parameters.require("id")
        guard let id = ObjectID(text), let status = try await store.status(of: id) else {
            throw HeraldError.notFound("notification '\(text)'")
        }
        return try JSONBody.response(NotificationStatusResponse(status))
    }

    /// The user id in the path: segments arrive percent-encoded, and user ids are stored as the
    /// backend knows them.
    static func pathUserID(_ context: HeraldRequestContext) throws -> String {
        let raw = try context.parameters.require("id")
        // Escapes that are not UTF-8 (a Latin-1 `%E9`) were kept as the literal text `%E9`: a
        // user other than the one meant.
        guard let userID = raw.removingPercentEncoding else {
            throw HeraldError.invalidField("id", "must be percent-encoded UTF-8 (a '%' itself as %25)")
        }
        try UserID.validate(userID, field: "id")
        return userID
    }

    /// `DELETE /api/users/{id}`: what an app's "delete my account" needs of Herald. Erases the
    /// user's settings, attributes, devices, subscriptions, history, engagement events and card
    /// state, and says how many of each; an unknown user is erased already (zeros).
    @Sendable func eraseUser(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let userID = try Self.pathUserID(context)
        let now = Date()
        let erased = try await store.eraseUser(userID: userID, at: now)
        // The erasure ended their tokens in the store; this process refuses them at once.
        endedTokens.ended(userID: userID, before: now)
        // Deliveries this process accepted and holds for its workers are failed in the store
        // now, but would still be sent from memory.
        service.handOff?.withdraw { $0.recipient.userID == userID }
        context.logFields.set("erased", "devices=\(erased.devices) history=\(erased.history)")
        struct Body: Encodable {
            var id: String
            var erased: UserErasure
        }
        return try JSONBody.response(Body(id: userID, erased: erased))
    }

    /// `POST /api/users/{id}/sign-out`: ends every user and device token issued for the user
    /// so far, on every process within ``EndedTokens/lifetime``, keeping their data. Their
    /// devices stay registered; an app signs in again with a fresh proof (or its device secret).
    @Sendable func signOut(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let userID = try Self.pathUserID(context)
        let now = Date()
        try await store.endTokens(userID: userID, issuedBefore: now)
        endedTokens.ended(userID: userID, before: now)
        struct Body: Encodable {
            var id: String
            var tokens_ended_before: String
        }
        return try JSONBody.response(Body(id: userID, tokens_ended_before: Timestamp.format(now)))
    }

    @Sendable func putUser(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let userID = try Self.pathUserID(context)
        let attributes = try await JSONBody.decode(UserAttributes.self, from: request, context: context, knownFields: UserAttributes.fieldNames)
        try attributes.validate()
        try await store.setAttributes(attributes, userID: userID)
        struct Body: Encodable {
            var id: String
            var attributes: UserAttributes
        }
        return try JSONBody.response(Body(id: userID, attributes: attributes))
    }
}

/// `GET /api/notifications/{id}`: the notification, and its deliveries per sink and state.
struct NotificationStatusResponse: Encodable {
    struct Body: Encodable {
        var id: String
        var type: String
        var title: String
        var body: String
        var url: String?
        var data: [String: String]
        var timestamp: String
        var distribution: String
        var priority: Int
        var expires_at: String?
        var collapse_key: String?
        var idempotency_key: String?
        var target: [String: [String]]
        /// A scheduled send's instant (docs/timing.md).
        var send_at: String?
        /// A send in each recipient's own time: the wall-clock time (docs/timing.md).
        var send_at_local: String?
    }
    struct DeliveryBody: Encodable {
        var id: Int64
        var sink: String
        var user_id: String?
        var device_id: String?
        var topic: String?
        var distribution: String
        var state: String
        var attempts: Int
        var last_error: String?
        var next_attempt_at: String?
        var updated_at: String
    }

    var notification: Body
    var recipients: Int
    var deliveries: [DeliveryBody]
    /// Whether more deliveries exist than are listed (`summary` counts them all).
    var deliveries_truncated: Bool
    /// Count of deliveries per sink and state, e.g. `{"history":{"delivered":2}}`.
    var summary: [String: [String: Int]]
    /// For a fan-out above `fanout.inline_limit`, written after the 202: how far it has got.
    var fan_out: FanOutBody?
    /// Recipients and deliveries by where they stand (docs/timing.md).
    var counts: Counts

    struct Counts: Encodable {
        /// Recipients of a scheduled send whose instant has not come.
        var scheduled: Int
        /// Deliveries waiting for an attempt or a retry.
        var waiting: Int
        /// Deliveries that went out: delivered, failed or dead.
        var sent: Int
        /// Deliveries cancelled, and recipients of a cancelled fan-out who got nothing.
        var cancelled: Int
        /// Deliveries folded into a digest (docs/timing.md): they go out as one push when its
        /// window ends.
        var folded: Int

        init(_ status: NotificationStatus, now: Date) {
            var byState: [DeliveryState: Int] = [:]
            for counts in status.summary.values {
                for (state, count) in counts { byState[state, default: 0] += count }
            }
            // A scheduled broadcast's deliveries are stored, waiting for its instant (listed:
            // a broadcast has one per feed sink).
            let waitingForInstant = status.deliveries.filter { NotificationStatusResponse.waitsForItsInstant($0, now: now) }.count
            scheduled = (status.fanOut?.scheduledRecipients(at: now) ?? 0) + waitingForInstant
            // Held: waiting for the digest worker's count, which lets them out or folds them.
            waiting = (byState[.pending] ?? 0) + (byState[.held] ?? 0) - waitingForInstant
            folded = byState[.folded] ?? 0
            sent = (byState[.delivered] ?? 0) + (byState[.failed] ?? 0) + (byState[.dead] ?? 0)
            cancelled = (byState[.cancelled] ?? 0) + (status.fanOut?.cancelledRecipients ?? 0)
        }
    }

    struct FanOutBody: Encodable {
        /// `scheduled` until a scheduled send's instant, `writing` until every recipient's rows
        /// are committed, then `done`; `cancelled` when the sender cancelled it first.
        var state: String
        var recipients: Int
        var written: Int
        /// A scheduled send's instant (docs/timing.md).
        var send_at: String?

        init(_ progress: FanOutProgress, now: Date) {
            state = progress.cancelled ? "cancelled" : progress.done ? "done" : progress.isScheduled(at: now) ? "scheduled" : "writing"
            recipients = progress.recipients
            written = progress.written
            send_at = progress.dueAt.map(Timestamp.format)
        }
    }

    /// A delivery of a scheduled send stored ahead of its instant (a broadcast's), not yet due
    /// for its first attempt: shown as `scheduled` (it is stored as pending).
    static func waitsForItsInstant(_ delivery: DeliveryRecord, now: Date) -> Bool {
        delivery.state == .pending && delivery.attempts == 0 && (delivery.nextAttemptAt.map { $0 > now } ?? false)
    }

    init(_ status: NotificationStatus) {
        let n = status.notification
        let target: [String: [String]] =
            switch n.target {
            case .users(let ids): ["user_ids": ids]
            case .topic(let key): ["topic": [key]]
            case .audience(let audience): ["tier_ids": audience.tierIDs, "group_ids": audience.groupIDs, "user_ids": audience.userIDs]
            case .broadcast(let options): ["regions": options.regions, "version": options.version.map { [$0] } ?? []]
            }
        let now = Date()
        notification = Body(
            id: n.id.hex, type: n.type, title: n.title, body: n.body, url: n.url, data: n.data,
            timestamp: Timestamp.format(n.timestamp), distribution: n.distribution.rawValue, priority: n.priority,
            expires_at: n.expiresAt.map(Timestamp.format), collapse_key: n.collapseKey, idempotency_key: n.idempotencyKey, target: target,
            send_at: n.sendAt.map(Timestamp.format), send_at_local: n.sendAtLocal?.description
        )
        recipients = status.recipients
        fan_out = status.fanOut.map { FanOutBody($0, now: now) }
        counts = Counts(status, now: now)
        deliveries = status.deliveries.map { d in
            DeliveryBody(
                id: d.id, sink: d.sink, user_id: d.topic == nil ? d.userID : nil, device_id: d.deviceID?.hex, topic: d.topic,
                distribution: d.distribution.rawValue,
                state: Self.waitsForItsInstant(d, now: now) ? "scheduled" : d.state.rawValue, attempts: d.attempts, last_error: d.lastError,
                next_attempt_at: d.state == .pending ? d.nextAttemptAt.map(Timestamp.format) : nil, updated_at: Timestamp.format(d.updatedAt)
            )
        }
        summary = status.summary.mapValues { counts in Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }) }
        deliveries_truncated = status.summary.values.flatMap(\.values).reduce(0, +) > status.deliveries.count
    }
}
