import Foundation

/// Any JSON value, kept as it was sent: content items carry free fields Herald does not interpret.
public enum JSONValue: Sendable, Hashable, Codable {
    /// A string.
    case string(String)
    /// A number with a fraction or exponent.
    case number(Double)
    /// A whole number that fits 64 bits.
    case integer(Int64)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue {
    /// The value as JSON with sorted keys and no insignificant whitespace, so equal values give
    /// equal text (used to identify object addresses and to compare requests).
    public var canonicalText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The members of an object value; nil for any other value.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { members } else { nil }
    }

    /// The text of a string value; nil for any other value.
    public var stringValue: String? {
        if case .string(let text) = self { text } else { nil }
    }
}
