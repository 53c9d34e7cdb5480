import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// A body in a coding Herald does not undo is refused before anything is stored: 415 with
/// `Accept-Encoding: identity` for a content coding, 501 for a transfer coding other than chunked.
/// Such bodies were read as if plain: a body marked gzip but sent plain was accepted.
@Suite(.cleansUp) struct ContentCodingTests {
    static let body = #"{"type":"comment","title":"t","body":"b","user_ids":["u-1"]}"#

    static func post(_ token: String, _ framing: String, body: String = body) -> [UInt8] {
        Array(
            "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n\(framing)\r\n\(body)"
                .utf8)
    }

    static func chunked(_ body: String) -> String {
        String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n"
    }

    @Test func codedBodiesAreRefusedAndNothingIsStored() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            let cases: [(String, [UInt8], Int, String?)] = [
                ("gzip then chunked", Self.post(herald.backend, "Transfer-Encoding: gzip, chunked\r\n", body: Self.chunked(Self.body)), 501, nil),
                (
                    "deflate on a line of its own",
                    Self.post(herald.backend, "Transfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n", body: Self.chunked(Self.body)), 501, nil
                ),
                ("a gzip content coding", Self.post(herald.backend, "Content-Encoding: gzip\r\nContent-Length: \(Self.body.utf8.count)\r\n"), 415, "identity"),
                (
                    "identity, then br", Self.post(herald.backend, "Content-Encoding: identity, BR\r\nContent-Length: \(Self.body.utf8.count)\r\n"), 415,
                    "identity"
                ),
            ]
            for (name, bytes, status, acceptEncoding) in cases {
                // A request on the same connection after the refusal is still read.
                let next = Array("GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
                let text = try await RawHTTP.onThread { try RawHTTP.exchange(port: port, bytes + next, halfClose: false) }
                let responses = RawHTTP.responses(in: text)
                #expect(responses.map(\.status) == [status, 200], "\(name): \(text.prefix(600))")
                guard let refusal = responses.first else { continue }
                let error = (try? JSONSerialization.jsonObject(with: Data(refusal.body.utf8))) as? [String: [String: String]]
                #expect(error?["error"]?["code"] == (status == 501 ? "unsupported_transfer_coding" : "unsupported_content_encoding"), "\(name)")
                if let acceptEncoding {
                    #expect(refusal.head.lowercased().contains("accept-encoding: \(acceptEncoding)"), "\(name): \(refusal.head)")
                }
            }
            #expect(try await herald.server.store.history(userID: "u-1", limit: 10, before: nil).items.isEmpty)

            // Plain bodies, with or without an identity coding or chunked framing, are accepted.
            for framing in [
                "Content-Length: \(Self.body.utf8.count)\r\n", "Content-Encoding: identity\r\nContent-Length: \(Self.body.utf8.count)\r\n",
            ] {
                let text = try await RawHTTP.onThread {
                    try RawHTTP.exchange(port: port, Self.post(herald.backend, framing + "Connection: close\r\n"), halfClose: false)
                }
                #expect(RawHTTP.responses(in: text).map(\.status) == [202], "\(framing): \(text.prefix(400))")
            }
            let chunked = Self.post(herald.backend, "Transfer-Encoding: chunked\r\nConnection: close\r\n", body: Self.chunked(Self.body))
            let text = try await RawHTTP.onThread { try RawHTTP.exchange(port: port, chunked, halfClose: false) }
            #expect(RawHTTP.responses(in: text).map(\.status) == [202], "chunked: \(text.prefix(400))")
            // A request without a body is not refused for the header.
            #expect(try await herald.server.store.history(userID: "u-1", limit: 10, before: nil).items.count == 3)
            let get = try await client.execute(uri: "/health/live", method: .get, headers: [.contentEncoding: "gzip"])
            #expect(get.status == .ok)
        }
    }
}
