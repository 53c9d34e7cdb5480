import Foundation
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import Testing

@testable import HeraldCore

/// Fan-outs above the inline limit are written a page of each at a time: one committed after a
/// large one is not held back until the large one's last page.
@Suite(.cleansUp) struct FanOutFairnessTests {
    @Test func aSmallFanOutIsNotHeldBackByALargeOneBeforeIt() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        let ids = ObjectIDGenerator()
        let users = (1...8).map { "u\($0)" }
        for user in users { _ = try await store.updateSettings(userID: user) { _ in } }
        let sinks = try SinkRegistry([HistorySink(store: store)])
        let router = try NotificationRouter(registry: sinks)
        func accept(_ audience: [String]) async throws -> ObjectID {
            let n = HeraldNotification(
                id: ids.next(), type: "generic", title: "t", body: "b", url: nil, timestamp: Date(), target: .audience(Audience(userIDs: audience)))
            _ = try await store.acceptAudience(
                n, audience: Audience(userIDs: audience), route: { router.plan(n, for: $0, at: n.timestamp) }, pageSize: 1, inlineLimit: 1,
                idempotency: nil, idempotencySince: Date().addingTimeInterval(-60))
            return n.id
        }
        let large = try await accept(Array(users.prefix(6)))
        let small = try await accept(Array(users.suffix(2)))
        let worker = FanOutWorker(store: store, router: router, pageSize: 1)
        func progress(_ id: ObjectID) async throws -> FanOutProgress {
            try #require(try await store.status(of: id)?.fanOut)
        }
        // Two recipients a page each, and a last call that finds no more.
        for _ in 0..<3 { #expect(try await worker.writeRound() == 2) }
        let smallNow = try await progress(small)
        #expect(smallNow.done && smallNow.written == 2, "written in three rounds, a page of each: \(smallNow)")
        let halfway = try await progress(large)
        #expect(halfway.written == 3 && !halfway.done, "\(halfway)")
        try await worker.drain()
        let end = try await progress(large)
        #expect(end.done && end.written == 6)
        #expect(try await worker.writeRound() == 0)
    }
}
