import Foundation
import HeraldCore
import HeraldInbox
import Logging

/// The silent push that tells a user's other devices their inbox changed (`inbox.sync_push`,
/// docs/inbox.md): information (data only, `content-available` on Apple's platforms) of type
/// `inbox` carrying `unread`, and the badge for sinks that carry one. It is a hint, not a
/// notification: nothing is stored, no history row is written, and a failed send is not retried
/// (the next change, or the app's next read of `GET /api/inbox/counts`, brings the device in step).
struct InboxSyncPushes: Sendable {
    /// The type the pushes carry, which apps tell apart from their notifications.
    static let type = "inbox"

    let users: any UserStore
    let inbox: any InboxStore
    let router: NotificationRouter
    let sinks: SinkRegistry
    let ids: ObjectIDGenerator
    let logger: Logger

    /// Sends the push to each of `userID`'s devices but those of the installation `skipping`.
    func send(userID: String, skipping: String?) async {
        do {
            let devices = try await users.devices(userID: userID).filter { skipping == nil || $0.installationID != skipping }
            guard !devices.isEmpty else { return }
            // Read as it is sent, so a push delayed by coalescing carries the count then.
            let unread = try await inbox.counts(userID: userID).total.unread
            let now = Date()
            let notification = HeraldNotification(
                id: ids.next(at: now), type: Self.type, title: "", body: "", url: nil, data: ["unread": String(unread)], timestamp: now,
                distribution: .information, target: .users([userID]))
            var bySink: [String: [Delivery]] = [:]
            for device in devices {
                guard let sink = router.pushSink(provider: device.address.provider, app: device.app) else { continue }
                bySink[sink.name, default: []].append(
                    Delivery(
                        id: Int64.random(in: 1...Int64.max), sink: sink.name, notification: notification,
                        recipient: DeliveryRecipient(userID: userID, device: device), distribution: .information, attempt: 1, badge: unread))
            }
            for (name, batch) in bySink {
                guard let sink = sinks[name] else { continue }
                let outcomes = await sink.deliver(batch)
                let missed = outcomes.filter { $0 != .delivered }
                if !missed.isEmpty {
                    logger.debug("inbox sync push not delivered to \(missed.count) of \(batch.count) devices through '\(name)': \(missed[0])")
                }
            }
        } catch _ where Task.isCancelled {
            return // a shutdown, not a failure
        } catch {
            logger.warning("could not send the inbox sync push for a user: \(error)")
        }
    }
}
