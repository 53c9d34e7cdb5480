import Foundation
import HeraldCore

/// JSON columns: settings, attributes, data maps and targets are stored as JSON text.
package enum StoredJSON {
    package static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    package static func decode<T: Decodable>(_ type: T.Type, from text: String?) throws -> T? {
        guard let text else { return nil }
        // Most notifications carry no data map: skip the decoder for it.
        if text == "{}", let empty = [String: String]() as? T { return empty }
        return try JSONDecoder().decode(T.self, from: Data(text.utf8))
    }

    /// A notification's data map, keys sorted. Written once per accepted notification, so by
    /// ``JSONWriter`` rather than `JSONEncoder` (2.7 % of the CPU under accepts).
    package static func encode(data: [String: String]) -> String {
        guard !data.isEmpty else { return "{}" }
        var writer = JSONWriter()
        writer.stringMap(data)
        return writer.text
    }

    /// The target as stored: `{"user_ids":[…]}`, `{"topic":"…"}`, `{"audience":{…}}` or `{"broadcast":true}`.
    /// The two written per accept go through ``JSONWriter``; the rarer shapes through `JSONEncoder`.
    package static func encode(target: NotificationTarget) throws -> String {
        var writer = JSONWriter()
        switch target {
        case .users(let ids):
            writer.object {
                $0.key("user_ids")
                $0.stringArray(ids)
            }
        case .topic(let key):
            writer.object { $0.member("topic", key) }
        case .audience(let audience): return try encode(["audience": audience])
        case .broadcast(let options): return try encode(["broadcast": options])
        }
        return writer.text
    }

    package static func decodeTarget(_ text: String) throws -> NotificationTarget {
        if let ids = plainUserIDs(text) { return .users(ids) }
        struct Stored: Decodable {
            var user_ids: [String]?
            var topic: String?
            var audience: Audience?
            var broadcast: BroadcastOptions?
        }
        let stored = try JSONDecoder().decode(Stored.self, from: Data(text.utf8))
        if let ids = stored.user_ids { return .users(ids) }
        if let topic = stored.topic { return .topic(topic) }
        if let audience = stored.audience { return .audience(audience) }
        return .broadcast(stored.broadcast ?? BroadcastOptions())
    }

    /// The user ids of `{"user_ids":["…",…]}` when no id needs an escape, read without
    /// `JSONDecoder` (every claimed notification's target is read, and most are this shape);
    /// nil for any other text, which the decoder then reads.
    package static func plainUserIDs(_ text: String) -> [String]? {
        let prefix = #"{"user_ids":["#
        guard text.hasPrefix(prefix), text.hasSuffix("]}") else { return nil }
        let list = text.utf8.dropFirst(prefix.utf8.count).dropLast(2)
        guard !list.isEmpty else { return [] }
        let quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        var ids: [String] = []
        // An id holding a comma splits into parts that do not both start and end with a quote,
        // and a quote inside an id is escaped: either way the decoder reads it instead.
        for part in list.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            guard part.count >= 2, part.first == quote, part.last == quote else { return nil }
            let id = part.dropFirst().dropLast()
            guard !id.contains(quote), !id.contains(backslash) else { return nil }
            ids.append(String(decoding: id, as: UTF8.self))
        }
        return ids
    }
}
