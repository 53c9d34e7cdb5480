import Foundation

/// A JSON object written with its members in the order they were added. Herald's encoder
/// sorts keys; a pull's `pool` must keep the order asked for (`hot` or `recent`).
struct OrderedJSON {
    private var out = Data("{".utf8)
    private var empty = true
    private let encoder = JSONBody.encoder()

    mutating func add(_ key: String, _ value: some Encodable) throws {
        add(key, json: try encoder.encode(value))
    }

    mutating func add(_ key: String, object: OrderedJSON) {
        add(key, json: object.data)
    }

    /// A member whose value is already JSON text.
    mutating func add(_ key: String, json value: Data) {
        out.append(empty ? UInt8(ascii: "\"") : UInt8(ascii: ","))
        if !empty { out.append(UInt8(ascii: "\"")) }
        empty = false
        // Card ids and Herald's own keys need no escaping; anything else goes through the encoder.
        if key.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            out.append(contentsOf: key.utf8)
            out.append(UInt8(ascii: "\""))
        } else {
            out.removeLast()
            out.append((try? encoder.encode(key)) ?? Data("\"\"".utf8))
        }
        out.append(UInt8(ascii: ":"))
        out.append(value)
    }

    var data: Data {
        var closed = out
        closed.append(UInt8(ascii: "}"))
        return closed
    }
}
