import Foundation
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Between requests a kept-alive connection is idle, and `server.idle_timeout` bounds that; the
/// head deadline runs from the next request's first bytes. It ran from each response, so every
/// idle connection closed after `server.request_head_timeout` (10 s) whatever the idle timeout.
@Suite(.cleansUp) struct KeepAliveDeadlineTests {
    @Test func anIdleKeptAliveConnectionOutlivesTheHeadDeadlineButATrickledHeadDoesNot() async throws {
        let herald = try await TestHerald.make {
            $0.port = 0
            $0.requestHeadTimeout = .seconds(1)
            $0.idleTimeout = .seconds(30)
        }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            let (second, trickle) = try await OwnThread.run { () throws -> (String, String) in
                let fd = try Loopback.connect(port: port, receiveTimeout: .seconds(8))
                defer { close(fd) }
                let request = Array("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
                RawHTTP.send(fd, request)
                _ = RawHTTP.read(fd, until: "{\"status\":\"ok\"}")
                // Idle for three head deadlines: the connection stays open.
                Thread.sleep(forTimeInterval: 3)
                RawHTTP.send(fd, request)
                let second = RawHTTP.read(fd, until: "{\"status\":\"ok\"}")
                // Then a head trickled a byte every 200 ms: closed about a second in.
                RawHTTP.send(fd, Array("GET /health/live HTTP/1.1\r\nX-Slow: ".utf8))
                let started = Date()
                var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                while Date().timeIntervalSince(started) < 6 {
                    // A send the server refuses (the connection reset) is a close as much as an end of stream.
                    var byte: UInt8 = 0
                    guard RawHTTP.send(fd, [UInt8(ascii: "a")]) else { return (second, "closed after \(Date().timeIntervalSince(started)) s") }
                    let received = recv(fd, &byte, 1, 0)
                    if received == 0 || (received < 0 && errno == ECONNRESET) {
                        return (second, "closed after \(Date().timeIntervalSince(started)) s")
                    }
                }
                return (second, "open after 6 s")
            }
            #expect(second.hasPrefix("HTTP/1.1 200 "), "the second request on the idle connection is served: \(second.prefix(200))")
            #expect(trickle.hasPrefix("closed after"), "\(trickle)")
            // A connection that sends nothing is closed by the same deadline, uncounted: only
            // the trickled head is a refused request.
            let silent = try await OwnThread.run { () throws -> Bool in
                let fd = try Loopback.connect(port: port, receiveTimeout: .seconds(5))
                defer { close(fd) }
                var byte: UInt8 = 0
                return recv(fd, &byte, 1, 0) == 0
            }
            #expect(silent, "a connection that sent nothing is closed after the head deadline")
            // On a connection of its own: the test client's has been closed by the head deadline.
            let admin = herald.admin
            let metrics = try await RawHTTP.onThread {
                try RawHTTP.exchange(
                    port: port, Array("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(admin)\r\nConnection: close\r\n\r\n".utf8), halfClose: false)
            }
            let counted = metrics.split(separator: "\n").filter { $0.hasPrefix("herald_http_refused_total{code=\"request_head_timeout\"}") }
            #expect(
                counted == ["herald_http_refused_total{code=\"request_head_timeout\"} 1"], "\(metrics.split(separator: "\n").filter { $0.contains("refused") })"
            )
        }
    }

    /// A request pipelined behind another is in progress once its head is read, though the
    /// response before it ends after that: the head deadline does not start at its body's later
    /// bytes. It did, and closed the connection a head deadline after them while the body was
    /// still arriving within its own deadline.
    @Test func aPipelinedRequestsBodyIsHeldToTheBodyDeadlineNotTheHeadDeadline() async throws {
        let herald = try await TestHerald.make {
            $0.port = 0
            $0.requestHeadTimeout = .seconds(1)
            $0.requestBodyTimeout = .seconds(20)
            $0.idleTimeout = .seconds(30)
        }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            let body = Array(#"{"type":"comment","title":"t","body":"b","user_ids":["u-1"]}"#.utf8)
            let heads =
                "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                + "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(herald.backend)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            let text = try await RawHTTP.onThread {
                let fd = try Loopback.connect(port: port, receiveTimeout: .seconds(8))
                defer { close(fd) }
                // Both heads in one write, then the second body in three parts: the last comes
                // two head deadlines after the first response.
                RawHTTP.send(fd, Array(heads.utf8) + body[0..<10])
                Thread.sleep(forTimeInterval: 0.5)
                RawHTTP.send(fd, Array(body[10..<20]))
                Thread.sleep(forTimeInterval: 2)
                RawHTTP.send(fd, Array(body[20...]))
                return RawHTTP.readToEnd(fd)
            }
            let statuses = RawHTTP.responses(in: text).map(\.status)
            #expect(statuses == [200, 202], "\(text.prefix(600))")
        }
    }
}
