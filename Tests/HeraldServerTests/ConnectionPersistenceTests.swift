import Foundation
import HTTPTypes
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// An HTTP/1.0 request without `Connection: keep-alive`, or any request with `Connection: close`,
/// ends its connection after the response (RFC 9112 §9.3). HTTP/1.0 clients that read to the end
/// of the connection (`ab`, `check_http`) waited for the request head deadline (10 s) after
/// every request: the connection stayed open.
@Suite(.cleansUp) struct ConnectionPersistenceTests {
    @Test func connectionsEndWhenTheRequestAsksAndStayWhenItAsksToKeepThem() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            let cases: [(String, String, [String])] = [
                ("HTTP/1.0", "GET /health/live HTTP/1.0\r\n\r\n", ["close"]),
                (
                    "HTTP/1.0 keep-alive, then without",
                    "GET /health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /health/live HTTP/1.0\r\n\r\nGET /health/live HTTP/1.0\r\n\r\n",
                    ["keep-alive", "close"]
                ),
                (
                    "HTTP/1.1, then Connection: close",
                    "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /health/live HTTP/1.1\r\nHost: x\r\n\r\n",
                    ["", "close"]
                ),
            ]
            for (name, request, connections) in cases {
                let started = ContinuousClock.now
                let text = try await RawHTTP.onThread { try RawHTTP.exchange(port: port, Array(request.utf8), halfClose: false) }
                let elapsed = ContinuousClock.now - started
                let responses = RawHTTP.responses(in: text)
                #expect(responses.map(\.status) == connections.map { _ in 200 }, "\(name): one answer per request up to the one that ends it: \(text)")
                let headers = responses.map { response in
                    response.head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("connection:") }
                        .map { $0.dropFirst("connection:".count).trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
                }
                #expect(headers == connections, "\(name)")
                // The server closed it: reading to the end took no read timeout (5 s) or head deadline (10 s).
                #expect(elapsed < .seconds(4), "\(name): \(elapsed)")
            }

            // A live stream (no length) to an HTTP/1.0 client: HTTP/1.0 has no chunked coding,
            // so the body is plain and ends with the connection. It was chunked.
            let token = try await herald.userToken("u-stream")
            let stream = try await RawHTTP.onThread { () throws -> String in
                // Read until the stream's first event: the timeout only bounds a failure (2 s
                // was too short for the first bytes once, with the whole suite loading the machine).
                let fd = try Loopback.connect(port: port, receiveTimeout: .seconds(30))
                defer { close(fd) }
                RawHTTP.send(fd, Array("GET /api/stream HTTP/1.0\r\nConnection: keep-alive\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8))
                return RawHTTP.read(fd, until: "retry:")
            }
            let streamHead = stream.components(separatedBy: "\r\n\r\n").first ?? ""
            #expect(streamHead.hasPrefix("HTTP/1.0 200"), "\(stream)")
            #expect(!streamHead.lowercased().contains("transfer-encoding"), "\(stream)")
            #expect(streamHead.lowercased().contains("connection: close"), "\(stream)")
            #expect(stream.contains("\r\n\r\n: connected\n"), "the body starts unchunked: \(stream)")

            // A response to CONNECT has no framing (NIO writes none): its client reads to the end
            // of the connection, which must come.
            let started = ContinuousClock.now
            let text = try await RawHTTP.onThread {
                try RawHTTP.exchange(port: port, Array("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n".utf8), halfClose: false)
            }
            #expect(text.hasPrefix("HTTP/1.1 404") && text.lowercased().contains("connection: close"), "\(text)")
            #expect(ContinuousClock.now - started < .seconds(4), "the connection ended after the response")
        }
    }
}
