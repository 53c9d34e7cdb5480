import Foundation
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A client that sends `Expect: 100-continue` gets `100 Continue` before it sends its body, in
/// order behind the responses to requests pipelined before it. Without it, curl waited a second
/// before every body over 1 MiB. A request refused before its body is read gets no 100.
@Suite(.cleansUp) struct ExpectContinueTests {
    static let body = #"{"type":"comment","title":"t","body":"b","user_ids":["u-1"]}"#

    /// - Parameter keepAlive: without `Connection: close`, so a close is the server's own doing.
    static func head(
        _ token: String, version: String = "1.1", expect: String = "100-continue", length: Int = body.utf8.count, keepAlive: Bool = false
    ) -> String {
        "POST /api/notifications HTTP/\(version)\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Expect: \(expect)\r\nContent-Length: \(length)\r\n\(keepAlive ? "" : "Connection: close\r\n")\r\n"
    }

    /// Sends `first`, waits for `marker`, then sends `second` and reads to the end.
    static func exchange(port: Int, _ first: String, until marker: String, then second: String) async throws -> (early: String, all: String) {
        try await RawHTTP.onThread {
            let fd = try Loopback.connect(port: port)
            defer { close(fd) }
            RawHTTP.send(fd, Array(first.utf8))
            let early = RawHTTP.read(fd, until: marker)
            RawHTTP.send(fd, Array(second.utf8))
            return (early, early + RawHTTP.readToEnd(fd))
        }
    }

    @Test func continueComesBeforeTheBodyAndAfterEarlierResponses() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)

            // Alone: the 100 comes while the body is held back, then the answer.
            let alone = try await Self.exchange(port: port, Self.head(herald.backend), until: "\r\n\r\n", then: Self.body)
            #expect(alone.early.hasPrefix("HTTP/1.1 100 Continue\r\n"), "\(alone.early)")
            #expect(RawHTTP.responses(in: alone.all).map(\.status) == [100, 202], "\(alone.all.prefix(600))")

            // Behind a pipelined request: that request's response first, whole, then the 100.
            let earlier = "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n"
            let behind = try await Self.exchange(port: port, earlier + Self.head(herald.backend), until: "100 Continue\r\n\r\n", then: Self.body)
            #expect(RawHTTP.responses(in: behind.early).map(\.status) == [200, 100], "\(behind.early.prefix(600))")
            #expect(RawHTTP.responses(in: behind.all).map(\.status) == [200, 100, 202], "\(behind.all.prefix(900))")

            // HTTP/1.0 expectations are ignored (RFC 9110 §10.1.1), and other expectations get no 100.
            for head in [Self.head(herald.backend, version: "1.0"), Self.head(herald.backend, expect: "something-else")] {
                let text = try await RawHTTP.onThread { try RawHTTP.exchange(port: port, Array((head + Self.body).utf8), halfClose: false) }
                #expect(RawHTTP.responses(in: text).map(\.status) == [202], "\(text.prefix(600))")
            }
            #expect(try await herald.server.store.history(userID: "u-1", limit: 10, before: nil).items.count == 4)
        }
    }

    /// Refused before its body is read (a body announced over the 64 KiB limit, a key that is
    /// not one): the final answer comes without a 100, so the client need not send the body,
    /// and the connection closes after it, as the client may never send it. The 100 was sent
    /// on the head, and curl uploaded 100 MiB to be told 413.
    @Test func aRequestRefusedBeforeItsBodyIsReadGetsNoContinue() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            let cases = [
                (Self.head(herald.backend, length: 100 << 20, keepAlive: true), 413),
                (Self.head("hk_notakeynotakeynotakeynotakey0000", keepAlive: true), 401),
            ]
            for (requestHead, status) in cases {
                let started = ContinuousClock.now
                // Only the head is sent: the body waits for a 100 that should not come.
                let text = try await RawHTTP.onThread { try RawHTTP.exchange(port: port, Array(requestHead.utf8), halfClose: false) }
                let responses = RawHTTP.responses(in: text)
                #expect(responses.map(\.status) == [status], "\(text.prefix(600))")
                #expect(responses.first?.head.lowercased().contains("connection: close") == true, "\(text.prefix(600))")
                // Closed by the server, not ended by the read's own 5 s timeout.
                #expect(ContinuousClock.now - started < .seconds(4), "the connection was left open")
            }
        }
    }
}
