import Foundation
import Testing

@testable import HeraldCore

/// Nothing from outside can trap the process: numbers saturate, odd headers are ignored.
@Suite struct SaturatingTests {
    let now = Date(timeIntervalSince1970: 1_445_412_470) // Wed, 21 Oct 2015 07:27:50 GMT

    @Test func retryAfterTakesSecondsAndHTTPDatesAndIgnoresGarbage() {
        #expect(RetryAfter.parse("120", now: now) == .seconds(120))
        #expect(RetryAfter.parse(" 0 ", now: now) == .zero)
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:28:00 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.parse("Wednesday, 21-Oct-15 07:28:00 GMT", now: now) == .seconds(10), "RFC 850")
        #expect(RetryAfter.parse("Wed Oct 21 07:28:00 2015", now: now) == .seconds(10), "asctime")
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:00:00 GMT", now: now) == .zero, "a date in the past means now")
        for garbage in ["soon", "", "-5", "1.5", "12abc", "0x10", "NaN", "∞", "Wed, 99 Foo 2015"] {
            #expect(RetryAfter.parse(garbage, now: now) == nil, "\(garbage)")
        }
    }

    @Test func hugeRetryAfterSaturates() {
        for huge in ["100000000000000", "9223372036854775808", String(repeating: "9", count: 400)] {
            let delay = RetryAfter.parse(huge, now: now)
            #expect((delay ?? .zero) > .seconds(86_400 * 365), "\(huge.prefix(20))")
        }
        #expect(RetryAfter.parse("Fri, 31 Dec 9999 23:59:59 GMT", now: now) != nil)
    }

    @Test func conversionsClampInsteadOfTrapping() {
        #expect(Int64(saturating: 1e300) == .max)
        #expect(Int64(saturating: -1e300) == .min)
        #expect(Int64(saturating: .nan) == 0)
        #expect(Int64(saturating: .infinity) == .max)
        #expect(Int64(saturating: 2.5) == 3 && Int64(saturating: -2.5) == -3)
        #expect(Int64.max.saturatingAdd(1) == .max && Int64.min.saturatingAdd(-1) == .min && Int64(2).saturatingAdd(3) == 5)
        #expect(Duration.saturating(seconds: .infinity) == Duration.saturating(seconds: 1e300))
        #expect(Duration.saturating(seconds: .nan) == .zero)
        #expect(Duration.saturating(seconds: 1.5) == .milliseconds(1500))
        let far = Date(timeIntervalSince1970: 1e15)
        #expect(Timestamp.microseconds(far) == Timestamp.representable.upperBound)
        #expect(Timestamp.format(far) == "9999-12-31T23:59:59.999999Z")
        #expect(Timestamp.format(microseconds: .min) == "0001-01-01T00:00:00.000000Z")
        _ = ObjectIDGenerator().next(at: far)
        _ = ObjectIDGenerator().next(at: Date(timeIntervalSince1970: .nan))
    }

    /// A provider's retry-after is honoured up to `maxRetryAfter`, never past it.
    @Test func theEngineCapsAProvidersRetryAfter() throws {
        var configuration = DeliveryEngineConfiguration()
        configuration.maxRetryAfter = .seconds(3600)
        let engine = DeliveryEngine(queue: NoQueue(), sinks: try SinkRegistry([]), configuration: configuration)
        let n = HeraldNotification(id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, timestamp: now, target: .users(["u"]))
        let delivery = Delivery(id: 1, sink: "x", notification: n, recipient: .init(userID: "u"), distribution: .alert, attempt: 1)
        let huge = RetryAfter.parse("100000000000000", now: now)
        let capped = engine.update(for: delivery, outcome: .retry(after: huge, reason: "503"), now: now)
        #expect(capped.state == .pending && capped.nextAttemptAt == now.addingTimeInterval(3600))
        let honoured = engine.update(for: delivery, outcome: .retry(after: .seconds(30), reason: "429"), now: now)
        #expect(honoured.nextAttemptAt == now.addingTimeInterval(30))
        let negative = engine.update(for: delivery, outcome: .retry(after: .seconds(-30), reason: "odd"), now: now)
        #expect(negative.nextAttemptAt == now)
    }
}

/// A queue with nothing in it, for engine methods that do not touch storage.
struct NoQueue: DeliveryQueue {
    func claimDue(now: Date, limit: Int, lease: Duration, sinks: SinkFilter) async throws -> [Delivery] { [] }
    func record(_ updates: [DeliveryUpdate], at date: Date) async throws {}
    func nextDueDate(sinks: SinkFilter) async throws -> Date? { nil }
    func queueStats() async throws -> QueueStats { QueueStats(pending: 0, oldestPendingSince: nil) }
    func oldestPendingBySink() async throws -> [String: Date] { [:] }
    func extendLeases(_ leases: [DeliveryLease], until: Date) async throws {}
}
