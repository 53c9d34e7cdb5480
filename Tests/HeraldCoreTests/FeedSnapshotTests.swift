import Foundation
import HeraldFeedRuleVectors
import HeraldFeedRules
import Synchronization
import Testing

@testable import HeraldCore

/// Reloads run concurrently, one per change to the feed, and finish in any order: the snapshot
/// keeps the newest read, so a message whose post was answered is served.
@Suite struct FeedSnapshotTests {
    /// Feed messages whose reads can be held: a held read answers what was stored when it began,
    /// as a database read does, once it is let go.
    final class HeldReadStore: FeedStore {
        private struct State {
            var messages: [FeedMessage] = []
            var holdNextRead = false
            var held: [CheckedContinuation<Void, Never>] = []
        }

        private let state = Mutex(State())
        var heldReads: Int { state.withLock { $0.held.count } }

        func holdNextRead() { state.withLock { $0.holdNextRead = true } }
        func letGo() {
            for read in state.withLock({ state in
                defer { state.held = [] }
                return state.held
            }) { read.resume() }
        }

        func feedMessages() async throws -> [FeedMessage] {
            let (messages, hold) = state.withLock { state in
                defer { state.holdNextRead = false }
                return (state.messages, state.holdNextRead)
            }
            if hold { await withCheckedContinuation { continuation in state.withLock { $0.held.append(continuation) } } }
            return messages
        }

        func addFeedMessage(_ message: FeedMessage) async throws { state.withLock { $0.messages.append(message) } }
        func deleteFeedMessage(id: ObjectID) async throws -> Bool { false }
        func purgeFeedMessages(expiredBefore date: Date) async throws -> Int { 0 }
    }

    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let ids = ObjectIDGenerator()

    func message(_ title: String) -> FeedMessage {
        FeedMessage(
            id: ids.next(at: t0), title: title, body: "", url: nil, postedAt: t0, expiresAt: t0.addingTimeInterval(3_600), priority: 0,
            targetRegions: ["CA"], targetVersion: nil
        )
    }

    func titles(_ snapshot: FeedSnapshot) -> [String] {
        snapshot.eligible(at: t0, for: FeedQuery()).map(\.title)
    }

    @Test func aReloadThatReadFirstAndFinishesLastKeepsTheNewerSnapshot() async throws {
        let store = HeldReadStore()
        let snapshot = FeedSnapshot()
        try await store.addFeedMessage(message("first"))

        // The first post's reload reads, then is held (its thread descheduled, say).
        store.holdNextRead()
        let slow = Task { try await snapshot.reload(from: store) }
        while store.heldReads == 0 { try await Task.sleep(for: .milliseconds(1)) }

        // The second post commits and its reload reads both and finishes first.
        try await store.addFeedMessage(message("second"))
        try await snapshot.reload(from: store)
        #expect(titles(snapshot) == ["first", "second"])
        let generation = snapshot.generation

        // The first reload finishes with its older read: the snapshot keeps the second message.
        store.letGo()
        try await slow.value
        #expect(titles(snapshot) == ["first", "second"])
        #expect(snapshot.generation == generation)
    }

    @Test func aReloadThatReadLaterReplacesTheSnapshotWhateverFinishedFirst() async throws {
        let store = HeldReadStore()
        let snapshot = FeedSnapshot()
        try await snapshot.reload(from: store)
        #expect(titles(snapshot) == [])

        try await store.addFeedMessage(message("one"))
        store.holdNextRead()
        let held = Task { try await snapshot.reload(from: store) }
        while store.heldReads == 0 { try await Task.sleep(for: .milliseconds(1)) }
        // Nothing newer began meanwhile: the held read still replaces the snapshot.
        #expect(titles(snapshot) == [])
        store.letGo()
        try await held.value
        #expect(titles(snapshot) == ["one"])
    }
}

/// The server's answers to the feed checks HeraldKit's tests put to the device's feed: one set of
/// vectors (Clients/HeraldFeedRules), so the two ends cannot disagree on what a device shows.
@Suite struct FeedSnapshotVectorTests {
    @Test func theServerAnswersEveryCheckAsTheVectorsSay() async throws {
        let feed = try FeedRuleVectors.load().eligibility
        let store = FeedSnapshotTests.HeldReadStore()
        for vector in feed.messages {
            let message = FeedMessage(
                id: try #require(ObjectID(vector.id)), title: vector.id, body: "", url: nil, postedAt: vector.postedAt, expiresAt: vector.expiresAt,
                priority: vector.priority, targetRegions: vector.targetRegions, targetVersion: vector.targetVersion)
            try await store.addFeedMessage(message)
        }
        let snapshot = FeedSnapshot()
        try await snapshot.reload(from: store)
        #expect(feed.checks.count >= 5)
        for check in feed.checks {
            let query = FeedQuery(region: check.region, version: check.version.flatMap { SemanticVersion(coercing: $0) })
            #expect(snapshot.eligible(at: feed.now, for: query).map(\.id.hex) == check.eligible, "\(check)")
            #expect(snapshot.next(at: feed.now, for: query, read: Set(check.read))?.id.hex == check.next, "\(check)")
        }
    }
}
