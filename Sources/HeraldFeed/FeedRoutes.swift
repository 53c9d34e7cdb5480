import Crypto
public import Foundation
import HTTPTypes
public import HeraldCore
import HeraldFeedRules
public import HeraldHTTP
public import Hummingbird
import Logging

/// The privacy-friendly pull feed (docs/feed.md): anonymous reads from the in-memory snapshot, admin writes.
public struct FeedRoutes: Sendable {
    let store: any FeedStore
    let snapshot: FeedSnapshot
    let documents: FeedDocuments
    let resources: ResourceResolver
    let ids: ObjectIDGenerator
    /// Where the document's JSON Schema is (a resource of the executable's, which deployments
    /// copy beside the binary); nil answers `/feed/schema.json` with a 500 naming it.
    let schemaFile: URL?
    /// How long clients and caches may keep the feed.
    static let maxAge = 60

    public init(
        store: any FeedStore, snapshot: FeedSnapshot, documents: FeedDocuments, resources: ResourceResolver, ids: ObjectIDGenerator, schemaFile: URL?
    ) {
        (self.store, self.snapshot, self.documents, self.resources, self.ids, self.schemaFile) = (store, snapshot, documents, resources, ids, schemaFile)
    }

    public func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/feed/index.json", index)
        table.add(router, .get, "/feed/next", next)
        table.add(router, .get, "/feed/schema.json", schema)
        table.add(router, .post, "/api/feed/messages", create)
        table.add(router, .get, "/api/feed/messages", list)
        table.add(router, .delete, "/api/feed/messages/{id}", delete)
    }

    struct Item: Encodable {
        var id: String
        var title: String
        var body: String
        var url: Nullable<String>
        var posted_at: String
        var expires_at: String
        var priority: Int
        var target_regions: [String]
        var target_version: Nullable<String>

        init(_ m: FeedMessage) {
            id = m.id.hex
            title = m.title
            body = m.body
            url = Nullable(m.url)
            posted_at = Timestamp.format(m.postedAt)
            expires_at = Timestamp.format(m.expiresAt)
            priority = m.priority
            target_regions = m.targetRegions
            target_version = Nullable(m.targetVersion)
        }
    }

    struct Document: Encodable { var messages: [Item] }

    /// The feed query a request names (`region`, `version`), refused with a 400 naming the parameter.
    public static func query(_ request: Request) throws -> FeedQuery {
        var query = FeedQuery()
        if let region = try request.nonEmptyQueryText("region") { query.region = region }
        if let text = try request.nonEmptyQueryText("version") {
            guard let version = SemanticVersion(coercing: text) else {
                throw Request.invalidQuery("version", "must be a version such as 2.1.0")
            }
            query.version = version
        }
        return query
    }

    @Sendable func index(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let document = try documents.document(for: try Self.query(request), at: Date())
        return EntityTag.response(document.body, tag: document.tag, request: request, cacheControl: "public, max-age=\(Self.maxAge)")
    }

    @Sendable func next(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let read = Set((try request.queryText("read") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        guard let message = snapshot.next(at: Date(), for: try Self.query(request), read: read) else {
            return Response(status: .noContent, headers: [.cacheControl: "no-store"])
        }
        var response = try JSONBody.response(Item(message))
        response.headers[.cacheControl] = "no-store"
        return response
    }

    @Sendable func schema(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        guard let url = schemaFile else {
            throw HeraldError(.internal, code: "missing_resource", "feed.schema.json is missing from the build")
        }
        return Response(
            status: .ok, headers: [.contentType: "application/schema+json", .cacheControl: "public, max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(bytes: try Data(contentsOf: url)))
        )
    }

    @Sendable func create(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let submission = try await JSONBody.decode(FeedMessageSubmission.self, from: request, context: context, knownFields: FeedMessageSubmission.fieldNames)
        let now = Date()
        let message = try submission.validated(id: ids.next(at: now), now: now, resources: resources)
        try await store.addFeedMessage(message)
        await serveCommittedChange(context)
        return try JSONBody.response(["id": message.id.hex], status: .created)
    }

    @Sendable func list(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        return try JSONBody.response(Document(messages: try await store.feedMessages().map(Item.init)))
    }

    @Sendable func delete(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let text = try context.parameters.require("id")
        guard let id = ObjectID(text), try await store.deleteFeedMessage(id: id) else { throw HeraldError.notFound("feed message '\(text)'") }
        await serveCommittedChange(context)
        return Response(status: .noContent)
    }

    /// Reloads the snapshot so that this process serves a change by the time it answers. The
    /// change is committed whatever happens here: a failed read is logged and left to the next
    /// scheduled reload (within a minute), because an error answer would tell the client its
    /// message was not stored, and its retry would post it twice.
    private func serveCommittedChange(_ context: HeraldRequestContext) async {
        do {
            try await snapshot.reload(from: store)
        } catch {
            context.logger.error("the feed changed but reading it back failed; the next scheduled reload serves the change: \(error)")
        }
    }
}
