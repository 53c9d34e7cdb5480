import Foundation
import GRDB
import GRDBSQLite
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldStore

/// The claim and recipient reads are cached statements with an IN list. SQLite compiles each
/// SQL text into a program as long as its list, so one text per list length kept hundreds of
/// programs per connection; the lists are padded to powers of two instead.
@Suite(.cleansUp) struct SQLiteStatementCacheTests {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    @Test func anInListIsPaddedToAPowerOfTwoWithItsLastValue() {
        let three = SQLiteStore.inList([7, 8, 9] as [Int64])
        #expect(three.placeholders == "?, ?, ?, ?")
        #expect(three.arguments == StatementArguments([7, 8, 9, 9] as [Int64]))
        let four = SQLiteStore.inList(["a", "b", "c", "d"])
        #expect(four.placeholders == "?, ?, ?, ?" && four.arguments == StatementArguments(["a", "b", "c", "d"]))
        #expect(SQLiteStore.inList(["only"]).placeholders == "?")
        #expect(SQLiteStore.inList([] as [String]).placeholders.isEmpty)
        #expect(SQLiteStore.inList(Array(1...129) as [Int64]).placeholders.split(separator: ",").count == 256)
    }

    @Test func claimsOfEverySizeTakeEachDeliveryOnceAndKeepFewStatements() async throws {
        let store = try await Self.store()
        let ids = ObjectIDGenerator()
        for index in 0..<120 {
            let user = "u\(index)"
            let notification = HeraldNotification(
                id: ids.next(at: t0), type: "comment", title: "T", body: "B", url: nil, timestamp: t0, target: .users([user]))
            _ = try await store.accept(
                notification, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: user, distribution: .alert)], idempotencySince: t0)
        }
        let before = try await store.writer.write { db in Self.preparedStatements(db) }
        var claimed: [Delivery] = []
        for limit in 1...15 {
            let batch = try await store.claimDue(now: t0.addingTimeInterval(1), limit: limit, lease: .seconds(60))
            #expect(batch.count == limit, "a claim of \(limit) takes \(limit), the padding adds none")
            claimed += batch
        }
        #expect(Set(claimed.map(\.id)).count == 120, "each delivery claimed once")
        #expect(claimed.allSatisfy { $0.attempt == 1 }, "a repeated id in the padded list counts one attempt")
        let after = try await store.writer.write { db in Self.preparedStatements(db) }
        // The sinks with a pending delivery, the two first SELECTs (a sink's first attempts, its
        // retries), then fifteen lengths in five powers of two for the UPDATE and the SELECT.
        #expect(after - before == 13, "\(after - before) statements prepared by the claims")
        await store.close()
    }

    @Test func recipientReadsOfEveryLengthInABucketPrepareNothingNew() async throws {
        let store = try await Self.store()
        let users = (0..<256).map { "user-\($0)" }
        let before = try await store.writer.write { db in
            _ = try SQLiteStore.recipients(db, userIDs: users)
            return Self.preparedStatements(db)
        }
        let after = try await store.writer.write { db in
            for count in 129...256 {
                let contexts = try SQLiteStore.recipients(db, userIDs: Array(users.prefix(count)))
                #expect(contexts.map(\.userID) == Array(users.prefix(count)))
            }
            return Self.preparedStatements(db)
        }
        #expect(after == before, "lists of 129 to 256 users share the statements of 256")
        await store.close()
    }

    /// The conformance suites' migrated file store, as the SQLite type whose connection is counted.
    static func store() async throws -> SQLiteStore {
        try #require(try await StoreKind.sqlite.make() as? SQLiteStore)
    }

    /// Statements prepared on `db`'s connection, cached or not.
    static func preparedStatements(_ db: Database) -> Int {
        var count = 0
        var statement = sqlite3_next_stmt(db.sqliteConnection, nil)
        while let current = statement {
            count += 1
            statement = sqlite3_next_stmt(db.sqliteConnection, current)
        }
        return count
    }
}
