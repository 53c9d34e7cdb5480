import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

/// A sink's URL may carry credentials (user info, query tokens): they never reach `last_error`,
/// which every backend key can read, nor the portal or `herald sinks`.
@Suite(.cleansUp) struct SecretRedactionTests {
    @Test func deliveryErrorsNeverShowCredentialsOrTheReceiversReply() async throws {
        let receiver = Receiver()
        try await receiver.start()
        receiver.answer(500)
        let port = receiver.port.withLock { $0 } ?? 0
        let url = "http://hookuser:pa55word@127.0.0.1:\(port)/hook?token=s3cr3t-query-token"
        let herald = try await TestHerald.make {
            $0.addSink("audit", type: "webhook", ["url": url, "secret": "redaction-secret-0123"])
            // The retry must not fall due within the drain, however slow the machine: it would
            // be answered 204 and clear the error under test.
            $0.delivery.retry.baseDelay = .seconds(600)
        }
        try await herald.test { client in
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "generic", "title": "t", "body": "b", "user_ids": ["u"]])
            let id = try #require(sent.object["id"] as? String)
            try await herald.deliver()
            #expect(receiver.received.count == 1)
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            let text = String(buffer: status.body)
            let hook = try #require((status.object["deliveries"] as? [[String: Any]])?.first { $0["sink"] as? String == "webhook:audit" })
            let error = try #require(hook["last_error"] as? String)
            #expect(error.contains("http://127.0.0.1:\(port)/hook"), "the endpoint is still named: \(error)")
            for secret in ["hookuser", "pa55word", "s3cr3t-query-token"] {
                #expect(!text.contains(secret), "\(secret) leaked: \(text)")
            }
            let counters = try await herald.server.store.sinkCounters(finishedSince: .distantPast)
            #expect(counters.allSatisfy { !($0.lastError ?? "").contains("s3cr3t") })
        }
        await receiver.stop()
    }

    @Test func redactedURLsKeepOnlySchemeHostPortAndPath() {
        #expect(RedactedURL.describe("https://u:p@hooks.example:8443/services/T0/B1?token=x#f") == "https://hooks.example:8443/services/T0/B1?…")
        #expect(RedactedURL.describe("http://127.0.0.1/hook") == "http://127.0.0.1/hook")
        #expect(RedactedURL.describe("not a url") == "(an unparseable URL)")
    }
}
