import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A client that trickles its request head cannot hold a connection open: the server closes it
/// once `server.request_head_timeout` passes without a complete head.
@Suite(.cleansUp) struct SlowClientTests {
    @Test func aSlowLorisConnectionIsClosed() async throws {
        let directory = try TestResources.temporaryDirectory("herald-slow")
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: ["HERALD_SERVER_REQUEST_HEAD_TIMEOUT": "1"], in: directory
        )
        let started = ContinuousClock.now
        let closed = try await OwnThread.run { try Self.trickle(port: herald.port, every: .milliseconds(200), for: .seconds(8)) }
        let elapsed = ContinuousClock.now - started
        #expect(closed, "the server closed the connection")
        // The head deadline is 1 s and the trickle lasts 8 s: anything well short of 8 s is the
        // deadline at work (with room for a loaded machine, which took 5.2 s once).
        #expect(elapsed < .seconds(7), "within the head deadline, not the trickle's length: \(elapsed)")
        // The server still serves others.
        let live = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(herald.url)/health/live"), timeout: .seconds(30))
        #expect(live.status == .ok)
        await herald.expectCleanStop()
    }

    /// A client that never finishes its request cannot hold a graceful shutdown for the whole
    /// `shutdown_timeout`: after a third of it (at least a second) the connection is ended and
    /// the process exits cleanly.
    @Test func aStalledRequestDoesNotHoldTheShutdown() async throws {
        let directory = try TestResources.temporaryDirectory("herald-stall")
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: ["HERALD_SHUTDOWN_TIMEOUT": "30", "HERALD_SERVER_REQUEST_HEAD_TIMEOUT": "60"], in: directory
        )
        // A complete head promising a body that never comes: a request in progress.
        let fd = try Loopback.connect(port: herald.port, receiveTimeout: .milliseconds(100))
        defer { close(fd) }
        let head = Array("POST /api/auth/device HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"ty".utf8)
        _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        try await Task.sleep(for: .milliseconds(300))
        let started = ContinuousClock.now
        await herald.expectCleanStop(timeout: .seconds(20))
        let took = ContinuousClock.now - started
        #expect(took < .seconds(15), "the drain ended the stalled connection after about 10 s, not the 30 s budget: \(took)")
        let log = herald.output.stderr
        #expect(log.contains("closed 1 HTTP connections still open"), "\(log.suffix(1500))")
        #expect(log.contains("stopped delivery workers") && log.contains("stopped storage"), "the rest still drains in turn: \(log.suffix(1500))")
    }

    /// An idle keep-alive connection is closed after `server.idle_timeout`.
    @Test func anIdleConnectionIsClosed() async throws {
        let directory = try TestResources.temporaryDirectory("herald-idle")
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: ["HERALD_SERVER_IDLE_TIMEOUT": "1", "HERALD_SERVER_REQUEST_HEAD_TIMEOUT": "30"], in: directory
        )
        let closedAfter = try await OwnThread.run { try Self.idle(port: herald.port, limit: .seconds(8)) }
        let seconds = try #require(closedAfter, "the server closed the idle connection")
        #expect(seconds >= 0.5 && seconds < 5, "after about the idle timeout: \(seconds) s")
        await herald.expectCleanStop()
    }

    /// Sends one complete request, reads the answer, then waits. - Returns: seconds until the
    /// server closed the connection, or nil if it stayed open until `limit`.
    static func idle(port: Int, limit: Duration) throws -> Double? {
        let fd = try Loopback.connect(port: port, receiveTimeout: .milliseconds(100))
        defer { close(fd) }
        let request = Array("GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let answered = Date()
        var sawAnswer = false
        while Date().timeIntervalSince(answered) < Double(limit.components.seconds) {
            let received = recv(fd, &buffer, buffer.count, 0)
            if received == 0 { return sawAnswer ? Date().timeIntervalSince(answered) : nil }
            if received > 0 { sawAnswer = true }
        }
        return nil
    }

    /// Sends a request line, then one header byte at a time. - Returns: whether the server closed
    /// the connection before `limit`.
    static func trickle(port: Int, every pause: Duration, for limit: Duration) throws -> Bool {
        let fd = try Loopback.connect(port: port, receiveTimeout: .milliseconds(100))
        defer { close(fd) }
        var timeout = timeval(tv_sec: 0, tv_usec: 1_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let head = Array("GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
        _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let deadline = ContinuousClock.now + limit
        var buffer = [UInt8](repeating: 0, count: 64)
        while ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18 + Double(pause.components.seconds))
            let sent = [UInt8(ascii: "a")].withUnsafeBytes { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
            if sent < 0 { return true }
            let received = recv(fd, &buffer, buffer.count, 0)
            if received == 0 { return true }
        }
        return false
    }
}
