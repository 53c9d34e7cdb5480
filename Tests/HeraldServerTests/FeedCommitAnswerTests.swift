import Foundation
import HTTPTypes
import HeraldCore
import HeraldFeed
import HeraldHTTP
import HeraldStore
import HeraldTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

@testable import HeraldServer

/// A feed post or delete that is committed is answered as done even when reading the feed back
/// fails: an error would make the client post the message again.
@Suite(.cleansUp) struct FeedCommitAnswerTests {
    /// SQLite whose feed reads fail while `readsFail` is set, as when storage is lost between a
    /// write and the read after it.
    final class FailingReadStore: FeedStore {
        let stored: SharedFeedStore
        let readsFail = Atomic(false)

        init() async throws {
            let database = try SQLiteStore(path: ":memory:")
            try await database.migrate()
            stored = SharedFeedStore(database: database)
        }

        func feedMessages() async throws -> [FeedMessage] {
            if readsFail.load(ordering: .relaxed) { throw HeraldError(.unavailable, code: "storage_lost", "the read failed") }
            return try await stored.feedMessages()
        }

        func addFeedMessage(_ message: FeedMessage) async throws { try await stored.addFeedMessage(message) }
        func deleteFeedMessage(id: ObjectID) async throws -> Bool { try await stored.deleteFeedMessage(id: id) }
        func purgeFeedMessages(expiredBefore date: Date) async throws -> Int { try await stored.purgeFeedMessages(expiredBefore: date) }
    }

    /// Lets every request through as the admin.
    struct AdminCaller: RouterMiddleware {
        func handle(_ request: Request, context: HeraldRequestContext, next: (Request, HeraldRequestContext) async throws -> Response) async throws -> Response
        {
            var context = context
            context.caller = .apiKey(APIKeyRecord(id: ObjectIDGenerator().next(), name: "admin", role: .admin, createdAt: Date()))
            return try await next(request, context)
        }
    }

    @Test func aCommittedPostAndDeleteAreAnsweredAsDoneWhenTheReadBackFails() async throws {
        let store = try await FailingReadStore()
        let snapshot = FeedSnapshot()
        let router = Router(context: HeraldRequestContext.self)
        router.add(middleware: ErrorMiddleware<HeraldRequestContext>())
        router.add(middleware: AdminCaller())
        FeedRoutes(
            store: store, snapshot: snapshot, documents: FeedDocuments(snapshot: snapshot),
            resources: try ResourceResolver(publicBaseURL: "https://app.example"), ids: ObjectIDGenerator(), schemaFile: nil
        ).register(on: router, table: RouteTable())

        var quiet = Logger(label: "feed-commit-answer")
        quiet.logLevel = .critical
        try await Application(router: router, logger: quiet).test(.router) { client in
            store.readsFail.store(true, ordering: .relaxed)
            let posted = try await client.call(
                .post, "/api/feed/messages", headers(contentType: "application/json"),
                json: ["title": "Maintenance", "body": "Tonight", "expires_at": "2100-01-01T00:00:00Z", "target_regions": ["CA"]])
            #expect(posted.status == .created, "\(String(buffer: posted.body))")
            let answer = try JSONSerialization.jsonObject(with: Data(buffer: posted.body)) as? [String: String]
            let id = try #require(answer?["id"])
            #expect(try await store.stored.feedMessages().map(\.id.hex) == [id])

            // The next reload that succeeds serves it.
            store.readsFail.store(false, ordering: .relaxed)
            try await snapshot.reload(from: store)
            #expect(snapshot.eligible(at: Date(), for: FeedQuery()).map(\.title) == ["Maintenance"])

            store.readsFail.store(true, ordering: .relaxed)
            let deleted = try await client.call(.delete, "/api/feed/messages/\(id)", headers(contentType: nil))
            #expect(deleted.status == .noContent, "\(String(buffer: deleted.body))")
            #expect(try await store.stored.feedMessages().isEmpty)
        }
    }
}
