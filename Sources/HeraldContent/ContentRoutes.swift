import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// Personalised content (docs/content.md): an admin drafts, publishes and reverts; each user reads only
/// the items visible to them.
public struct ContentRoutes: Sendable {
    let store: any ContentStore
    /// Whose attributes decide what each user sees.
    let users: any UserStore

    public init(content: any ContentStore, users: any UserStore) {
        self.store = content
        self.users = users
    }

    public func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
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

    /// Herald's `{"items": [...]}`, or the CMS's own document: `{"pendingContent": {"0": {...},
    /// "1": {...}}, "lastPublishedAt": "..."}` (an array works too). An uploaded
    /// `lastPublishedAt` is ignored: publishing stamps it. Items visible to nobody are stored
    /// and named in `warnings`.
    @Sendable func putPending(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        struct Body: Decodable {
            var items: JSONValue?
            var pendingContent: JSONValue?
            var lastPublishedAt: JSONValue?
            var last_published_at: JSONValue?
        }
        let body = try await JSONBody.decode(
            Body.self, from: request, context: context, knownFields: ["items", "pendingContent", "lastPublishedAt", "last_published_at"]
        )
        if body.items != nil && body.pendingContent != nil {
            throw HeraldError(.unprocessable, code: "ambiguous_field", "give 'items' or 'pendingContent', not both")
        }
        let field = body.items != nil ? "items" : "pendingContent"
        guard let document = body.items ?? body.pendingContent else { throw HeraldError.missingField("items") }
        let entries = try Self.entries(document, field: field)
        guard entries.count <= ContentItem.maxItems else { throw HeraldError.invalidField(field, "must have at most \(ContentItem.maxItems) entries") }
        var warnings: [Warning] = []
        let items = try entries.map { key, value in
            let path = field == "items" && Int(key) != nil ? "items[\(key)]" : "\(field).\(key)"
            guard case .object(let fields) = value else { throw HeraldError.invalidField(path, "must be an object") }
            let item = try ContentItem(fields: fields, path: path)
            if item.visibility.admitsNobody {
                warnings.append(Warning(item: key, message: "'\(path).visibility' admits nobody: the item is stored and shown to no one"))
            }
            return item
        }
        try await store.setPendingContent(items)
        struct Answer: Encodable {
            var items: [ContentItem]
            var last_published_at: Nullable<Int64>
            var warnings: [Warning]?
        }
        let stored = try await store.pendingContent()
        return try JSONBody.response(
            Answer(items: stored.items, last_published_at: Nullable(stored.lastPublishedAt), warnings: warnings.isEmpty ? nil : warnings))
    }

    struct Warning: Encodable {
        var item: String
        var message: String
    }

    /// The items of an array, or of an object keyed `"0"`, `"1"`, ... (in index order), with their keys.
    static func entries(_ document: JSONValue, field: String) throws -> [(key: String, value: JSONValue)] {
        switch document {
        case .array(let values):
            return values.enumerated().map { (String($0.offset), $0.element) }
        case .object(let members):
            // In key order, so a document with two bad keys is always told about the same one.
            return try members.sorted(by: { $0.key < $1.key }).map { key, value in
                guard let index = Int(key), index >= 0, String(index) == key else {
                    throw HeraldError.invalidField("\(field).\(key)", "is not an index: keys are \"0\", \"1\", ...")
                }
                return (index, key, value)
            }
            .sorted { $0.0 < $1.0 }
            .map { ($0.1, $0.2) }
        default:
            throw HeraldError.invalidField(field, "must be an array of items, or an object keyed \"0\", \"1\", ...")
        }
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
        let body = try await document(for: userID, format: try request.queryText("format"))
        // Tagged by what this user gets: 304 while their visible items stay the same.
        return EntityTag.response(body, request: request, cacheControl: "private, no-cache")
    }

    /// The published items `userID` may see, in Herald's shape or (`format=doubledutch`) the
    /// CMS's; its tag is the version live streams announce.
    public func document(for userID: String, format: String?) async throws -> Data {
        let set = try await store.publishedContent()
        let attributes = try await users.attributes(userID: userID)
        let visible = set.visible(to: userID, attributes: attributes).map(\.publicFields)
        switch format {
        case nil, "", "herald"?:
            struct Body: Encodable {
                var content: [[String: JSONValue]]
                var last_published_at: Nullable<Int64>
            }
            return try JSONBody.encoder().encode(Body(content: visible, last_published_at: Nullable(set.lastPublishedAt)))
        case "doubledutch"?:
            // The CMS's shape: items keyed by index, camelCase.
            struct Body: Encodable {
                var content: [String: [String: JSONValue]]
                var lastPublishedAt: Nullable<Int64>
            }
            let keyed = Dictionary(uniqueKeysWithValues: visible.enumerated().map { (String($0.offset), $0.element) })
            return try JSONBody.encoder().encode(Body(content: keyed, lastPublishedAt: Nullable(set.lastPublishedAt)))
        default:
            throw HeraldError.invalidField("format", "must be 'herald' or 'doubledutch'")
        }
    }
}
