public import Foundation
import Synchronization

/// What each sink did minute by minute over the last hour, and when its circuit opened and
/// closed, as the portal's status page draws it: a fault and its recovery at a glance
/// (docs/durability.md, "A sink that is down"). Kept in this process's memory, a few kilobytes a
/// sink.
public final class DeliveryTimeline: Sendable {
    /// One minute of a sink's outcomes.
    public struct Minute: Sendable, Equatable {
        /// The minute's start.
        public var start: Date
        /// Deliveries delivered.
        public var delivered = 0
        /// Attempts that failed and will be tried again.
        public var retried = 0
        /// Failed or dead: given up on.
        public var failed = 0

        /// A minute's counts.
        public init(start: Date, delivered: Int = 0, retried: Int = 0, failed: Int = 0) {
            (self.start, self.delivered, self.retried, self.failed) = (start, delivered, retried, failed)
        }
    }

    /// A circuit opening (with why) or closing.
    public struct CircuitChange: Sendable, Equatable {
        /// When it changed.
        public var at: Date
        /// True when it opened, false when it closed.
        public var opened: Bool
        /// Why it opened; nil for a closing.
        public var reason: String?

        /// A change as recorded.
        public init(at: Date, opened: Bool, reason: String?) {
            (self.at, self.opened, self.reason) = (at, opened, reason)
        }
    }

    /// Minutes kept per sink.
    public static let minutes = 60
    static let changesKept = 50

    private struct Sink {
        var minutes: [Minute] = []
        var changes: [CircuitChange] = []
    }

    private let sinks = Mutex<[String: Sink]>([:])

    /// An empty timeline.
    public init() {}

    /// Counts one delivery outcome of `sink` (`delivered`, `retry`, `failed` or `dead`).
    func record(sink: String, outcome: String, at now: Date) {
        let start = Self.minuteStart(now)
        sinks.withLock { sinks in
            var entry = sinks[sink] ?? Sink()
            // Workers answer out of order across a minute's edge: each outcome finds its minute.
            let index: Int
            if let found = entry.minutes.lastIndex(where: { $0.start == start }) {
                index = found
            } else {
                entry.minutes.append(Minute(start: start))
                entry.minutes.sort { $0.start < $1.start }
                index = entry.minutes.lastIndex { $0.start == start } ?? entry.minutes.count - 1
            }
            switch outcome {
            case "delivered": entry.minutes[index].delivered += 1
            case "retry": entry.minutes[index].retried += 1
            default: entry.minutes[index].failed += 1
            }
            if let oldest = entry.minutes.first?.start, start.timeIntervalSince(oldest) >= Double(Self.minutes * 60) {
                entry.minutes.removeAll { start.timeIntervalSince($0.start) >= Double(Self.minutes * 60) }
            }
            sinks[sink] = entry
        }
    }

    /// Notes that `sink`'s circuit opened (with why) or closed.
    func circuit(sink: String, opened: Bool, reason: String?, at now: Date) {
        sinks.withLock { sinks in
            var entry = sinks[sink] ?? Sink()
            entry.changes.append(CircuitChange(at: now, opened: opened, reason: reason))
            if entry.changes.count > Self.changesKept { entry.changes.removeFirst(entry.changes.count - Self.changesKept) }
            sinks[sink] = entry
        }
    }

    /// `sink`'s minutes within the hour before `now`, oldest first (minutes without outcomes are
    /// left out), and its circuit's changes in that hour, with the last one before it (so a
    /// circuit open the whole hour shows).
    public func history(of sink: String, now: Date = Date()) -> (minutes: [Minute], changes: [CircuitChange]) {
        let since = Self.minuteStart(now).addingTimeInterval(-Double((Self.minutes - 1) * 60))
        return sinks.withLock { sinks in
            guard let entry = sinks[sink] else { return ([], []) }
            let minutes = entry.minutes.filter { $0.start >= since }
            let inHour = entry.changes.filter { $0.at >= since }
            let before = entry.changes.last { $0.at < since }
            return (minutes, (before.map { [$0] } ?? []) + inHour)
        }
    }

    static func minuteStart(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 60).rounded(.down) * 60)
    }
}
