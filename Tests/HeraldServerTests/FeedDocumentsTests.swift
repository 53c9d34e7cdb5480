import Foundation
import HeraldCore
import HeraldFeedRules
import HeraldStore
import HeraldTestSupport
import NIOCore
import Testing

@testable import HeraldFeed

/// The cached `/feed/index.json` documents change exactly when what they answer changes: a
/// reload, or the first message in them expiring; each query has its own; the budget holds.
@Suite(.cleansUp) struct FeedDocumentsTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let ids = ObjectIDGenerator()

    func message(_ title: String, expiresIn seconds: Double, regions: [String] = ["CA"]) -> FeedMessage {
        FeedMessage(
            id: ids.next(at: t0), title: title, body: "", url: nil, postedAt: t0, expiresAt: t0.addingTimeInterval(seconds), priority: 0,
            targetRegions: regions, targetVersion: nil
        )
    }

    func titles(_ document: FeedDocuments.Document) throws -> [String] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(document.body.readableBytesView)) as? [String: Any])
        return (object["messages"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
    }

    @Test func aDocumentChangesOnReloadAndWhenItsFirstMessageExpires() async throws {
        let database = try SQLiteStore(path: ":memory:")
        try await database.migrate()
        let store = SharedFeedStore(database: database)
        try await store.addFeedMessage(message("soon", expiresIn: 10))
        try await store.addFeedMessage(message("later", expiresIn: 100))
        let snapshot = FeedSnapshot()
        try await snapshot.reload(from: store)
        let documents = FeedDocuments(snapshot: snapshot)
        let all = FeedQuery()

        let first = try documents.document(for: all, at: t0)
        #expect(try titles(first) == ["soon", "later"])
        #expect(first.validUntil == t0.addingTimeInterval(10))
        let again = try documents.document(for: all, at: t0.addingTimeInterval(9))
        #expect(again.tag == first.tag && again.body == first.body)
        #expect(documents.cached.documents == 1)

        // "soon" expires: the cached document is not served past it.
        let expired = try documents.document(for: all, at: t0.addingTimeInterval(10))
        #expect(try titles(expired) == ["later"])
        #expect(expired.tag != first.tag)

        // A reload (a message posted here or by another process) replaces it at once.
        try await store.addFeedMessage(message("new", expiresIn: 50, regions: ["QC"]))
        try await snapshot.reload(from: store)
        let reloaded = try documents.document(for: all, at: t0.addingTimeInterval(11))
        #expect(try titles(reloaded) == ["new", "later"] || titles(reloaded) == ["later", "new"])
        #expect(reloaded.tag != expired.tag)

        // Each query is its own document, cached beside the others.
        let ontario = try documents.document(for: FeedQuery(region: "ON"), at: t0.addingTimeInterval(11))
        #expect(try titles(ontario) == ["later"])
        #expect(ontario.tag != reloaded.tag)
        #expect(try documents.document(for: all, at: t0.addingTimeInterval(12)).tag == reloaded.tag)
        #expect(documents.cached.documents == 2)
    }

    @Test func manyDistinctQueriesStayWithinTheBudgetAndAnswerCorrectly() async throws {
        let database = try SQLiteStore(path: ":memory:")
        try await database.migrate()
        let store = SharedFeedStore(database: database)
        try await store.addFeedMessage(message("everyone", expiresIn: 100))
        let snapshot = FeedSnapshot()
        try await snapshot.reload(from: store)
        let documents = FeedDocuments(snapshot: snapshot, maxCachedBytes: 4096)
        for n in 0..<500 {
            let region = "R\(n)-" + String(repeating: "x", count: n % 50)
            let document = try documents.document(for: FeedQuery(region: region), at: t0)
            #expect(try titles(document) == ["everyone"])
            #expect(documents.cached.bytes <= 4096)
        }
        #expect(documents.cached.documents > 0)
        // A region longer than the whole budget is answered, never cached.
        let huge = try documents.document(for: FeedQuery(region: String(repeating: "y", count: 8192)), at: t0)
        #expect(try titles(huge) == ["everyone"])
        #expect(documents.cached.bytes <= 4096)
    }

    /// Made-up regions and versions are the same few documents: a client sending a new one at
    /// every poll neither grows the cache nor pushes out the document everyone else is served.
    @Test func madeUpRegionsAndVersionsCannotFlushEveryonesDocument() async throws {
        let database = try SQLiteStore(path: ":memory:")
        try await database.migrate()
        let store = SharedFeedStore(database: database)
        try await store.addFeedMessage(message("canada", expiresIn: 100))
        try await store.addFeedMessage(message("quebec", expiresIn: 100, regions: ["QC"]))
        let snapshot = FeedSnapshot()
        try await snapshot.reload(from: store)
        let documents = FeedDocuments(snapshot: snapshot, maxCachedBytes: 64 * 1024, maxQueryBytes: 2048)
        let popular = try documents.document(for: FeedQuery(region: "QC"), at: t0)
        for n in 0..<2_000 {
            let query = FeedQuery(region: "Z\(n)", version: SemanticVersion("\(n % 40).\(n).0"))
            #expect(try titles(documents.document(for: query, at: t0)) == ["canada"])
        }
        #expect(documents.cached.documents == 2, "2 000 made-up queries made \(documents.cached.documents) documents")
        let again = try documents.document(for: FeedQuery(region: "QC"), at: t0)
        #expect(again.tag == popular.tag && again.body == popular.body)
    }
}
