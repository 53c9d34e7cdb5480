/// The set of notification types a server accepts: the built-in well-known types plus the
/// operator's `types.extra`.
public struct NotificationTypes: Sendable, Equatable {
    /// The well-known types every server accepts (docs/routing.md).
    public static let builtIn = ["upvote", "comment", "hot", "top", "leader", "message", "reply", "violation", "generic", "alert", "like"]

    /// Every accepted type, built-ins first, in a stable order for error messages.
    public let all: [String]
    private let lookup: Set<String>

    /// - Throws: ``HeraldError`` when an extra type is not a lowercase identifier.
    public init(extra: [String] = []) throws {
        var all = Self.builtIn
        for name in extra where !all.contains(name) {
            guard Self.isValidName(name) else {
                throw HeraldError(.unprocessable, code: "invalid_config", "types.extra: '\(name)' must be 1-64 characters of a-z, 0-9, '_' or '-'")
            }
            all.append(name)
        }
        self.all = all
        self.lookup = Set(all)
    }

    /// Whether `type` is accepted.
    public func contains(_ type: String) -> Bool { lookup.contains(type) }

    /// Throws the 400 that lists the valid types when `type` is unknown.
    public func validate(_ type: String, field: String = "type") throws {
        guard contains(type) else {
            throw HeraldError(.badRequest, code: "unknown_type", "'\(field)': unknown type '\(type)'; valid types: \(all.joined(separator: ", "))")
        }
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45 }
    }
}
