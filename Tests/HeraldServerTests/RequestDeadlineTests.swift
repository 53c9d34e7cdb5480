import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A body trickled a byte at a time held its connection (and a request) as long as the client
/// liked: the idle timeout restarts at every byte, and the head deadline ends with the head.
/// A few thousand such connections left none for anyone else (slow POST). A body must now come
/// within `server.request_body_timeout`, plus a second per `server.request_body_min_rate` bytes.
@Suite(.cleansUp) struct RequestDeadlineTests {
    static func head(length: Int) -> [UInt8] {
        Array("POST /api/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\nConnection: close\r\n".utf8)
    }

    @Test func aTrickledBodyIsAnswered408AndAFairUploadIsNot() async throws {
        let herald = try await TestHerald.make {
            $0.port = 0
            $0.requestBodyTimeout = .seconds(1)
            $0.requestBodyMinimumRate = 2_000
        }
        let admin = Array("Authorization: Bearer \(herald.admin)\r\n\r\n".utf8)
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            // A byte every 100 ms: 10 bytes a second against a floor of 2 000.
            let (trickled, elapsed) = try await RawHTTP.onThread {
                let fd = try Loopback.connect(port: port)
                defer { close(fd) }
                RawHTTP.send(fd, Self.head(length: 60_000) + admin)
                let started = ContinuousClock.now
                var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var buffer = [UInt8](repeating: 0, count: 4_096)
                var received: [UInt8] = []
                while ContinuousClock.now - started < .seconds(15) {
                    guard RawHTTP.send(fd, [UInt8(ascii: " ")]) else { break }
                    let count = recv(fd, &buffer, buffer.count, 0)
                    if count > 0 { received += buffer[0..<count] } else if count == 0 { break }
                }
                return (String(decoding: received, as: UTF8.self), ContinuousClock.now - started)
            }
            let answer = try #require(RawHTTP.responses(in: trickled).first, "\(trickled)")
            #expect(answer.status == 408, "\(trickled)")
            #expect(answer.body.contains("\"request_timeout\""), "\(answer.body)")
            #expect(elapsed < .seconds(10), "about a second after the head, not the trickle's 15 s: \(elapsed)")
            // Counted (and logged) as the 408 the client got, not as the 400 the route would
            // have answered to a connection ending inside the body.
            var counted = ""
            for _ in 0..<40 {
                let metrics = try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(herald.admin)"])
                counted = String(buffer: metrics.body).split(separator: "\n").filter { $0.hasPrefix("herald_http_requests_total") && $0.contains("POST") }
                    .joined(separator: "\n")
                if !counted.isEmpty { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(counted.contains("status=\"408\"") && !counted.contains("status=\"400\""), "[\(counted)]")

            // 60 000 bytes at about 40 000 a second: 1.5 s, past the 1 s base but within the
            // allowance its bytes earn (a second per 2 000).
            let fair = try await RawHTTP.onThread {
                let fd = try Loopback.connect(port: port)
                defer { close(fd) }
                let prefix = "{\"type\":\"generic\",\"body\":\""
                let suffix = "\",\"user_ids\":[\"u\"]}"
                let body = Array((prefix + String(repeating: "b", count: 60_000 - prefix.utf8.count - suffix.utf8.count) + suffix).utf8)
                RawHTTP.send(fd, Self.head(length: body.count) + admin)
                for start in stride(from: 0, to: body.count, by: 4_000) {
                    RawHTTP.send(fd, Array(body[start..<min(start + 4_000, body.count)]))
                    usleep(100_000)
                }
                return RawHTTP.readToEnd(fd)
            }
            let fairAnswer = try #require(RawHTTP.responses(in: fair).first, "\(fair.prefix(300))")
            #expect(fairAnswer.status != 408 && fairAnswer.status < 500, "read to its end and answered: \(fair.prefix(300))")
            #expect(try await client.execute(uri: "/health/live", method: .get).status == .ok)
        }
    }

    @Test func theBodyDeadlineSettingsAreReadAndChecked() async throws {
        let defaults = try await HeraldConfiguration.load(configFile: nil, environment: [:])
        #expect(defaults.requestBodyTimeout == .seconds(20) && defaults.requestBodyMinimumRate == 500)
        let set = try await HeraldConfiguration.load(
            configFile: nil, environment: ["HERALD_SERVER_REQUEST_BODY_TIMEOUT": "5", "HERALD_SERVER_REQUEST_BODY_MIN_RATE": "100"])
        #expect(set.requestBodyTimeout == .seconds(5) && set.requestBodyMinimumRate == 100)
        let cases = [
            ("HERALD_SERVER_REQUEST_BODY_TIMEOUT", "0", "server.request_body_timeout"),
            ("HERALD_SERVER_REQUEST_BODY_TIMEOUT", "2h", "server.request_body_timeout"),
            ("HERALD_SERVER_REQUEST_BODY_MIN_RATE", "0", "server.request_body_min_rate"),
            ("HERALD_SERVER_REQUEST_BODY_MIN_RATE", "fast", "server.request_body_min_rate"),
        ]
        for (variable, value, key) in cases {
            do {
                _ = try await HeraldConfiguration.load(configFile: nil, environment: [variable: value])
                Issue.record("\(variable)=\(value) was accepted")
            } catch let error as HeraldError {
                #expect(error.message.contains(key), "\(error.message)")
            }
        }
    }
}
