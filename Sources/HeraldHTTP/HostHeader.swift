import NIOHTTP1

/// The `Host` header rules of RFC 9112 §3.2: exactly one, with a valid value; HTTP/1.0 requests
/// may have none.
package enum HostHeader {
    package static func isValid(in head: HTTPRequestHead) -> Bool {
        var count = 0
        var value = ""
        for (name, fieldValue) in head.headers where name.utf8.count == 4 && name.lowercased() == "host" {
            count += 1
            value = fieldValue
        }
        switch count {
        case 0: return head.version.major == 1 && head.version.minor == 0
        case 1: return isHost(value.utf8)
        default: return false
        }
    }

    /// `uri-host [ ":" port ]` (RFC 3986 §3.2.2–3), or empty (a target without an authority).
    package static func isHost(_ value: String.UTF8View) -> Bool {
        var bytes = value[...]
        if bytes.first == UInt8(ascii: "[") {
            // An IP literal: `[` address `]`.
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = bytes[bytes.index(after: bytes.startIndex)..<close]
            guard !literal.isEmpty, literal.allSatisfy({ isRegularNameByte($0) || $0 == UInt8(ascii: ":") }) else { return false }
            bytes = bytes[bytes.index(after: close)...]
        } else {
            let end = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.endIndex
            guard bytes[..<end].allSatisfy(isRegularNameByte) else { return false }
            bytes = bytes[end...]
        }
        guard let colon = bytes.first else { return true }
        return colon == UInt8(ascii: ":") && bytes.dropFirst().allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// Unreserved, sub-delims, and `%` of pct-encoded (RFC 3986 `reg-name`).
    package static func isRegularNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default: false
        }
    }
}
