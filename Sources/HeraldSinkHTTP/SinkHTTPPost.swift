public import AsyncHTTPClient
public import NIOCore
public import NIOHTTP1
import Synchronization

/// What the other side answered a sink's POST: its status and headers, and the first bytes of
/// its body.
public struct SinkHTTPAnswer: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    /// At most the `keep` bytes asked for; the rest was read and dropped.
    public var body: ByteBuffer
}

extension HTTPClient {
    /// POSTs `body` to `url` and reads the answer, keeping the first `keep` bytes of its body.
    ///
    /// Through the delegate API the answer is read on the connection's event loop and the
    /// caller resumes once. `execute(_:timeout:)` resumes it for the head and again for the
    /// body's async sequence, each a hop between NIO's loop and Swift's pool. Accepts with a
    /// push each to an nginx stand-in, 25 interleaved `wrk` pairs (2026-11-27): Herald's CPU per
    /// accept and push lower in 17, by about 2 % (docs/performance.md).
    ///
    /// The head is the answer. A sink judges by the status and at most a short error body, so
    /// a long body, or a connection that breaks or times out after the head, never turns an
    /// answer into "no answer" (a webhook receiver's 200 with a page of HTML would become a
    /// retry, and a duplicate). Past `drainLimit` bytes the connection is closed rather than
    /// read to the end. With `keep` 0 the call returns at the head, and the body is read (and
    /// dropped) after it: a server that sends its head at once and its body a byte at a time
    /// (anyone may name one as a Web Push endpoint) would otherwise hold each send for the
    /// whole timeout while looking like one that answers.
    /// - Parameter timeout: for the whole exchange, connecting included.
    /// - Throws: `HTTPClientError` (or the connection's error) when no head came.
    public func post(
        _ url: String, headers: HTTPHeaders, body: ByteBuffer, keep: Int, timeout: Duration, drainLimit: Int = 1 << 20
    ) async throws -> SinkHTTPAnswer {
        let request = try HTTPClient.Request(url: url, method: .POST, headers: headers, body: .byteBuffer(body))
        let reader = AnswerReader(keep: keep, drainLimit: drainLimit)
        if keep <= 0 {
            return try await withCheckedThrowingContinuation { continuation in
                reader.onHead(continuation)
                execute(request: request, delegate: reader, deadline: .now() + TimeAmount(timeout)).futureResult.whenComplete { result in
                    reader.finished(result)
                }
            }
        }
        do {
            return try await execute(request: request, delegate: reader, deadline: .now() + TimeAmount(timeout)).futureResult.get()
        } catch {
            guard let answer = reader.answer else { throw error }
            return answer
        }
    }
}

/// Reads an answer into a ``SinkHTTPAnswer``, as ``HTTPClient/post(_:headers:body:keep:timeout:drainLimit:)``
/// describes. AsyncHTTPClient calls it on one event loop, one call at a time; the lock is for
/// the compiler and for the caller's last look after a failure, never contended.
private final class AnswerReader: HTTPClientResponseDelegate {
    typealias Response = SinkHTTPAnswer

    private struct State {
        var answer: SinkHTTPAnswer?
        var seen = 0
        /// The caller waiting for the head, when it wants no body.
        var waiting: CheckedContinuation<SinkHTTPAnswer, any Error>?
    }

    /// Stops reading a body past the drain limit.
    private struct DrainLimitReached: Error {}

    private let keep: Int
    private let drainLimit: Int
    private let state = Mutex(State())

    init(keep: Int, drainLimit: Int) {
        self.keep = max(0, keep)
        self.drainLimit = max(0, drainLimit)
    }

    /// The answer once its head has come.
    var answer: SinkHTTPAnswer? { state.withLock { $0.answer } }

    /// Resumes `continuation` with the head as soon as it comes, or with how the exchange ended
    /// without one.
    func onHead(_ continuation: CheckedContinuation<SinkHTTPAnswer, any Error>) {
        let answer = state.withLock { state -> SinkHTTPAnswer? in
            if state.answer == nil { state.waiting = continuation }
            return state.answer
        }
        if let answer { continuation.resume(returning: answer) }
    }

    /// The exchange is over: a caller still waiting for the head gets the answer, or the error.
    func finished(_ result: Result<SinkHTTPAnswer, any Error>) {
        let (waiting, answer) = state.withLock { state in (state.waiting.take(), state.answer) }
        guard let waiting else { return }
        if let answer { waiting.resume(returning: answer) } else { waiting.resume(with: result) }
    }

    func didReceiveHead(task: HTTPClient.Task<SinkHTTPAnswer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let answer = SinkHTTPAnswer(status: Int(head.status.code), headers: head.headers, body: ByteBuffer())
        let waiting = state.withLock { state in
            state.answer = answer
            return state.waiting.take()
        }
        waiting?.resume(returning: answer)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<SinkHTTPAnswer>, _ part: ByteBuffer) -> EventLoopFuture<Void> {
        let drained = state.withLock { state -> Bool in
            state.seen += min(part.readableBytes, Int.max - state.seen)
            if var answer = state.answer, keep > answer.body.readableBytes,
                let slice = part.getSlice(at: part.readerIndex, length: min(keep - answer.body.readableBytes, part.readableBytes))
            {
                state.answer = nil // so that the append below does not copy the bytes kept so far
                answer.body.writeImmutableBuffer(slice)
                state.answer = answer
            }
            return state.seen > drainLimit
        }
        return drained ? task.eventLoop.makeFailedFuture(DrainLimitReached()) : task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<SinkHTTPAnswer>) throws -> SinkHTTPAnswer {
        guard let answer else { throw HTTPClientError.remoteConnectionClosed }
        return answer
    }
}
