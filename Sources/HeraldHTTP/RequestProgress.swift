import NIOHTTPTypes

/// Where a connection's requests stand, as a handler after Hummingbird's codec sees them: how
/// many have been read (their heads) and not yet answered in full, and whether the latest one's
/// body is still coming. With pipelining a request's head is read before the response ahead of
/// it ends, so "the current request" is not enough.
package struct RequestProgress {
    /// Requests whose head has been read and whose response has not ended.
    private(set) var unanswered = 0
    /// Whether the body of the latest request read is still coming.
    private(set) var bodyComing = false

    package mutating func read(_ part: HTTPRequestPart) {
        switch part {
        case .head:
            unanswered += 1
            bodyComing = true
        case .end:
            bodyComing = false
        case .body:
            break
        }
    }

    /// A response ended. One written with no request read (the answer to a head the parser
    /// refused) answers none.
    package mutating func responseEnded() {
        unanswered = max(0, unanswered - 1)
    }
}
