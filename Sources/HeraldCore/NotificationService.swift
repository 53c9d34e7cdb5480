public import Foundation
import Synchronization

/// Accepts notifications: validates, resolves recipients, routes, and commits the notification
/// with all its deliveries before answering (docs/durability.md).
public struct NotificationService: Sendable {
    /// How long an idempotency key is remembered.
    public static let idempotencyWindow: TimeInterval = 24 * 3600

    /// Checks submissions and builds notifications.
    public let validator: NotificationValidator
    /// Plans each recipient's deliveries.
    public let router: NotificationRouter
    /// What ``router`` decides with, as stored (``NotificationStore/recordRoutingInputs(_:)``),
    /// and its id, which every notification accepted here is stamped with.
    public let routingInputs: RoutingInputs
    let routingInputsID: String
    /// The configured sinks, for dry runs' provider checks.
    public let sinks: SinkRegistry
    /// Where notifications, their deliveries and their recipients are stored and read.
    public let store: any (NotificationStore & UserStore & TopicLookup)
    /// Subscribers read and written per page in a topic fan-out.
    public var fanOutPageSize = 1_000
    /// Recipients a topic or audience fan-out may have to be written in the accepting
    /// transaction (`fanout.inline_limit`); larger ones are committed as a ``FanOutJob`` and
    /// written by ``FanOutWorker``.
    public var fanOutInlineLimit = 10_000
    /// Makes the notifications' ids.
    public let ids: ObjectIDGenerator
    /// Where accepts are counted.
    public var metrics = HeraldMetrics()
    /// The engine that sends this process's deliveries (``DeliveryEngine/handOff``): an accept
    /// for users stores the deliveries it admits leased to it, so no worker has to claim them.
    /// nil (tools, tests) leaves every delivery pending for a claim.
    public var handOff: DeliveryHandOff?
    private let onAccepted: @Sendable (AcceptedWork) -> Void

    /// What an accept left for the background services.
    public struct AcceptedWork: Sendable, Equatable {
        /// The accept was for a topic or audience, so it may have committed a fan-out job
        /// (above ``NotificationService/fanOutInlineLimit``) whose pages are still to be written.
        /// An accept for users or a broadcast never does: waking the fan-out worker for each of
        /// those cost a read transaction per group commit for nothing.
        public var mayHaveFanOut: Bool
        /// A delivery it planned was held for a cap, a digest window or quiet hours that hold
        /// (docs/timing.md), so the ``DigestWorker`` has counting to do. Without one there is
        /// nothing new for it: waking it on every accept cost uncapped traffic its reads.
        public var holds = false
    }

    /// - Parameters:
    ///   - validator: checks submissions and builds notifications.
    ///   - router: plans each recipient's deliveries.
    ///   - sinks: the configured sinks, for dry runs' provider checks.
    ///   - store: where notifications and their deliveries are stored, and recipients read.
    ///   - ids: makes the notifications' ids.
    ///   - onAccepted: called after each commit, typically to wake ``DeliveryEngine/wake()``
    ///     and, when ``AcceptedWork/mayHaveFanOut``, the ``FanOutWorker``.
    public init(
        validator: NotificationValidator, router: NotificationRouter, sinks: SinkRegistry, store: any (NotificationStore & UserStore & TopicLookup),
        ids: ObjectIDGenerator, onAccepted: @escaping @Sendable (AcceptedWork) -> Void = { _ in }
    ) {
        self.validator = validator
        self.router = router
        routingInputs = RoutingInputs(router: router)
        routingInputsID = routingInputs.id
        self.sinks = sinks
        self.store = store
        self.ids = ids
        self.onAccepted = onAccepted
    }

    /// Validates and routes `submission`, and stores it with every delivery before returning.
    /// - Parameters:
    ///   - submission: the request's body, as decoded.
    ///   - now: the acceptance time.
    ///   - scope: whose idempotency keys these are (the sending API key's id): another sender's
    ///     key of the same name is another key.
    ///   - requestHash: the request's canonical hash: the same key for another request is refused.
    /// - Throws: 422 `idempotency_key_reused` when the key stands for another request.
    public func send(_ submission: NotificationSubmission, now: Date = Date(), scope: String = "", requestHash: String = "") async throws -> AcceptResult {
        let started = ContinuousClock.now
        var notification = try validator.validate(submission, id: ids.next(at: now), now: now)
        notification.routingInputs = routingInputsID
        let sendAt = try validator.scheduledInstant(of: submission, now: now)
        notification.sendAt = sendAt
        notification.sendAtLocal = try validator.localSendTime(of: submission, now: now)
        var topicSubject: SubjectEntry?
        if case .topic(let key) = notification.target {
            guard let entry = try await store.subject(topicKey: key) else { throw HeraldError.notFound("topic '\(key)'") }
            // A topic carries a default distribution; an explicit one wins.
            if submission.distribution == nil { notification.distribution = entry.subject.opt.distribution.distribution }
            topicSubject = entry
        }
        let sinkNames = router.sinkNames(for: notification)
        for name in sinkNames {
            try sinks[name]?.validate(notification)
        }
        let since = now.addingTimeInterval(-Self.idempotencyWindow)
        let claim = notification.idempotencyKey.map { IdempotencyClaim(scope: scope, key: $0, requestHash: requestHash) }
        if let claim, let earlier = try await store.receipt(for: claim, since: since) {
            return try Self.answer(earlier)
        }
        if sendAt != nil || notification.sendAtLocal != nil {
            return try await schedule(notification, at: sendAt, level: topicSubject?.subject.opt.level ?? .optIn, claim: claim, since: since, started: started)
        }
        let result: AcceptResult
        let (router, planned, holds) = (self.router, notification, HoldsSeen())
        switch notification.target {
        case .users(let userIDs):
            result = try await store.acceptUsers(
                notification, userIDs: userIDs, route: { holds.noting(router.plan(planned, for: $0, at: now)) }, idempotency: claim,
                idempotencySince: since, handOff: handOff
            )
        case .topic(let key):
            // Herald fans out to each subscriber's devices and history, so every user's settings apply.
            let level = topicSubject?.subject.opt.level ?? .optIn
            result = try await store.acceptFanOut(
                notification, topic: key, level: level,
                plan: .route { holds.noting(router.plan(planned, for: $0.subscribed(at: level), at: now)) }, extra: [], archive: nil,
                pageSize: fanOutPageSize, inlineLimit: fanOutInlineLimit, idempotency: claim, idempotencySince: since
            )
        case .broadcast:
            result = try await store.accept(
                notification, recipients: 0, deliveries: try broadcastDeliveries(notification), idempotency: claim, idempotencySince: since)
        case .audience(let audience):
            result = try await store.acceptAudience(
                notification, audience: audience, route: { holds.noting(router.plan(planned, for: $0, at: now)) }, pageSize: fanOutPageSize,
                inlineLimit: fanOutInlineLimit, idempotency: claim, idempotencySince: since
            )
        }
        if case .accepted(let receipt) = result {
            let latency = ContinuousClock.now - started
            metrics.accepted(type: notification.type, target: notification.target.kind.rawValue, latency: latency)
            // An accept for users wrote every recipient's history row (``NotificationStore/acceptUsers``).
            if case .users = notification.target, sinkNames.contains(NotificationRouter.historySink) {
                metrics.delivery(sink: NotificationRouter.historySink, outcome: "delivered", latency: latency, count: receipt.recipients)
            }
            let fansOut =
                switch notification.target {
                case .topic, .audience: true
                case .users, .broadcast: false
                }
            onAccepted(AcceptedWork(mayHaveFanOut: fansOut, holds: holds.any))
        }
        return try Self.answer(result)
    }

    /// Stores a scheduled send (``NotificationStore/acceptScheduled(_:recipients:dueAt:idempotency:idempotencySince:)``):
    /// nothing is routed until `sendAt`, or for a send in each recipient's own time (`sendAt`
    /// nil), until theirs. A broadcast has no recipients to page: its feed deliveries are
    /// stored now, due at the instant, when the feed sink posts it.
    private func schedule(
        _ notification: HeraldNotification, at sendAt: Date?, level: SubscriptionLevel, claim: IdempotencyClaim?, since: Date, started: ContinuousClock.Instant
    ) async throws -> AcceptResult {
        var result: AcceptResult
        switch notification.target {
        case .users(let ids):
            result = try await store.acceptScheduled(notification, recipients: .users(ids), dueAt: sendAt, idempotency: claim, idempotencySince: since)
        case .topic(let key):
            result = try await store.acceptScheduled(
                notification, recipients: .topic(key, level: level), dueAt: sendAt, idempotency: claim, idempotencySince: since)
        case .audience(let audience):
            result = try await store.acceptScheduled(
                notification, recipients: .audience(audience), dueAt: sendAt, idempotency: claim, idempotencySince: since)
        case .broadcast:
            result = try await store.accept(
                notification, recipients: 0, deliveries: try broadcastDeliveries(notification), idempotency: claim, idempotencySince: since)
        }
        if case .accepted(var receipt) = result {
            metrics.accepted(type: notification.type, target: notification.target.kind.rawValue, latency: ContinuousClock.now - started)
            receipt.sendAt = sendAt
            receipt.sendAtLocal = notification.sendAtLocal
            result = .accepted(receipt)
            // The fan-out worker sleeps no longer than until a job is due.
            onAccepted(AcceptedWork(mayHaveFanOut: notification.target.kind != .broadcast))
        }
        return try Self.answer(result)
    }

    /// A broadcast's deliveries: one per sink that publishes broadcasts.
    /// - Throws: 422 `unsupported_target` when no sink does.
    private func broadcastDeliveries(_ notification: HeraldNotification) throws -> [PlannedDelivery] {
        let deliveries = router.broadcastSends(notification)
        guard !deliveries.isEmpty else {
            throw HeraldError(.unprocessable, code: "unsupported_target", "no sink publishes broadcasts on this server")
        }
        return deliveries
    }

    /// A key reused for another request is the sender's error; anything else is an answer.
    static func answer(_ result: AcceptResult) throws -> AcceptResult {
        guard case .keyReused(let first) = result else { return result }
        throw HeraldError(
            .unprocessable, code: "idempotency_key_reused",
            "this idempotency key was used within the last 24 hours for a different request (notification \(first.id)); use a new key for a new request"
        )
    }

    /// Posts a Message Hub message (openapi.yaml `POST /message`): archived with its sender, sent to
    /// the provider topic once per component by sinks with topics, to each subscriber's devices
    /// by push sinks without them, and written into every subscriber's history.
    public func postMessage(_ submission: MessageSubmission, sender: String, now: Date = Date()) async throws -> ArchivedMessage {
        let started = ContinuousClock.now
        let input = try submission.validated()
        guard let entry = try await store.subject(topicKey: input.topicKey) else { throw HeraldError.notFound("topic '\(input.topicKey)'") }
        guard entry.subject.opt.distribution == input.distribution else {
            throw HeraldError.invalidField("distribution", "must be the subject's distribution, \"\(entry.subject.opt.distribution.rawValue)\"")
        }
        var message = HeraldNotification(
            id: ids.next(at: now), type: "message", title: input.title, body: input.desc, url: nil, data: ["message": input.message],
            timestamp: now, distribution: input.distribution.distribution, target: .topic(input.topicKey)
        )
        message.routingInputs = routingInputsID
        let notification = message
        // Checked against every provider's limits before anything is stored.
        for sink in sinks.sinks where sink.capabilities.contains(.push) {
            if sink.capabilities.contains(.topics) {
                try sink.validateTopicSend(notification, topic: input.topicKey)
            } else {
                try sink.validate(notification)
            }
        }
        let archive = ArchivedMessage(
            msiKey: notification.id.hex, topicKey: input.topicKey, title: input.title, desc: input.desc, message: input.message,
            distribution: input.distribution, timestamp: Timestamp.microseconds(now) / 1000, sender: sender
        )
        let router = self.router
        let plan: FanOutPlan =
            router.hasPushSinksWithoutTopics
            ? .historyAndDevices { [level = entry.subject.opt.level] in router.messageHubDeliveries(notification, for: $0.subscribed(at: level), at: now) }
            : .historyOnly
        _ = try await store.acceptFanOut(
            notification, topic: input.topicKey, level: entry.subject.opt.level, plan: plan,
            extra: router.topicSends(notification, topic: input.topicKey), archive: archive, pageSize: fanOutPageSize,
            inlineLimit: fanOutInlineLimit, idempotency: nil, idempotencySince: now.addingTimeInterval(-Self.idempotencyWindow)
        )
        metrics.accepted(type: notification.type, target: "message", latency: ContinuousClock.now - started)
        onAccepted(AcceptedWork(mayHaveFanOut: true))
        return archive
    }
}

/// Whether any delivery an accept planned is held (``PlannedDelivery/fold``): set from the
/// store's transaction, read after it.
private final class HoldsSeen: Sendable {
    private let seen = Atomic(false)

    var any: Bool { seen.load(ordering: .relaxed) }

    /// `deliveries`, noting whether one is held.
    func noting(_ deliveries: [PlannedDelivery]) -> [PlannedDelivery] {
        if deliveries.contains(where: { $0.fold != nil }) { seen.store(true, ordering: .relaxed) }
        return deliveries
    }
}
