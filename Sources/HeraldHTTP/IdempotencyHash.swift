import Crypto
import Foundation
import HeraldCore

/// "The same request" for an idempotency key: the same parsed JSON, whatever its spacing, key
/// order or number spelling, and whether the key came in the body or the header.
package enum IdempotencyHash {
    /// SHA-256 (hex) of the body's canonical form, without its `idempotency_key` field.
    package static func of(_ body: Data) throws -> String {
        guard case .object(var members) = try JSONDecoder().decode(JSONValue.self, from: body) else {
            throw HeraldError(.badRequest, code: "invalid_json", "the body must be a JSON object")
        }
        members["idempotency_key"] = nil
        let canonical = JSONValue.object(members).normalizedNumbers.canonicalText
        return SHA256.hash(data: Data(canonical.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}

extension JSONValue {
    /// Integral floating-point numbers as integers, so `2` and `2.0` are the same request.
    package var normalizedNumbers: JSONValue {
        switch self {
        case .number(let value) where value.rounded() == value && abs(value) < 9.0e15: .integer(Int64(value))
        case .array(let items): .array(items.map(\.normalizedNumbers))
        case .object(let members): .object(members.mapValues(\.normalizedNumbers))
        default: self
        }
    }
}
