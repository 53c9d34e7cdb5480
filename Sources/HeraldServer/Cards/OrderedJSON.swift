import Foundation

/// A JSON object written with its members in the order they were added. Herald's encoder
/// sorts keys; a pull's `pool` must keep the order asked for (`hot` or `recent`).
///
/// Written into a byte array: a pull of 1 000 cards adds 2 000 members, and appending to
/// `Data` copied them a byte at a time (a sixth of the pull's CPU).
struct OrderedJSON {
    private var out: [UInt8] = [UInt8(ascii: "{")]
    private var empty = true
    private let encoder = JSONBody.encoder()

    mutating func add(_ key: String, _ value: some Encodable) throws {
        add(key, json: try encoder.encode(value))
    }

    mutating func add(_ key: String, object: OrderedJSON) {
        addKey(key)
        out.append(contentsOf: object.out)
        out.append(UInt8(ascii: "}"))
    }

    /// A member whose value is already JSON text.
    mutating func add(_ key: String, json value: some Collection<UInt8>) {
        addKey(key)
        out.append(contentsOf: value)
    }

    /// A member whose value is already JSON text.
    mutating func add(_ key: String, jsonText value: String) {
        addKey(key)
        var text = value
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    private mutating func addKey(_ key: String) {
        if !empty { out.append(UInt8(ascii: ",")) }
        empty = false
        // Card ids and Herald's own keys need no escaping; anything else goes through the encoder.
        var name = key
        let plain = name.withUTF8 { bytes in
            guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else { return false }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return true
        }
        if !plain { out.append(contentsOf: (try? encoder.encode(key)) ?? Data("\"\"".utf8)) }
        out.append(UInt8(ascii: ":"))
    }

    /// The object's text.
    var bytes: [UInt8] { out + [UInt8(ascii: "}")] }
}
