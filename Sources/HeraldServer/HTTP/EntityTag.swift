import Crypto
import Foundation
import HeraldCore
import Hummingbird

/// Entity tags (RFC 9110 §8.8.3) for answers a client may cache: the feed, content, pulls.
enum EntityTag {
    /// A strong tag for a body: 16 bytes of its SHA-256, quoted.
    static func of(_ body: Data) -> String {
        "\"" + Hex.lowercase(SHA256.hash(data: body).prefix(16)) + "\""
    }

    /// Whether `If-None-Match` names `tag` (quoted), weakly compared, or is `*`.
    static func matches(_ request: Request, _ tag: String) -> Bool {
        guard let header = request.headers[.ifNoneMatch] else { return false }
        return header.split(separator: ",").contains { candidate in
            var text = candidate.trimmingCharacters(in: .whitespaces)
            if text == "*" { return true }
            if text.hasPrefix("W/") { text.removeFirst(2) }
            return text == tag
        }
    }

    /// A JSON answer with its tag, or 304 when the client has it.
    static func response(_ body: Data, request: Request, cacheControl: String) -> Response {
        response(ByteBuffer(bytes: body), tag: of(body), request: request, cacheControl: cacheControl)
    }

    /// The same for a body whose tag is already known (a cached document).
    static func response(_ body: ByteBuffer, tag: String, request: Request, cacheControl: String) -> Response {
        var headers: HTTPFields = [.eTag: tag, .cacheControl: cacheControl]
        if matches(request, tag) { return Response(status: .notModified, headers: headers) }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
    }
}
