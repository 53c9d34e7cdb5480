import Foundation
import HeraldHTTP
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A body whose `Content-Length` is over its route's limit is answered 413 from the head, before
/// any of it is read. Routes found out only once they had read past the limit, so a client that
/// announced too much and sent part of it was answered 408 when its body deadline ran out.
@Suite(.cleansUp) struct AnnouncedLengthTests {
    @Test func aBodyAnnouncedOverTheLimitIs413AtOnce() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            let cases: [(route: String, key: String, type: String, length: Int)] = [
                ("/api/notifications", herald.backend, "application/json", JSONBody.maxBytes + 1),
                ("/api/pool/scores", herald.backend, "application/x-ndjson", 200 * 1024 * 1024),
                ("/portal/login", "", "application/x-www-form-urlencoded", 64 * 1024 + 1),
            ]
            for (route, key, type, length) in cases {
                let authorization = key.isEmpty ? "" : "Authorization: Bearer \(key)\r\n"
                let head = "POST \(route) HTTP/1.1\r\nHost: x\r\n\(authorization)Content-Type: \(type)\r\nContent-Length: \(length)\r\n\r\n"
                // Part of the body, then nothing: the answer must come from the head. (A read
                // gives up after 5 s; the body deadline is 20 s.)
                let text = try await RawHTTP.onThread {
                    let fd = try Loopback.connect(port: port)
                    defer { close(fd) }
                    RawHTTP.send(fd, Array((head + "{\"type\":").utf8))
                    return RawHTTP.read(fd, until: "payload_too_large")
                }
                #expect(text.hasPrefix("HTTP/1.1 413 "), "\(route): \(text.prefix(300))")
                #expect(text.contains("payload_too_large"), "\(route): \(text.prefix(300))")
            }
            // At the limit the body is read as usual.
            let body = #"{"type":"comment","title":"t","body":"b","user_ids":["u-1"]}"#
            let text = try await RawHTTP.onThread {
                try RawHTTP.exchange(
                    port: port,
                    Array(
                        "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(herald.backend)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                            .utf8), halfClose: false)
            }
            #expect(text.hasPrefix("HTTP/1.1 202 "), "\(text.prefix(300))")
        }
    }
}
