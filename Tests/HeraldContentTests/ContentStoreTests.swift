import Foundation
import HeraldContent
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// The content module's store on every engine: one implementation, its SQL written once.
@Suite(.cleansUp) struct ContentStoreTests {
    func item(_ title: String, order: Int, tiers: [String]? = nil) throws -> ContentItem {
        var fields: [String: JSONValue] = ["type": .string("post"), "title": .string(title), "order": .integer(Int64(order))]
        fields["visibility"] = tiers.map { .object(["tier_ids": .array($0.map(JSONValue.string))]) } ?? .object(["all": .bool(true)])
        return try ContentItem(fields: fields, path: "items[\(order)]")
    }

    @Test(arguments: StoreKind.allCases)
    func contentDraftPublishRevert(_ kind: StoreKind) async throws {
        let engine = try await kind.make()
        let store = SharedContentStore(database: engine)
        #expect(try await store.pendingContent().items.isEmpty)
        #expect(try await store.publishedContent().items.isEmpty)
        let first = [try item("One", order: 1), try item("Two", order: 2, tiers: ["3"])]
        try await store.setPendingContent(first)
        #expect(try await store.pendingContent().items == first)
        #expect(try await store.publishedContent().items.isEmpty, "editing the draft publishes nothing")
        let published = try await store.publishContent(at: 1_700_000_000_123)
        #expect(published.items == first && published.lastPublishedAt == 1_700_000_000_123)
        #expect(try await store.publishedContent() == published)
        try await store.setPendingContent([try item("Three", order: 3)])
        let reverted = try await store.revertContent()
        #expect(reverted.items == first, "revert brings the published set back into the draft")
        #expect(try await store.pendingContent().items == first)
        await engine.close()
    }

    /// A set written on one engine reads back exactly, whatever its JSON holds: the shared SQL
    /// binds text as text on both.
    @Test(arguments: StoreKind.allCases)
    func itemsKeepEveryValueAsSent(_ kind: StoreKind) async throws {
        let engine = try await kind.make()
        let store = SharedContentStore(database: engine)
        let odd: [String: JSONValue] = [
            "type": .string("survey"), "order": .integer(Int64.max), "title": .string("é 🙂 \"quoted\" \\ $1 ?"),
            "nested": .object(["list": .array([.null, .bool(false), .number(2.5)])]), "visibility": .object(["all": .bool(true)]),
        ]
        let items = [try ContentItem(fields: odd, path: "items[0]")]
        try await store.setPendingContent(items)
        #expect(try await store.pendingContent().items == items)
        await engine.close()
    }
}
