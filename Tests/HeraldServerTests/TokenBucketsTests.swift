import Foundation
import HeraldHTTP
import Testing

@testable import HeraldServer

/// The per-key token buckets behind the sign-up and engagement-event limits.
@Suite struct TokenBucketsTests {
    @Test func aBucketRefillsAtItsCapacityPerPeriodAndSaysHowLongToWait() {
        let buckets = TokenBuckets(capacity: 3_600, period: 3_600)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(buckets.take(3_600, for: "u", now: start) == nil, "a new key has a full bucket")
        #expect(buckets.take(10, for: "u", now: start) == 10, "one a second: ten take ten seconds")
        #expect(buckets.take(10, for: "u", now: start.addingTimeInterval(4)) == 6)
        #expect(buckets.take(10, for: "u", now: start.addingTimeInterval(10)) == nil)
        #expect(buckets.take(1, for: "u", now: start.addingTimeInterval(10)) == 1, "all or none: the ten took the refill")
        #expect(buckets.take(1, for: "other", now: start) == nil, "each key has its own bucket")
        #expect(buckets.take(5_000, for: "u", now: start.addingTimeInterval(1_000_000)) != nil, "more than a full bucket is never taken")
        #expect(buckets.take(3_600, for: "u", now: start.addingTimeInterval(1_000_000)) == nil, "and did not empty it")
    }

    @Test func unitsGivenBackAreThereAgainUpToAFullBucket() {
        let buckets = TokenBuckets(capacity: 100, period: 3_600)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(buckets.take(100, for: "u", now: now) == nil)
        buckets.giveBack(40, for: "u", now: now)
        #expect(buckets.take(40, for: "u", now: now) == nil)
        #expect(buckets.take(1, for: "u", now: now) != nil)
        buckets.giveBack(1_000, for: "u", now: now)
        #expect(buckets.take(101, for: "u", now: now) != nil, "never more than the capacity")
        #expect(buckets.take(100, for: "u", now: now) == nil)
        buckets.giveBack(10, for: "never-seen", now: now)
        #expect(buckets.tracked == 1, "giving back to an unknown key adds nothing")
    }

    @Test func aClockGoingBackDoesNotRefillTwice() {
        let buckets = TokenBuckets(capacity: 60, period: 60)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(buckets.take(60, for: "u", now: start) == nil)
        #expect(buckets.take(1, for: "u", now: start.addingTimeInterval(-30)) != nil, "nothing refills while the clock is behind")
        #expect(buckets.take(2, for: "u", now: start.addingTimeInterval(1)) != nil, "one second after the last instant seen gives one unit")
        #expect(buckets.take(1, for: "u", now: start.addingTimeInterval(1)) == nil)
    }
}
