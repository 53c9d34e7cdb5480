import Foundation
import HeraldCore

/// How one accept for users stores and hands off its deliveries (``AcceptRequest/handOff``):
/// which ones its hand-off admits, the lease they are stored with, and the ``Delivery`` each
/// becomes, the same a claim would read back. Both engines use it.
struct HandOffPlan {
    let handOff: DeliveryHandOff
    /// The notification as stored, so a sink sees what a claim would give it.
    let notification: HeraldNotification
    /// The batch's recipients, read in the accepting transaction: their devices are the rows
    /// a claim would join.
    let recipients: [String: RecipientContext]
    /// The lease end, in the stores' microseconds.
    let leaseUntil: Int64

    init(_ handOff: DeliveryHandOff, notification: HeraldNotification, recipients: [String: RecipientContext]) {
        self.handOff = handOff
        self.notification = notification.asStored
        self.recipients = recipients
        self.leaseUntil = Timestamp.microseconds(handOff.leaseEnd(from: notification.timestamp))
    }

    /// The lease end to store `delivery` with, or nil to store it pending for a claim: history
    /// entries are written by the accept itself, and a full hand-off or an open circuit admits
    /// nothing.
    func leaseEnd(for delivery: PlannedDelivery) -> Int64? {
        // A delivery that may fold waits for the digest worker's count, not for a sender.
        guard !delivery.isHistoryWrite, delivery.fold == nil, handOff.admits(sink: delivery.sink) else { return nil }
        // A device the transaction did not read is left to the claim's join.
        if let device = delivery.deviceID, self.device(device, of: delivery.userID) == nil { return nil }
        return leaseUntil
    }

    /// The delivery stored leased with row id `id`, on its first attempt.
    func delivery(_ planned: PlannedDelivery, id: Int64) -> Delivery {
        Delivery(
            id: id, sink: planned.sink, notification: notification,
            recipient: DeliveryRecipient(userID: planned.userID, device: planned.deviceID.flatMap { device($0, of: planned.userID) }, topic: planned.topic),
            distribution: planned.distribution, attempt: 1
        )
    }

    private func device(_ id: ObjectID, of user: String) -> Device? {
        recipients[user]?.devices.first { $0.id == id }
    }
}
