import Hummingbird

/// A request body's length as its head announces it (`Content-Length`), checked against a
/// route's limit before any of the body is read.
///
/// Without it a route found a body too large only once it had read past the limit: a client
/// that announced 50 MB and sent it slowly, or sent part of it and waited, was answered 408
/// when its body deadline ran out (20 s and more) instead of 413 at once.
package enum AnnouncedLength {
    /// Whether the head announces more than `limit` bytes. A chunked body announces nothing;
    /// NIO's parser has refused a `Content-Length` that is not one valid number.
    package static func exceeds(_ request: Request, _ limit: Int) -> Bool {
        guard let value = request.headers[.contentLength], let length = Int(value) else { return false }
        return length > limit
    }
}
