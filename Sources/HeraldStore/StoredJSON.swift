import Foundation
import HeraldCore

/// JSON columns: settings, attributes, data maps and targets are stored as JSON text.
enum StoredJSON {
    static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, from text: String?) throws -> T? {
        guard let text else { return nil }
        // Most notifications carry no data map: skip the decoder for it.
        if text == "{}", let empty = [String: String]() as? T { return empty }
        return try JSONDecoder().decode(T.self, from: Data(text.utf8))
    }

    /// The target as stored: `{"user_ids":[…]}`, `{"topic":"…"}`, `{"audience":{…}}` or `{"broadcast":true}`.
    static func encode(target: NotificationTarget) throws -> String {
        switch target {
        case .users(let ids): try encode(["user_ids": ids])
        case .topic(let key): try encode(["topic": key])
        case .audience(let audience): try encode(["audience": audience])
        case .broadcast(let options): try encode(["broadcast": options])
        }
    }

    static func decodeTarget(_ text: String) throws -> NotificationTarget {
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
}
