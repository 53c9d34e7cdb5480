public import HeraldCore

/// Who may see a content item: everyone, or any of the listed tiers, groups and attendees (OR-ed).
public struct ContentVisibility: Sendable, Equatable {
    public var all: Bool
    public var tierIDs: Set<String>
    public var groupIDs: Set<String>
    public var attendeeIDs: Set<String>

    /// Visible to nobody: no rule admits anyone. Stored as sent, with a warning to its author.
    public var admitsNobody: Bool { !all && tierIDs.isEmpty && groupIDs.isEmpty && attendeeIDs.isEmpty }

    /// Whether a user with these attributes sees the item. Attendee ids are user ids.
    public func admits(userID: String, attributes: UserAttributes?) -> Bool {
        if all { return true }
        if attendeeIDs.contains(userID) { return true }
        if let tier = attributes?.tierID, tierIDs.contains(tier) { return true }
        if let groups = attributes?.groupIDs, !groupIDs.isDisjoint(with: groups) { return true }
        return false
    }
}

/// One item of personalised content (docs/content.md): `type`, `order`, `visibility`, and any other
/// fields (`title`, a survey's `surveyId`, ...), which are returned as they were sent. The CMS's
/// camelCase visibility (`tierIds`, `groupIds`, `attendeeIds`) is read like Herald's own.
public struct ContentItem: Sendable, Equatable, Codable {
    public static let maxItems = 1_000

    public private(set) var fields: [String: JSONValue]
    public let order: Int64
    public let visibility: ContentVisibility

    public init(from decoder: any Decoder) throws {
        let fields = try decoder.singleValueContainer().decode([String: JSONValue].self)
        try self.init(fields: fields, path: "item")
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fields)
    }

    /// Validates one item; `path` names it in errors (`items[3]`).
    public init(fields: [String: JSONValue], path: String) throws {
        guard case .string(let type)? = fields["type"], !type.isEmpty else { throw HeraldError.invalidField("\(path).type", "is required: a non-empty string") }
        if let title = fields["title"], case .string = title {
        } else if fields["title"] != nil {
            throw HeraldError.invalidField("\(path).title", "must be a string")
        }
        switch fields["order"] {
        case .integer(let value)?: order = value
        case nil: order = 0
        default: throw HeraldError.invalidField("\(path).order", "must be an integer")
        }
        switch fields["visibility"] {
        case .object(let raw)?: visibility = try Self.visibility(raw, path: "\(path).visibility")
        case nil: visibility = ContentVisibility(all: false, tierIDs: [], groupIDs: [], attendeeIDs: [])
        default: throw HeraldError.invalidField("\(path).visibility", "must be an object: {\"all\":true} or any of tier_ids, group_ids, attendee_ids")
        }
        self.fields = fields
    }

    /// The item as a user receives it: every field but `visibility`.
    public var publicFields: [String: JSONValue] {
        var copy = fields
        copy.removeValue(forKey: "visibility")
        return copy
    }

    static func visibility(_ raw: [String: JSONValue], path: String) throws -> ContentVisibility {
        var visibility = ContentVisibility(all: false, tierIDs: [], groupIDs: [], attendeeIDs: [])
        // In key order, so a request with two bad fields is always told about the same one.
        for (key, value) in raw.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "all":
                guard case .bool(let flag) = value else { throw HeraldError.invalidField("\(path).all", "must be true or false") }
                visibility.all = flag
            case "tier_ids", "group_ids", "attendee_ids", "tierIds", "groupIds", "attendeeIds":
                guard case .array(let entries) = value else { throw HeraldError.invalidField("\(path).\(key)", "must be an array of ids") }
                // Ids are strings; numbers are accepted and compared as their decimal text (docs/content.md).
                let ids = try entries.enumerated().map { index, entry -> String in
                    switch entry {
                    case .string(let text) where !text.isEmpty: return text
                    case .integer(let number): return String(number)
                    default: throw HeraldError.invalidField("\(path).\(key)[\(index)]", "must be a string or an integer")
                    }
                }
                switch key {
                case "tier_ids", "tierIds": visibility.tierIDs.formUnion(ids)
                case "group_ids", "groupIds": visibility.groupIDs.formUnion(ids)
                default: visibility.attendeeIDs.formUnion(ids)
                }
            default:
                throw HeraldError.invalidField("\(path).\(key)", "is not a visibility rule (use all, tier_ids, group_ids, attendee_ids)")
            }
        }
        return visibility
    }
}

/// A set of content items and when it was published (ms since the epoch).
public struct ContentSet: Sendable, Equatable {
    public var items: [ContentItem]
    public var lastPublishedAt: Int64?

    public init(items: [ContentItem], lastPublishedAt: Int64?) {
        self.items = items
        self.lastPublishedAt = lastPublishedAt
    }

    /// The items one user may see, ordered by `order`.
    public func visible(to userID: String, attributes: UserAttributes?) -> [ContentItem] {
        items.enumerated()
            .filter { $0.element.visibility.admits(userID: userID, attributes: attributes) }
            .sorted { $0.element.order != $1.element.order ? $0.element.order < $1.element.order : $0.offset < $1.offset }
            .map(\.element)
    }
}
