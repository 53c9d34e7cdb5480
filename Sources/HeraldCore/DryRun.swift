public import Foundation

/// What a notification would do, worked out without storing or sending anything: who it
/// reaches, which deliveries the router plans, and what each push provider says of them.
public struct DryRunReport: Sendable {
    /// What one push sink's provider said of its delivery.
    public struct ProviderAnswer: Sendable, Equatable {
        /// The sink that asked its provider.
        public var sink: String
        /// The provider's verdict.
        public var result: DryRunResult

        /// An answer from `sink`.
        public init(sink: String, result: DryRunResult) {
            self.sink = sink
            self.result = result
        }
    }

    /// The notification as it would be accepted.
    public var notification: HeraldNotification
    /// Users it would reach.
    public var recipients: Int
    /// In the order the router planned them; ids are 0: nothing was stored.
    public var deliveries: [Delivery]
    /// One answer per push delivery, from its sink's provider (``NotificationSink/dryRun(_:)``).
    public var provider: [ProviderAnswer]
}

extension NotificationService {
    /// See ``DryRunReport``. User targets only: a topic or audience dry run would have to read
    /// every subscriber, which is the cost a dry run is for avoiding.
    public func dryRun(_ submission: NotificationSubmission, now: Date = Date()) async throws -> DryRunReport {
        let notification = try validator.validate(submission, id: ids.next(at: now), now: now)
        // A send_at or send_at_local a send would refuse is refused here too; a valid one is shown as sent now.
        _ = try validator.scheduledInstant(of: submission, now: now)
        _ = try validator.localSendTime(of: submission, now: now)
        guard case .users(let userIDs) = notification.target else {
            throw HeraldError(.unprocessable, code: "unsupported_target", "a dry run takes 'user_ids' targets only")
        }
        for name in router.sinkNames(for: notification) {
            try sinks[name]?.validate(notification)
        }
        let recipients = try await store.recipients(userIDs: userIDs)
        var deliveries: [Delivery] = []
        for recipient in recipients {
            for planned in router.plan(notification, for: recipient, at: now) {
                let device = planned.deviceID.flatMap { id in recipient.devices.first { $0.id == id } }
                deliveries.append(
                    Delivery(
                        id: 0, sink: planned.sink, notification: notification,
                        recipient: DeliveryRecipient(userID: planned.userID, device: device, topic: planned.topic),
                        distribution: planned.distribution, attempt: 1
                    )
                )
            }
        }
        var provider: [DryRunReport.ProviderAnswer] = []
        let pushes = deliveries.filter { sinks[$0.sink]?.capabilities.contains(.push) == true }
        for name in Set(pushes.map(\.sink)).sorted() {
            guard let sink = sinks[name] else { continue }
            let batch = pushes.filter { $0.sink == name }
            let answers = await sink.dryRun(batch)
            provider += answers.map { DryRunReport.ProviderAnswer(sink: name, result: $0) }
        }
        return DryRunReport(notification: notification, recipients: recipients.count, deliveries: deliveries, provider: provider)
    }
}
