public import Foundation

/// The state of one delivery (docs/durability.md).
public enum DeliveryState: String, Sendable, Codable, CaseIterable {
    case pending
    case delivered
    case failed
    case dead
}

/// What `POST /api/notifications` answers, and answers again for a repeated idempotency key.
public struct NotificationReceipt: Sendable, Equatable {
    public var id: ObjectID
    public var recipients: Int

    public init(id: ObjectID, recipients: Int) {
        self.id = id
        self.recipients = recipients
    }
}

public enum AcceptResult: Sendable, Equatable {
    /// Stored now.
    case accepted(NotificationReceipt)
    /// The idempotency key was seen within its window for the same request: the first answer,
    /// nothing stored.
    case replayed(NotificationReceipt)
    /// The idempotency key was seen within its window for a different request: nothing stored;
    /// the receipt is the first request's.
    case keyReused(NotificationReceipt)

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
    public var key: String
    public var requestHash: String

    public init(scope: String, key: String, requestHash: String) {
        self.scope = scope
        self.key = key
        self.requestHash = requestHash
    }
}

/// A stored delivery as `GET /api/notifications/{id}` shows it.
public struct DeliveryRecord: Sendable, Equatable {
    public var id: Int64
    public var sink: String
    public var userID: String
    public var deviceID: ObjectID?
    /// For a topic send, the topic.
    public var topic: String?
    public var distribution: Distribution
    public var state: DeliveryState
    public var attempts: Int
    public var lastError: String?
    public var nextAttemptAt: Date?
    public var updatedAt: Date

    public init(
        id: Int64, sink: String, userID: String, deviceID: ObjectID?, topic: String? = nil, distribution: Distribution, state: DeliveryState,
        attempts: Int, lastError: String?, nextAttemptAt: Date?, updatedAt: Date
    ) {
        self.id = id
        self.sink = sink
        self.userID = userID
        self.deviceID = deviceID
        self.topic = topic
        self.distribution = distribution
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.nextAttemptAt = nextAttemptAt
        self.updatedAt = updatedAt
    }
}

public struct NotificationStatus: Sendable, Equatable {
    /// At most this many deliveries are listed; `summary` always counts all of them.
    public static let deliveryListLimit = 1_000

    public var notification: HeraldNotification
    public var recipients: Int
    /// The first ``deliveryListLimit`` deliveries, in creation order.
    public var deliveries: [DeliveryRecord]
    /// Every delivery counted per sink and state.
    public var summary: [String: [DeliveryState: Int]]
    /// For a fan-out written after the accept (``FanOutJob``): how far it has got.
    public var fanOut: FanOutProgress?

    public init(
        notification: HeraldNotification, recipients: Int, deliveries: [DeliveryRecord], summary: [String: [DeliveryState: Int]]? = nil,
        fanOut: FanOutProgress? = nil
    ) {
        self.notification = notification
        self.recipients = recipients
        self.deliveries = deliveries
        self.fanOut = fanOut
        self.summary = summary ?? deliveries.reduce(into: [:]) { $0[$1.sink, default: [:]][$1.state, default: 0] += 1 }
    }
}

/// The result of one delivery attempt, to be recorded.
public struct DeliveryUpdate: Sendable, Equatable {
    public var id: Int64
    public var state: DeliveryState
    public var attempts: Int
    /// Kept as ``FailureReason/storable(_:)`` makes it.
    public private(set) var lastError: String?
    /// For a delivery that stays pending: when to try again.
    public var nextAttemptAt: Date?
    /// A device to remove at once because the provider reported its token gone.
    public var removeDevice: ObjectID?
    /// For a delivery that stays pending: the claim's attempt is given back, since the provider
    /// was down (its circuit open) or the delivery was held before it was sent; the circuit's
    /// outage must not make it run out of attempts (docs/durability.md, "A sink that is down").
    public var givesBackAttempt = false

    /// What a store subtracts from the delivery's attempts as it records this: 1 for a pending
    /// delivery that gives its attempt back (never below none), else 0. One rule for every engine.
    public var attemptsGivenBack: Int { state == .pending && givesBackAttempt && attempts > 0 ? 1 : 0 }

    public init(id: Int64, state: DeliveryState, attempts: Int, lastError: String? = nil, nextAttemptAt: Date? = nil, removeDevice: ObjectID? = nil) {
        self.id = id
        self.state = state
        self.attempts = attempts
        self.lastError = lastError.map(FailureReason.storable)
        self.nextAttemptAt = nextAttemptAt
        self.removeDevice = removeDevice
    }
}

/// Which sinks' deliveries a claim may take.
public enum SinkFilter: Sendable, Equatable {
    case all
    /// Every sink but these (their circuits are open).
    case excluding(Set<String>)
    /// This sink only (a circuit's probe).
    case only(String)

    /// The sinks named, and whether they are the ones taken (`only`) or left (`excluding`).
    public var names: (included: Bool, sinks: [String]) {
        switch self {
        case .all: (false, [])
        case .excluding(let sinks): (false, sinks.sorted())
        case .only(let sink): (true, [sink])
        }
    }
}

/// A claimed delivery's lease: its id and the attempt it was claimed for (the fencing token).
public struct DeliveryLease: Sendable, Equatable, Hashable {
    public var id: Int64
    public var attempt: Int

    public init(id: Int64, attempt: Int) {
        self.id = id
        self.attempt = attempt
    }
}

/// One row of a user's history, in the shape apps parse (openapi.yaml).
public struct HistoryItem: Sendable, Equatable {
    public var notificationID: ObjectID
    public var title: String
    public var body: String
    public var type: String
    public var url: String?
    public var timestamp: Date
    public var read: Bool

    public init(notificationID: ObjectID, title: String, body: String, type: String, url: String?, timestamp: Date, read: Bool) {
        self.notificationID = notificationID
        self.title = title
        self.body = body
        self.type = type
        self.url = url
        self.timestamp = timestamp
        self.read = read
    }
}

public struct HistoryPage: Sendable, Equatable {
    public var items: [HistoryItem]
    /// Pass as `before` to get the next (older) page; nil on the last page.
    public var next: String?

    public init(items: [HistoryItem], next: String?) {
        self.items = items
        self.next = next
    }
}

/// Roles an API key can have (openapi.yaml).
public enum Role: String, Sendable, Codable, CaseIterable {
    /// Everything.
    case admin
    /// Topic messages, read the hierarchy.
    case communicator
    /// Send notifications, act for users.
    case backend

    /// The role as the Message Hub apps name it in a message's `sender`.
    public var words: String {
        switch self {
        case .admin: "Super User"
        case .communicator: "Communicator"
        case .backend: "Backend"
        }
    }

    /// A Message Hub archive's `sender`: the role in words and the key's name,
    /// `Communicator (comms-team)`.
    public func sender(keyName: String) -> String {
        "\(words) (\(keyName))"
    }
}

public struct APIKeyRecord: Sendable, Equatable {
    public var id: ObjectID
    public var name: String
    public var role: Role
    public var createdAt: Date
    public var revokedAt: Date?

    public init(id: ObjectID, name: String, role: Role, createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.role = role
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// Deliveries of one sink counted by state, for `herald sinks`.
public struct SinkCounters: Sendable, Equatable {
    public var sink: String
    public var counts: [DeliveryState: Int]
    /// The most recently recorded error, if any.
    public var lastError: String?

    public init(sink: String, counts: [DeliveryState: Int], lastError: String?) {
        self.sink = sink
        self.counts = counts
        self.lastError = lastError
    }
}

/// Who a fan-out reaches, and how their deliveries are planned.
public enum FanOutPlan: Sendable {
    /// Every subscriber gets a history row, whatever their settings (Message Hub messages),
    /// written in the accepting transaction and recorded as a delivered history delivery.
    case historyOnly
    /// As ``historyOnly``, and each subscriber who has devices also gets the deliveries the
    /// closure plans (a Message Hub message for push sinks without provider-side topics).
    case historyAndDevices(@Sendable (RecipientContext) -> [PlannedDelivery])
    /// Each subscriber's deliveries come from the router, so their settings apply.
    case route(@Sendable (RecipientContext) -> [PlannedDelivery])
}

/// A Message Hub message as archived (openapi.yaml `GET /message`).
public struct ArchivedMessage: Sendable, Equatable {
    public var msiKey: String
    public var topicKey: String
    public var title: String
    public var desc: String
    public var message: String
    public var distribution: TopicDistribution
    /// Milliseconds since the epoch.
    public var timestamp: Int64
    public var sender: String

    public init(
        msiKey: String, topicKey: String, title: String, desc: String, message: String, distribution: TopicDistribution, timestamp: Int64, sender: String
    ) {
        self.msiKey = msiKey
        self.topicKey = topicKey
        self.title = title
        self.desc = desc
        self.message = message
        self.distribution = distribution
        self.timestamp = timestamp
        self.sender = sender
    }
}

public struct MessagePage: Sendable, Equatable {
    public var messages: [ArchivedMessage]
    public var next: String?

    public init(messages: [ArchivedMessage], next: String?) {
        self.messages = messages
        self.next = next
    }
}

/// The delivery queue's size, for metrics.
public struct QueueStats: Sendable, Equatable {
    public var pending: Int
    /// The accept time of the oldest pending delivery's notification.
    public var oldestPendingSince: Date?

    public init(pending: Int, oldestPendingSince: Date?) {
        self.pending = pending
        self.oldestPendingSince = oldestPendingSince
    }
}
