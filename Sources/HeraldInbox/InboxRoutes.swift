import Foundation
import HeraldCore
public import HeraldHTTP
public import Hummingbird

/// `POST /api/inbox/mark` and `GET /api/inbox/counts` (docs/inbox.md), acting for one user.
public struct InboxRoutes: Sendable {
    public let store: any InboxStore
    /// Whether a type filter names a type this server knows.
    let knownType: @Sendable (String) -> Bool
    /// Told of every mark that changed something, with the installation that made it (a device
    /// token's `device_id`), so the user's other devices can be brought in step.
    let changed: @Sendable (_ userID: String, _ madeBy: String?) -> Void
    let clock: @Sendable () -> Date

    /// Ids one mark may list, as `POST /api/notifications/read` takes.
    public static let maxIDs = 1_000

    public init(
        store: any InboxStore, knownType: @escaping @Sendable (String) -> Bool,
        changed: @escaping @Sendable (_ userID: String, _ madeBy: String?) -> Void,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.knownType = knownType
        self.changed = changed
        self.clock = clock
    }

    public func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/inbox/mark", mark)
        table.add(router, .get, "/api/inbox/counts", counts)
    }

    struct MarkBody: Decodable {
        var ids: [String]?
        var all: Bool?
        var type: String?
        var before: String?
        var change: String?
        var until: String?

        enum Key: String, CodingKey, CaseIterable {
            case ids, all, type, before, change, until
        }

        static let fields = Set(Key.allCases.map(\.rawValue))

        /// A field given as `null` is refused (422 naming it), never read as absent: the
        /// document says each is a value or left out.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            for key in Key.allCases where container.contains(key) {
                if try container.decodeNil(forKey: key) { throw HeraldError.invalidField(key.rawValue, "must not be null; leave it out") }
            }
            ids = try container.decodeIfPresent([String].self, forKey: .ids)
            all = try container.decodeIfPresent(Bool.self, forKey: .all)
            type = try container.decodeIfPresent(String.self, forKey: .type)
            before = try container.decodeIfPresent(String.self, forKey: .before)
            change = try container.decodeIfPresent(String.self, forKey: .change)
            until = try container.decodeIfPresent(String.self, forKey: .until)
        }
    }

    @Sendable func mark(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let body = try await JSONBody.decode(MarkBody.self, from: request, context: context, knownFields: MarkBody.fields)
        let (selection, change) = try parse(body)
        let result = try await mark(userID: userID, selection, change, at: clock(), madeBy: context.deviceID)
        return JSONBody.response(bytes: result.counts.json)
    }

    /// A mark, and the notice to the user's other devices when it changed anything: what the
    /// route does, and what `POST /api/notifications/read` does with its ids.
    public func mark(
        userID: String, _ selection: InboxSelection, _ change: InboxChange, at now: Date, madeBy: String?
    ) async throws
        -> InboxMarkResult
    {
        let result = try await store.mark(userID: userID, selection, change, at: now)
        if result.changed > 0 { changed(userID, madeBy) }
        return result
    }

    /// The selection and change `body` asks for, or a 422 naming the field at fault.
    func parse(_ body: MarkBody) throws -> (InboxSelection, InboxChange) {
        guard let name = body.change else { throw HeraldError.missingField("change") }
        let change: InboxChange
        switch name {
        case "seen": change = .seen
        case "read": change = .read
        case "unread": change = .unread
        case "archived": change = .archived
        case "unarchived": change = .unarchived
        case "snooze":
            guard let text = body.until else { throw HeraldError.missingField("until") }
            // An instant already past ends the snooze at the next pass (within a second).
            guard let until = Timestamp.parse(text) else { throw HeraldError.invalidField("until", "must be an RFC 3339 date-time") }
            change = .snooze(until: until)
        default:
            throw HeraldError.invalidField("change", "must be one of \(InboxChange.names.joined(separator: ", "))")
        }
        if body.until != nil, name != "snooze" { throw HeraldError.invalidField("until", "is only for \"change\": \"snooze\"") }
        switch (body.ids, body.all) {
        case (.some, .some):
            throw HeraldError.invalidField("all", "give 'ids' or 'all', not both")
        case (.none, .none):
            throw HeraldError.missingField("ids")
        case (.some(let texts), .none):
            if body.type != nil { throw HeraldError.invalidField("type", "narrows 'all' only; with 'ids' the ids say which items") }
            if body.before != nil { throw HeraldError.invalidField("before", "narrows 'all' only; with 'ids' the ids say which items") }
            guard !texts.isEmpty else { throw HeraldError.invalidField("ids", "must have at least one entry") }
            return (.ids(try Self.notificationIDs(texts)), change)
        case (.none, .some(let all)):
            guard all else { throw HeraldError.invalidField("all", "must be true (to mark some items, list their 'ids')") }
            if let type = body.type, !knownType(type) { throw HeraldError.invalidField("type", "is not a notification type this server knows") }
            var before: Date?
            if let text = body.before {
                guard let date = Timestamp.parse(text) else { throw HeraldError.invalidField("before", "must be an RFC 3339 date-time") }
                before = date
            }
            return (.all(type: body.type, before: before), change)
        }
    }

    /// `ids` as notification ids, at most ``maxIDs``, or a 422 naming the entry at fault: a
    /// mark's, and `POST /api/notifications/read`'s.
    public static func notificationIDs(_ texts: [String]) throws -> [ObjectID] {
        guard texts.count <= maxIDs else { throw HeraldError.invalidField("ids", "must have at most \(maxIDs) entries") }
        return try texts.enumerated().map { index, text in
            guard let id = ObjectID(text) else { throw HeraldError.invalidField("ids[\(index)]", "must be a 24-character lowercase hex notification id") }
            return id
        }
    }

    /// The history read's `state` and `type` filters (`GET /api/notifications/history`), or a
    /// 400 naming the parameter; empty is the same as none.
    public func historyFilter(_ request: Request) throws -> (state: InboxState?, type: String?) {
        let state = try request.nonEmptyQueryText("state").map { text in
            guard let state = InboxState(rawValue: text) else {
                throw Request.invalidQuery("state", "must be one of \(InboxState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return state
        }
        let type = try request.nonEmptyQueryText("type")
        if let type, !knownType(type) { throw Request.invalidQuery("type", "is not a notification type this server knows") }
        return (state, type)
    }

    @Sendable func counts(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        return JSONBody.response(bytes: try await store.counts(userID: userID).json)
    }
}
