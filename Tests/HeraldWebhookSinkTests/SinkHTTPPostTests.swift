import AsyncHTTPClient
import HeraldSinkHTTP
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// `HTTPClient.post`, which every HTTP sink sends through: the head is the answer, whatever
/// the body does after it.
@Suite(.cleansUp) struct SinkHTTPPostTests {
    @Test func keepsTheFirstBytesOfALongBodyAndTheStatus() async throws {
        // Past the drain limit: the answer is what came before it, and the connection is dropped.
        let page = String(repeating: "0123456789", count: 300_000)
        let server = try await RawAnswerServer.start("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nContent-Length: \(page.utf8.count)\r\n\r\n\(page)")
        try await withClient { client in
            for attempt in ["first", "second"] {
                let answer = try await client.post(server.url, headers: [:], body: ByteBuffer(string: "hello"), keep: 12, timeout: .seconds(10))
                #expect(answer.status == 503, "\(attempt)")
                #expect(answer.headers.first(name: "Retry-After") == "7", "\(attempt)")
                #expect(String(buffer: answer.body) == "012345678901", "\(attempt)")
            }
        }
        try await server.stop()
    }

    @Test func aConnectionThatBreaksAfterTheHeadStillAnswers() async throws {
        let server = try await RawAnswerServer.start("HTTP/1.1 202 Accepted\r\nContent-Length: 1000\r\n\r\nabc")
        try await withClient { client in
            let answer = try await client.post(server.url, headers: [:], body: ByteBuffer(string: "x"), keep: 100, timeout: .seconds(10))
            #expect(answer.status == 202)
            #expect(String(buffer: answer.body) == "abc")
        }
        try await server.stop()
    }

    /// A caller that keeps no body (Web Push) has its answer at the head: a body sent a byte
    /// at a time, or never, does not hold the send until the timeout.
    @Test func withNoBodyKeptTheHeadIsTheAnswerAtOnce() async throws {
        let server = try await RawAnswerServer.start("HTTP/1.1 201 Created\r\nContent-Length: 1000\r\n\r\nab", closes: false)
        try await withClient { client in
            let started = ContinuousClock.now
            let answer = try await client.post(server.url, headers: [:], body: ByteBuffer(string: "x"), keep: 0, timeout: .seconds(60))
            #expect(answer.status == 201)
            #expect(ContinuousClock.now - started < .seconds(30), "answered at the head, not at the timeout")
        }
        try await server.stop()
    }

    @Test func noHeadIsNoAnswer() async throws {
        let server = try await RawAnswerServer.start("")
        try await withClient { client in
            await #expect(throws: (any Error).self, "a connection closed before any head") {
                _ = try await client.post(server.url, headers: [:], body: ByteBuffer(string: "x"), keep: 100, timeout: .seconds(10))
            }
            await #expect(throws: (any Error).self, "a connection closed before any head, with no body kept") {
                _ = try await client.post(server.url, headers: [:], body: ByteBuffer(string: "x"), keep: 0, timeout: .seconds(10))
            }
            await #expect(throws: (any Error).self, "nothing listening") {
                _ = try await client.post("http://127.0.0.1:1/", headers: [:], body: ByteBuffer(string: "x"), keep: 100, timeout: .seconds(1))
            }
            await #expect(throws: (any Error).self, "not a URL") {
                _ = try await client.post("no scheme", headers: [:], body: ByteBuffer(string: "x"), keep: 100, timeout: .seconds(1))
            }
        }
        try await server.stop()
    }

    /// A sink's client, shut down however `body` ends (a client dropped unclosed traps).
    private func withClient(_ body: (HTTPClient) async throws -> Void) async throws {
        let client = SinkHTTPClients.makeClient(maxConcurrency: 4)
        do {
            try await body(client)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }
}
