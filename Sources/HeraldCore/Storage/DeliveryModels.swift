public import Foundation

/// The state of one delivery (docs/durability.md).
public enum DeliveryState: String, Sendable, Codable, CaseIterable {
    /// Waiting for its first attempt or a retry.
    case pending
    /// The provider (or the sink's own store) took it.
    case delivered
    /// Refused for good (a bad token, a payload the provider rejects): never retried.
    case failed
    /// Every attempt failed (``RetryPolicy/maxAttempts``).
    case dead
    /// The sender cancelled the notification before it went out (docs/timing.md).
    case cancelled
    /// Waiting for the digest worker to count it against its cap or digest window: it goes
    /// out (``pending``) or folds (``folded``) (docs/timing.md).
    case held
    /// Folded into a digest, delivered as one push when the window ends (or as itself when it
    /// was the window's only item).
    case folded
}

/// A stored delivery as `GET /api/notifications/{id}` shows it.
public struct DeliveryRecord: Sendable, Equatable {
    /// The delivery's id.
    public var id: Int64
    /// The sink instance it goes through.
    public var sink: String
    /// The recipient; empty for a topic or broadcast delivery.
    public var userID: String
    /// The device, for a per-device push; nil otherwise.
    public var deviceID: ObjectID?
    /// For a topic send, the topic.
    public var topic: String?
    /// Alert (visible) or information (silent data).
    public var distribution: Distribution
    /// Where it stands.
    public var state: DeliveryState
    /// Attempts made so far.
    public var attempts: Int
    /// Why the last attempt failed, if it did.
    public var lastError: String?
    /// When it is next tried, while pending.
    public var nextAttemptAt: Date?
    /// When it last changed.
    public var updatedAt: Date

    /// A record as stored.
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

/// The result of one delivery attempt, to be recorded.
public struct DeliveryUpdate: Sendable, Equatable {
    /// The delivery recorded.
    public var id: Int64
    /// Its new state.
    public var state: DeliveryState
    /// Its attempts, this one included.
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

    /// An update; `lastError` is cut to what a store keeps (``FailureReason/storable(_:)``).
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
    /// Every sink's deliveries.
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
    /// The delivery claimed.
    public var id: Int64
    /// The attempt it was claimed for: a record for another attempt is refused.
    public var attempt: Int

    /// The lease on `id` for `attempt`.
    public init(id: Int64, attempt: Int) {
        self.id = id
        self.attempt = attempt
    }
}
