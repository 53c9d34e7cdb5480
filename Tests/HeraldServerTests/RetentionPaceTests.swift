import Foundation
import HeraldCore
import HeraldServer
import HeraldTestSupport
import Logging
import Synchronization
import Testing

/// Retention keeps up with writing (issue 62): a pass purges until nothing past retention is left
/// rather than a fixed number of batches a minute, sizes batches so each holds the writer for
/// about `batchTarget`, and says when it was cut short.
@Suite(.cleansUp) struct RetentionPaceTests {
    /// Rows past retention that a purge removes `limit` at a time, noting each limit asked for.
    final class ExpiredRows: Sendable {
        private let state: Mutex<(left: Int, limits: [Int])>
        let pause: Duration

        init(_ count: Int, pause: Duration = .zero) {
            state = Mutex((count, []))
            self.pause = pause
        }

        var left: Int { state.withLock { $0.left } }
        var limits: [Int] { state.withLock { $0.limits } }

        func purge(limit: Int) async throws -> Int {
            if pause > .zero { try await Task.sleep(for: pause) }
            return state.withLock { state in
                state.limits.append(limit)
                let removed = min(limit, state.left)
                state.left -= removed
                return removed
            }
        }
    }

    func maintenance(_ rows: ExpiredRows, adjust: (inout StorageMaintenance.Policy) -> Void = { _ in }) async throws -> StorageMaintenance {
        let herald = try await TestHerald.make()
        var policy = StorageMaintenance.Policy(
            staleDevicesAfter: .seconds(86_400), deliveries: .seconds(86_400), idempotency: .seconds(86_400), history: nil, archive: nil)
        adjust(&policy)
        let purge = StorageMaintenance.ModulePurge(kind: "events", retention: .seconds(86_400)) { _, limit in try await rows.purge(limit: limit) }
        return StorageMaintenance(
            store: herald.server.store, policy: policy, modulePurges: [purge], logger: Logger(label: "test"), metrics: HeraldMetrics())
    }

    /// 60 000 expired rows go in one pass; before, a pass stopped at 20 batches of 500, about
    /// 167 rows a second, less than a modest write rate.
    @Test func aPassPurgesEverythingPastRetentionWithGrowingBatches() async throws {
        let rows = ExpiredRows(60_000)
        // A generous target, so no batch here, however loaded the machine, counts as slow.
        let report = try await maintenance(rows) {
            $0.batchTarget = .seconds(5)
            $0.writerShare = 1
        }.pass()
        #expect(report.removed["events"] == 60_000)
        #expect(report.behind.isEmpty)
        #expect(rows.left == 0)
        #expect(rows.limits == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 20_000, 20_000], "fast batches double, up to maxBatchSize")
    }

    /// Batches that hold the writer longer than the target shrink (to a floor of 100 rows: a
    /// transaction's own cost does not shrink with it).
    @Test func slowBatchesShrink() async throws {
        let rows = ExpiredRows(800, pause: .milliseconds(30))
        let report = try await maintenance(rows) { $0.batchTarget = .milliseconds(5) }.pass()
        #expect(report.removed["events"] == 800)
        let limits = rows.limits
        #expect(limits.prefix(3) == [500, 250, 125], "\(limits)")
    }

    /// A kind cut short by its share of the pass is reported behind (the gauge
    /// `herald_retention_behind`), and the service goes again without waiting an interval.
    @Test func aKindCutShortIsBehind() async throws {
        let rows = ExpiredRows(10_000, pause: .milliseconds(5))
        let pace = try await maintenance(rows) { $0.timePerKind = .milliseconds(1) }
        let first = try await pace.pass()
        #expect(first.behind == ["events"])
        #expect(rows.left > 0)
        var passes = 1
        while rows.left > 0 && passes < 1_000 {
            _ = try await pace.pass()
            passes += 1
        }
        #expect(rows.left == 0)
        #expect(try await pace.pass().behind.isEmpty)
    }

    /// Where history outlives deliveries, most notifications past the cutoff are still referred
    /// to. A pass reads a bounded number of them and is not behind for it; the next one goes on
    /// where it stopped: starting again from the first, no pass would reach the one that can go.
    @Test func notificationsStillReferredToAreSteppedThroughAcrossPasses() async throws {
        let herald = try await TestHerald.make()
        let store = herald.server.store
        let ids = ObjectIDGenerator()
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        for index in 0..<12 {
            let at = t0.addingTimeInterval(Double(index))
            let notification = HeraldNotification(
                id: ids.next(at: at), type: "comment", title: "T", body: "B", url: nil, timestamp: at, target: .users(["a"]))
            _ = try await store.accept(notification, recipients: 1, deliveries: [], idempotencySince: at)
            if index != 10 { try await store.appendHistory([(notification.id, "a")], at: at) }
        }
        var policy = StorageMaintenance.Policy(
            staleDevicesAfter: .seconds(86_400), deliveries: .seconds(86_400), idempotency: .seconds(86_400), history: nil, archive: nil)
        policy.batchSize = 2
        policy.maxBatchSize = 2
        policy.notificationsExaminedPerPass = 4 // two steps a pass
        let maintenance = StorageMaintenance(store: store, policy: policy, logger: Logger(label: "test"), metrics: HeraldMetrics())
        var passes = 0
        var removed = 0
        while removed == 0 && passes < 20 {
            let report = try await maintenance.pass(now: t0.addingTimeInterval(2 * 86_400))
            #expect(!report.behind.contains("notifications"), "cut short among notifications still referred to")
            removed += report.removed["notifications"] ?? 0
            passes += 1
        }
        #expect(removed == 1)
        #expect(passes == 3, "four looked at a pass: the third pass reaches the eleventh")
    }
}
