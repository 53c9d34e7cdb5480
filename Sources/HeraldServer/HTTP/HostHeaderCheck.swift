import NIOCore
import NIOHTTP1

/// Refuses a request without exactly one valid `Host` header as RFC 9112 §3.2 requires: 400 for
/// an HTTP/1.1 request without one, and for any request with two or with a value that is not a
/// host (and port). It is refused as the parser's own faults are, with ``MalformedRequestAnswer``'s
/// JSON body (`invalid_host`) once the responses to requests before it are written, and the
/// connection closes: a request whose host cannot be told is not one to keep reading behind.
/// Such requests were served, with the first of two `Host` values taken as the authority.
final class HostHeaderCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// Set once a request is refused: nothing after it on the connection is read.
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        if case .head(let head) = unwrapInboundIn(data), !Self.hasValidHost(head) {
            refused = true
            context.fireErrorCaught(HTTPParserError.invalidHost)
            return
        }
        context.fireChannelRead(data)
    }

    /// One `Host` with a valid value; HTTP/1.0 requests may have none.
    static func hasValidHost(_ head: HTTPRequestHead) -> Bool {
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
    static func isHost(_ value: String.UTF8View) -> Bool {
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
    static func isRegularNameByte(_ byte: UInt8) -> Bool {
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
