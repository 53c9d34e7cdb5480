public import Foundation

/// A digest whose window has ended: what one push is composed from (docs/timing.md).
public struct DueDigest: Sendable, Equatable {
    /// Whose.
    public var userID: String
    /// What was counted together (``FoldMark/key``).
    public var key: String
    /// When the window ended.
    public var dueAt: Date
    /// The notifications folded, oldest first.
    public var items: [HeraldNotification]

    /// A digest as stored.
    public init(userID: String, key: String, dueAt: Date, items: [HeraldNotification]) {
        self.userID = userID
        self.key = key
        self.dueAt = dueAt
        self.items = items
    }
}

/// What a digest becomes: a notification of its own for the user, with its deliveries.
public struct ComposedDigest: Sendable {
    /// The digest notification (for the user alone).
    public var notification: HeraldNotification
    /// Its deliveries, on the folded channel only (no history: every item is there as it is).
    public var deliveries: [PlannedDelivery]

    /// A composed digest.
    public init(notification: HeraldNotification, deliveries: [PlannedDelivery]) {
        self.notification = notification
        self.deliveries = deliveries
    }
}

/// Frequency caps, digest windows and quiet hours that hold (docs/timing.md), for
/// ``DigestWorker``: every process may run one; each step is one transaction, and on PostgreSQL
/// one process at a time takes it, so counts are exact.
public protocol DigestStore: Sendable {
    /// Decides up to `limit` notifications' held deliveries, oldest first: each notification
    /// counts once per user and key; while the user's window for the key has let fewer than
    /// the mark's `max` through, its deliveries go out (`pending`); past that they are
    /// `folded` into the window's digest, due when the window ends. A window opens with the
    /// first notification counted after the last one ended.
    /// - Returns: how many notifications were decided.
    func foldHeld(limit: Int) async throws -> Int
    /// How long until the next digest is due (zero when one is); nil for none.
    func untilNextDigest() async throws -> Duration?
    /// Releases up to `limit` digests whose window has ended, each in one transaction with its
    /// deliveries: a digest of one notification sends that notification's folded deliveries as
    /// they are; one of more is `compose`d into a notification of its own, stored with its
    /// deliveries, the items' deliveries staying `folded`.
    /// - Returns: how many digests were released.
    func releaseDueDigests(limit: Int, compose: @escaping @Sendable (DueDigest, RecipientContext) -> ComposedDigest) async throws -> Int
}
