public import Foundation

/// A notification and where its deliveries stand (`GET /api/notifications/{id}`).
public struct NotificationStatus: Sendable, Equatable {
    /// At most this many deliveries are listed; `summary` always counts all of them.
    public static let deliveryListLimit = 1_000

    /// The notification as accepted.
    public var notification: HeraldNotification
    /// Users it was for.
    public var recipients: Int
    /// The first ``deliveryListLimit`` deliveries, in creation order.
    public var deliveries: [DeliveryRecord]
    /// Every delivery counted per sink and state.
    public var summary: [String: [DeliveryState: Int]]
    /// For a fan-out written after the accept (``FanOutJob``): how far it has got.
    public var fanOut: FanOutProgress?

    /// A status; `summary` is counted from `deliveries` when not given.
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

/// Deliveries of one sink counted by state, for `herald sinks`: waiting now, or reached in a
/// recent window (``NotificationStore/sinkCounters(finishedSince:)``).
public struct SinkCounters: Sendable, Equatable {
    /// The sink counted.
    public var sink: String
    /// Its deliveries per state.
    public var counts: [DeliveryState: Int]
    /// The most recently recorded error in the window, if any.
    public var lastError: String?

    /// Counts for `sink`.
    public init(sink: String, counts: [DeliveryState: Int], lastError: String?) {
        self.sink = sink
        self.counts = counts
        self.lastError = lastError
    }
}

/// The delivery queue's size, for metrics.
public struct QueueStats: Sendable, Equatable {
    /// Deliveries waiting to be sent or retried.
    public var pending: Int
    /// The accept time of the oldest pending delivery's notification.
    public var oldestPendingSince: Date?

    /// The queue's size as read.
    public init(pending: Int, oldestPendingSince: Date?) {
        self.pending = pending
        self.oldestPendingSince = oldestPendingSince
    }
}
