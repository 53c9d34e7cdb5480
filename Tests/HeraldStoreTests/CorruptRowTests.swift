import Foundation
import GRDB
import HeraldCards
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Testing

@testable import HeraldStore

/// A database row is outside input: a value of the wrong type (a file edited by hand, a column
/// another Herald version changed) fails the request that reads it, and the process goes on.
@Suite(.cleansUp) struct CorruptRowTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func accepted(_ store: some HeraldStorage) async throws -> ObjectID {
        let n = HeraldNotification(
            id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, data: [:], timestamp: t0, priority: 3, expiresAt: nil,
            collapseKey: nil, idempotencyKey: nil, target: .users(["a"]))
        _ = try await store.accept(n, recipients: 1, deliveries: [PlannedDelivery(sink: "hook", userID: "a", distribution: .alert)], idempotencySince: t0)
        return n.id
    }

    @Test func aSQLiteValueOfTheWrongTypeFailsTheReadNotTheProcess() async throws {
        let path = try TestResources.temporaryDirectory("herald-corrupt").appendingPathComponent("test.sqlite").path
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        try await store.migrate()
        let id = try await accepted(store)
        #expect(try await store.status(of: id)?.recipients == 1)
        // SQLite keeps text that does not look like a number as text, even in an INTEGER column.
        try await store.writer.write { db in
            try db.execute(sql: "UPDATE notifications SET recipients = 'many' WHERE id = ?", arguments: [id.hex])
            try db.execute(sql: "UPDATE deliveries SET sink = x'00ff' WHERE notification_id = ?", arguments: [id.hex])
        }
        await #expect(throws: (any Error).self) { try await store.status(of: id) }
        await #expect(throws: (any Error).self) { try await store.sinkCounters(finishedSince: .distantPast) }
        #expect(try await store.settings(userID: "a") == UserSettings(), "the store still answers")
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aPostgresColumnOfTheWrongTypeFailsTheReadNotTheProcess() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        let id = try await accepted(store)
        try await store.withConnection { session in
            try await session.execute("ALTER TABLE notifications ALTER COLUMN recipients TYPE text")
            try await session.execute("UPDATE notifications SET recipients = 'many'")
        }
        await #expect(throws: (any Error).self) { try await store.status(of: id) }
        #expect(try await store.settings(userID: "a") == UserSettings(), "the store still answers")
    }

    /// A user's next card index at the top of Int64's range: the next seen report would number
    /// its cards past it, which in Swift arithmetic traps.
    @Test func aSQLiteCardIndexAtTheEndOfItsRangeFailsTheReportNotTheProcess() async throws {
        let path = try TestResources.temporaryDirectory("herald-corrupt").appendingPathComponent("test.sqlite").path
        let store = try SQLiteStore(path: path, modules: [.cards])
        TestResources.register { await store.close() }
        try await store.migrate()
        try await reportsPastTheLastCardIndexFail(store) { max in
            try await store.writer.write { db in try db.execute(sql: "UPDATE card_users SET next_index = ?", arguments: [max]) }
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aPostgresCardIndexAtTheEndOfItsRangeFailsTheReportNotTheProcess() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.migrate()
        try await reportsPastTheLastCardIndexFail(store) { max in
            try await store.withConnection { session in try await session.execute("UPDATE card_users SET next_index = \(max)") }
        }
    }

    func reportsPastTheLastCardIndexFail(_ store: some EngineBackedStorage, setNextIndex: (Int64) async throws -> Void) async throws {
        let cards = try CardStores.on(store)
        _ = try await cards.putCards(["a", "b", "c"].map { Card(id: $0, metadata: [:], postedAt: t0, hot: nil) })
        #expect(try await cards.markSeen(userID: "u", [SeenReport(card: "a", at: t0)]) == [CardHistoryEntry(index: 0, card: "a")])
        try await setNextIndex(Int64.max - 1)
        await #expect(throws: (any Error).self) {
            try await cards.markSeen(userID: "u", [SeenReport(card: "b", at: t0), SeenReport(card: "c", at: t0)])
        }
        #expect(try await cards.markSeen(userID: "u", [SeenReport(card: "a", at: t0)]) == [CardHistoryEntry(index: 0, card: "a")], "the store still answers")
        #expect(
            try await cards.pull(userID: "u", since: nil, order: .hot, limit: 10).history == [CardHistoryEntry(index: 0, card: "a")], "nothing was half written"
        )
    }

    /// A fan-out job's count of written recipients at the top of Int's range: the page's progress
    /// adds to it, which in Swift arithmetic traps (SQLite's own addition turns to a float).
    @Test func aSQLiteFanOutCountAtTheEndOfItsRangeDoesNotStopTheProcess() async throws {
        let path = try TestResources.temporaryDirectory("herald-corrupt").appendingPathComponent("test.sqlite").path
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        try await store.migrate()
        let tree = try await TopicTree.make(in: store, ids: ids)
        for user in ["u1", "u2", "u3"] {
            _ = try await store.updateSettings(userID: user) { _ in }
            try await store.subscribe(userID: user, topicKey: tree.optIn.topicKey, at: t0)
        }
        let n = HeraldNotification(id: ids.next(), type: "generic", title: "t", body: "b", url: nil, timestamp: t0, target: .topic(tree.optIn.topicKey))
        _ = try await store.acceptFanOut(
            n, topic: tree.optIn.topicKey, level: tree.optIn.opt.level, plan: .historyOnly, extra: [], archive: nil, pageSize: 2, inlineLimit: 1,
            idempotency: nil, idempotencySince: t0)
        try await store.writer.write { db in try db.execute(sql: "UPDATE fanout_jobs SET written = ?", arguments: [Int64.max]) }
        let progress = try await store.writeFanOutPage(of: n.id, pageSize: 2, route: { _ in [] })
        #expect(progress?.written == .max, "clamped")
        #expect(try await store.settings(userID: "u1") == UserSettings(), "the store still answers")
    }

    /// postgres-nio stops the process when a row lacks a column its subscript is asked for.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aMissingPostgresColumnIsAStorageError() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        let row = try #require(try await store.withConnection { session in try await session.row("SELECT 'x' AS present") })
        #expect(try row.text("present") == "x")
        #expect(throws: HeraldError.self) { try row.text("absent") }
        #expect(throws: HeraldError.self) { try row.optionalInteger("absent") }
        #expect(throws: HeraldError.self) { try row.cell("absent") }
    }
}
