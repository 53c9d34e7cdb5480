public import Foundation

/// Accepts notifications: validates, resolves recipients, routes, and commits the notification
/// with all its deliveries before answering (SPEC §5).
public struct NotificationService: Sendable {
    /// How long an idempotency key is remembered.
    public static let idempotencyWindow: TimeInterval = 24 * 3600

    public let validator: NotificationValidator
    public let router: NotificationRouter
    public let sinks: SinkRegistry
    public let store: any (NotificationStore & UserStore)
    public let ids: ObjectIDGenerator
    private let onAccepted: @Sendable () -> Void

    /// - Parameter onAccepted: called after each commit, typically ``DeliveryEngine/wake()``.
    public init(
        validator: NotificationValidator, router: NotificationRouter, sinks: SinkRegistry, store: any (NotificationStore & UserStore),
        ids: ObjectIDGenerator, onAccepted: @escaping @Sendable () -> Void = {}
    ) {
        self.validator = validator
        self.router = router
        self.sinks = sinks
        self.store = store
        self.ids = ids
        self.onAccepted = onAccepted
    }

    public func send(_ submission: NotificationSubmission, now: Date = Date()) async throws -> AcceptResult {
        let notification = try validator.validate(submission, id: ids.next(at: now), now: now)
        for name in router.sinkNames(for: notification) {
            try sinks[name]?.validate(notification)
        }
        let since = now.addingTimeInterval(-Self.idempotencyWindow)
        if let key = notification.idempotencyKey, let receipt = try await store.receipt(idempotencyKey: key, since: since) {
            return .replayed(receipt)
        }
        guard case .users(let userIDs) = notification.target else {
            throw HeraldError(.unprocessable, code: "unsupported_target", "only 'user_ids' targets are supported by this server yet")
        }
        let recipients = try await store.recipients(userIDs: userIDs)
        let deliveries = recipients.flatMap { router.plan(notification, for: $0, at: now) }
        let result = try await store.accept(notification, recipients: recipients.count, deliveries: deliveries, idempotencySince: since)
        if case .accepted = result { onAccepted() }
        return result
    }
}
