import Foundation
import HeraldTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// HTTP/1.1 over a plain socket, for requests no HTTP client would send: malformed, trickled.
enum RawHTTP {
    /// Runs blocking socket work on a thread of its own (``OwnThread``).
    static func onThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await OwnThread.run(body)
    }

    /// Sends `bytes` on a new connection and reads until the server closes it (or 5 s pass).
    static func exchange(port: Int, _ bytes: [UInt8], halfClose: Bool) throws -> String {
        let fd = try Loopback.connect(port: port)
        defer { close(fd) }
        send(fd, bytes)
        if halfClose { shutdown(fd, Int32(SHUT_WR)) }
        return readToEnd(fd)
    }

    /// Sends `bytes`. - Returns: false when the server closed the connection first (it may
    /// refuse before it has read everything: a head too large).
    @discardableResult
    static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Whatever the server sends until it closes the connection (or a read waits 5 s).
    static func readToEnd(_ fd: Int32) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// What the server sends until `marker` has arrived (or a read waits 5 s), leaving the
    /// connection open.
    static func read(_ fd: Int32, until marker: String) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !String(decoding: received, as: UTF8.self).contains(marker) {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    struct Response {
        var status: Int
        var head: String
        var body: String
    }

    /// The responses in `text`, each framed by its Content-Length.
    static func responses(in text: String) -> [Response] {
        var responses: [Response] = []
        var rest = Substring(text)
        while let headEnd = rest.range(of: "\r\n\r\n") {
            let head = String(rest[..<headEnd.lowerBound])
            let statusLine = head.prefix { $0 != "\r" }.split(separator: " ")
            guard statusLine.count >= 2, let status = Int(statusLine[1]) else { break }
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            let body = rest[headEnd.upperBound...].prefix(length)
            responses.append(Response(status: status, head: head, body: String(body)))
            rest = rest[headEnd.upperBound...].dropFirst(length)
        }
        return responses
    }
}
