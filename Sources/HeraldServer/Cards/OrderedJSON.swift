import Foundation

/// A JSON object written with its members in the order they were added. Herald's encoder
/// sorts keys; a pull's `pool` must keep the order asked for (`hot` or `recent`).
struct OrderedJSON {
    private var members: [(key: String, value: Data)] = []
    private let encoder = JSONBody.encoder()

    mutating func add(_ key: String, _ value: some Encodable) throws {
        members.append((key, try encoder.encode(value)))
    }

    mutating func add(_ key: String, object: OrderedJSON) {
        members.append((key, object.data))
    }

    var data: Data {
        var out = Data("{".utf8)
        for (offset, member) in members.enumerated() {
            if offset > 0 { out.append(UInt8(ascii: ",")) }
            out.append((try? encoder.encode(member.key)) ?? Data("\"\"".utf8))
            out.append(UInt8(ascii: ":"))
            out.append(member.value)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
