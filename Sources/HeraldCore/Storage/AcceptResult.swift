public import Foundation

/// What `POST /api/notifications` answers, and answers again for a repeated idempotency key.
public struct NotificationReceipt: Sendable, Equatable {
    /// The notification's id.
    public var id: ObjectID
    /// Users it is for.
    public var recipients: Int
    /// For a scheduled send accepted now: when it goes out (docs/timing.md).
    public var sendAt: Date?
    /// For a send in each recipient's own time: the wall-clock time (docs/timing.md).
    public var sendAtLocal: LocalSendTime?

    /// A receipt for `id`.
    public init(id: ObjectID, recipients: Int, sendAt: Date? = nil, sendAtLocal: LocalSendTime? = nil) {
        self.id = id
        self.recipients = recipients
        self.sendAt = sendAt
        self.sendAtLocal = sendAtLocal
    }

    /// Whether nothing goes out at the accept: a send at an instant or in each recipient's time.
    public var isScheduled: Bool { sendAt != nil || sendAtLocal != nil }
}

/// What storing a notification did, idempotency keys considered.
public enum AcceptResult: Sendable, Equatable {
    /// Stored now.
    case accepted(NotificationReceipt)
    /// The idempotency key was seen within its window for the same request: the first answer,
    /// nothing stored.
    case replayed(NotificationReceipt)
    /// The idempotency key was seen within its window for a different request: nothing stored;
    /// the receipt is the first request's.
    case keyReused(NotificationReceipt)

    /// The receipt to answer with, whatever the case.
    public var receipt: NotificationReceipt {
        switch self {
        case .accepted(let receipt), .replayed(let receipt), .keyReused(let receipt): receipt
        }
    }
}

/// An idempotency key as a sender claims it: scoped to the API key that sent it (IETF
/// Idempotency-Key draft, Stripe), with a hash of the request's canonical form, so "the same
/// request" means the same parsed JSON.
public struct IdempotencyClaim: Sendable, Equatable {
    /// Whose key it is: the sending API key's id.
    public var scope: String
    /// The sender's key, as sent.
    public var key: String
    /// SHA-256 of the request's canonical JSON, hex.
    public var requestHash: String

    /// A claim of `key` by `scope` for the request hashed to `requestHash`.
    public init(scope: String, key: String, requestHash: String) {
        self.scope = scope
        self.key = key
        self.requestHash = requestHash
    }
}
