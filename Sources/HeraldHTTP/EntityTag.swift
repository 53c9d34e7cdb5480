import Crypto
import Foundation
import HeraldCore
import Hummingbird

/// Entity tags (RFC 9110 §8.8.3) for answers a client may cache: the feed, content, pulls.
package enum EntityTag {
    /// A strong tag for a body: 16 bytes of its SHA-256, quoted.
    package static func of(_ body: Data) -> String {
        "\"" + Hex.lowercase(SHA256.hash(data: body).prefix(16)) + "\""
    }

    /// Whether `If-None-Match` names `tag` (quoted), weakly compared, or is `*`.
    /// Compared as bytes: this runs on every conditional poll, and Foundation's trimming went
    /// through NSString (8 % of a feed 304's CPU).
    package static func matches(_ request: Request, _ tag: String) -> Bool {
        guard let header = request.headers[.ifNoneMatch] else { return false }
        if header == tag { return true }
        return header.utf8.split(separator: UInt8(ascii: ",")).contains { item in
            var candidate = item.trimmingEnds { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            if candidate.elementsEqual("*".utf8) { return true }
            if candidate.starts(with: "W/".utf8) { candidate = candidate.dropFirst(2) }
            return candidate.elementsEqual(tag.utf8)
        }
    }

    /// A JSON answer with its tag, or 304 when the client has it.
    package static func response(_ body: Data, request: Request, cacheControl: String) -> Response {
        response(ByteBuffer(bytes: body), tag: of(body), request: request, cacheControl: cacheControl)
    }

    /// The same for a body whose tag is already known (a cached document).
    package static func response(_ body: ByteBuffer, tag: String, request: Request, cacheControl: String) -> Response {
        var headers: HTTPFields = [.eTag: tag, .cacheControl: cacheControl]
        if matches(request, tag) { return Response(status: .notModified, headers: headers) }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
    }
}
