import Foundation
import HeraldCore
import Hummingbird

/// Personalised content (SPEC §7): an admin drafts, publishes and reverts; each user reads only
/// the items visible to them.
struct ContentRoutes {
    let store: any (ContentStore & UserStore)

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .put, "/api/content/pending", putPending)
        table.add(router, .get, "/api/content/pending", getPending)
        table.add(router, .post, "/api/content/publish", publish)
        table.add(router, .post, "/api/content/revert", revert)
        table.add(router, .get, "/api/content", content)
    }

    struct SetBody: Encodable {
        var items: [ContentItem]
        var last_published_at: Nullable<Int64>

        init(_ set: ContentSet) {
            items = set.items
            last_published_at = Nullable(set.lastPublishedAt)
        }
    }

    @Sendable func putPending(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        struct Body: Decodable { var items: [JSONValue]? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["items"])
        guard let raw = body.items else { throw HeraldError.missingField("items") }
        guard raw.count <= ContentItem.maxItems else { throw HeraldError.invalidField("items", "must have at most \(ContentItem.maxItems) entries") }
        let items = try raw.enumerated().map { index, value in
            guard case .object(let fields) = value else { throw HeraldError.invalidField("items[\(index)]", "must be an object") }
            return try ContentItem(fields: fields, path: "items[\(index)]")
        }
        try await store.setPendingContent(items)
        return try JSONBody.response(SetBody(try await store.pendingContent()))
    }

    @Sendable func getPending(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        return try JSONBody.response(SetBody(try await store.pendingContent()))
    }

    @Sendable func publish(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        return try JSONBody.response(SetBody(try await store.publishContent(at: Int64(saturating: Date().timeIntervalSince1970 * 1000))))
    }

    @Sendable func revert(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        return try JSONBody.response(SetBody(try await store.revertContent()))
    }

    @Sendable func content(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let set = try await store.publishedContent()
        let attributes = try await store.attributes(userID: userID)
        struct Body: Encodable {
            var content: [[String: JSONValue]]
            var last_published_at: Nullable<Int64>
        }
        // Tagged by what this user gets: 304 while their visible items stay the same.
        let body = try JSONBody.encoder().encode(
            Body(content: set.visible(to: userID, attributes: attributes).map(\.publicFields), last_published_at: Nullable(set.lastPublishedAt))
        )
        return EntityTag.response(body, request: request, cacheControl: "private, no-cache")
    }
}
