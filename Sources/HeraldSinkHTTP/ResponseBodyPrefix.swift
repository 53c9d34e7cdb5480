public import AsyncHTTPClient
public import NIOCore

extension HTTPClientResponse.Body {
    /// The first `limit` bytes of the answer; the rest is read and dropped.
    ///
    /// `collect(upTo:)` throws when an answer is larger, which would turn a request the other
    /// side received and answered (a webhook receiver's 200 with a page of HTML) into "no
    /// answer", and so into a retry and a duplicate. A sink judges by the status and at most a
    /// short error body. Reading stops after `drainLimit` bytes: the connection is then closed
    /// rather than read to the end.
    public func prefix(upTo limit: Int, drainLimit: Int = 1 << 20) async throws -> ByteBuffer {
        var kept = ByteBuffer()
        var seen = 0
        for try await chunk in self {
            seen += chunk.readableBytes
            let room = limit - kept.readableBytes
            if room > 0 {
                kept.writeImmutableBuffer(chunk.getSlice(at: chunk.readerIndex, length: Swift.min(room, chunk.readableBytes)) ?? ByteBuffer())
            }
            if seen > drainLimit { break }
        }
        return kept
    }
}
