import Foundation
import HTTPTypes
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// Requests the HTTP/1.1 parser refuses get Herald's JSON error body and a status naming the
/// fault, as every other refusal does (openapi.yaml). They were a bare 400 with no body, and a bad
/// chunk, or a connection ending inside a body, was a 500 logged as an unexpected error.
@Suite(.cleansUp) struct MalformedRequestTests {
    struct Case: Sendable, CustomStringConvertible {
        var description: String
        var bytes: [UInt8]
        /// Each response's status and, for refusals, its error code.
        var answers: [(Int, String?)]
        var halfClose = false
        /// Whether a route reading the body answers it (and counts it with its route), not the
        /// refusal before any route.
        var routeAnswers = false
    }

    static func cases(token: String) -> [Case] {
        let longURL = "/feed/index.json?region=" + String(repeating: "a", count: 90_000)
        let manyFields = (0...1_000).map { "X-Field-\($0): v\r\n" }.joined()
        let events = "POST /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
        return [
            Case(
                description: "a request line over 80 KiB", bytes: Array("GET \(longURL) HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
                answers: [(431, "request_head_too_large")]),
            Case(
                description: "1 001 header fields", bytes: Array("GET /health/live HTTP/1.1\r\nHost: x\r\n\(manyFields)\r\n".utf8),
                answers: [(431, "request_head_too_large")]),
            Case(description: "an invalid method", bytes: Array("G@T /health/live HTTP/1.1\r\nHost: x\r\n\r\n".utf8), answers: [(400, "malformed_request")]),
            Case(description: "an unknown method", bytes: Array("FOO /health/live HTTP/1.1\r\nHost: x\r\n\r\n".utf8), answers: [(400, "malformed_request")]),
            Case(
                description: "a space in a header name", bytes: Array("GET /health/live HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n".utf8),
                answers: [(400, "malformed_request")]),
            Case(
                description: "two Content-Length headers",
                bytes: Array("POST /api/events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".utf8),
                answers: [(400, "malformed_request")]),
            Case(
                description: "TLS to the plain port",
                bytes: [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03] + Array(repeating: 0x78, count: 40),
                answers: [(400, "malformed_request")]),
            Case(
                description: "a malformed request after a good one",
                bytes: Array("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /health/live HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n".utf8),
                answers: [(200, nil), (400, "malformed_request")]),
            Case(
                description: "a bad chunk size in a body being read", bytes: Array("\(events)Transfer-Encoding: chunked\r\n\r\n5\r\n{\"eve\r\nZZ\r\n".utf8),
                answers: [(400, "malformed_request")], routeAnswers: true),
            // Answered without reading its body (no credentials): the parser's error in that
            // body ends the connection, not a second answer to the one request.
            Case(
                description: "a bad chunk size in a body its route did not read",
                bytes: Array(
                    "POST /api/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"eve\r\nZZ\r\n".utf8),
                answers: [(401, "missing_credentials")], routeAnswers: true),
            Case(description: "an HTTP/1.1 request without Host", bytes: Array("GET /health/live HTTP/1.1\r\n\r\n".utf8), answers: [(400, "invalid_host")]),
            Case(
                description: "two Host headers", bytes: Array("GET /health/live HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n".utf8),
                answers: [(400, "invalid_host")]),
            Case(
                description: "a Host that is not a host", bytes: Array("GET /health/live HTTP/1.1\r\nHost: a.example/path\r\n\r\n".utf8),
                answers: [(400, "invalid_host")]),
            Case(
                description: "a Host with a port that is not a number", bytes: Array("GET /health/live HTTP/1.1\r\nHost: a.example:80a\r\n\r\n".utf8),
                answers: [(400, "invalid_host")]),
            Case(
                description: "a request without Host after a good one, then another",
                bytes: Array("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /health/live HTTP/1.1\r\n\r\nGET /health/live HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
                answers: [(200, nil), (400, "invalid_host")]),
            Case(
                description: "HTTP/1.0 without Host, and hosts of every shape",
                bytes: Array(
                    ("GET /health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                        + "GET /health/live HTTP/1.1\r\nHost: [::1]:8080\r\n\r\nGET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                        + "GET /health/live HTTP/1.1\r\nHost: herald.example:\r\n\r\nGET /health/live HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n").utf8),
                answers: [(200, nil), (200, nil), (200, nil), (200, nil), (200, nil)]),
            // A body whose length cannot be known (RFC 9112 §6.3) got two answers (501 from the
            // route, then the parser's 400); on HTTP/1.0 (§6.1) the connection was kept and the
            // request after the body served.
            Case(
                description: "a Transfer-Encoding not ending in chunked, its body a request",
                bytes: Array("\(events)Transfer-Encoding: gzip\r\n\r\nGET /health/live HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
                answers: [(400, "malformed_request")]),
            Case(
                description: "an HTTP/1.0 request with a Transfer-Encoding",
                bytes: Array(
                    "POST /api/events HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                        .utf8),
                answers: [(400, "malformed_request")]),
            Case(
                description: "a connection ending inside a body", bytes: Array("\(events)Content-Length: 100\r\n\r\n{\"events\":".utf8),
                answers: [(400, "malformed_request")],
                halfClose: true, routeAnswers: true),
        ]
    }

    @Test func theParsersRefusalsAreJSONErrorsWithTheirStatus() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        let token = try await herald.userToken("u")
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            for testCase in Self.cases(token: token) {
                let text = try await RawHTTP.onThread { try RawHTTP.exchange(port: port, testCase.bytes, halfClose: testCase.halfClose) }
                let responses = RawHTTP.responses(in: text)
                #expect(responses.count == testCase.answers.count, "\(testCase): \(text.prefix(600))")
                for (response, answer) in zip(responses, testCase.answers) {
                    #expect(response.status == answer.0, "\(testCase): \(text.prefix(600))")
                    if let code = answer.1 {
                        let error = (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [String: [String: String]]
                        #expect(error?["error"]?["code"] == code, "\(testCase): \(response.body)")
                        #expect(error?["error"]?["message"]?.isEmpty == false, "\(testCase)")
                        #expect(response.head.lowercased().contains("content-type: application/json"), "\(testCase): \(response.head)")
                    }
                }
            }
            // The server still serves well-formed requests.
            #expect(try await client.execute(uri: "/health/live", method: .get).status == .ok)
            // Refusals no route saw are counted by their code.
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(herald.admin)"]).body)
            func refused(_ code: String) -> Int {
                metrics.split(separator: "\n").first { $0.hasPrefix("herald_http_refused_total{code=\"\(code)\"}") }
                    .flatMap { $0.split(separator: " ").last.flatMap { Int($0) } } ?? 0
            }
            let expected = Dictionary(
                Self.cases(token: token).filter { !$0.routeAnswers }.flatMap { $0.answers.compactMap(\.1) }.map { ($0, 1) }, uniquingKeysWith: +)
            for (code, count) in expected { #expect(refused(code) == count, "\(code): \(metrics.split(separator: "\n").filter { $0.contains("refused") })") }
        }
    }
}
