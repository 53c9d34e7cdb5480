import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@Suite(.cleansUp) struct MetricsTests {
    /// The value of one sample line `name{labels} value`, summed over lines whose labels
    /// contain every `label` given.
    func value(_ text: String, _ name: String, _ labels: [String] = []) -> Double {
        text.split(separator: "\n").filter { line in
            (line.hasPrefix(name + "{") || line.hasPrefix(name + " ")) && labels.allSatisfy { line.contains($0) }
        }.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    @Test func countersMoveWithTrafficAndDeliveries() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            #expect(
                try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "m1"), json: ["fcm_token": "tok-m1"]).status == .ok)
            for _ in 0..<3 {
                let sent = try await client.call(
                    .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "t", "user_ids": ["m1"]])
                #expect(sent.status == .accepted)
            }
            // Before delivery: the three pushes wait in the queue; the history rows were written
            // by the accepts themselves.
            var text = String(buffer: try await client.call(.get, "/metrics", headers(herald.admin)).body)
            #expect(value(text, "herald_notifications_accepted_total", ["type=\"comment\"", "target=\"user_ids\""]) == 3)
            #expect(value(text, "herald_queue_pending_deliveries") == 3)
            #expect(value(text, "herald_accept_duration_seconds_count") == 3)
            // The sink's oldest waiting delivery, as /health/sinks shows it.
            let waiting = try await client.call(.get, "/health/sinks", headers(herald.admin, contentType: nil))
            let fcm = (waiting.object["sinks"] as? [[String: Any]])?.first { $0["name"] as? String == "fcm" }
            #expect((fcm?["oldest_waiting_seconds"] as? Double).map { $0 >= 0 && $0 < 600 } == true, "\(fcm ?? [:])")
            #expect(fcm?["failure_rate"] as? Double == 0 && fcm?["deliveries_judged"] as? Int == 0)
            #expect(value(text, "herald_deliveries_total", ["sink=\"history\"", "outcome=\"delivered\""]) == 3)

            // One push is retried, one reports its token gone, one is delivered.
            herald.push.script([.retry(after: .seconds(3600), reason: "busy"), .recipientGone(reason: "UNREGISTERED")])
            try await herald.deliver()
            text = String(buffer: try await client.call(.get, "/metrics", headers(herald.admin)).body)
            #expect(value(text, "herald_deliveries_total", ["sink=\"history\"", "outcome=\"delivered\""]) == 3)
            #expect(value(text, "herald_deliveries_total", ["sink=\"fcm\"", "outcome=\"retry\""]) == 1)
            #expect(value(text, "herald_delivery_retries_total", ["sink=\"fcm\""]) == 1)
            #expect(value(text, "herald_dead_tokens_removed_total", ["sink=\"fcm\""]) == 1)
            #expect(value(text, "herald_delivery_duration_seconds_count", ["sink=\"history\""]) == 3)
            // Every answer's age since the delivery was due, by outcome.
            #expect(value(text, "herald_delivery_age_seconds_count", ["sink=\"fcm\"", "outcome=\"retry\""]) == 1)
            #expect(value(text, "herald_delivery_age_seconds_count", ["sink=\"fcm\"", "outcome=\"delivered\""]) == 1)
            let after = try await client.call(.get, "/health/sinks", headers(herald.admin, contentType: nil))
            let judged = (after.object["sinks"] as? [[String: Any]])?.first { $0["name"] as? String == "fcm" }
            #expect(judged?["deliveries_judged"] as? Int == 2 && (judged?["failure_rate"] as? Double).map { abs($0 - 0.5) < 0.001 } == true, "\(judged ?? [:])")
            #expect(judged?["oldest_waiting_seconds"] == nil, "none waits any more")
            #expect(value(text, "herald_queue_pending_deliveries") == 0, "the retry's device was removed, failing it")
            #expect(value(text, "herald_http_requests_total", ["route=\"/api/notifications\"", "status=\"202\""]) == 3)
            #expect(text.contains("# TYPE herald_accept_duration_seconds histogram"))
        }
    }

    @Test func metricsNeedAnAdminKeyUnlessPublic() async throws {
        let guarded = try await TestHerald.make()
        try await guarded.test { (client: any TestClientProtocol) async throws in
            #expect(try await client.call(.get, "/metrics").status == .unauthorized)
            #expect(try await client.call(.get, "/metrics", headers(guarded.backend)).status == .forbidden)
            #expect(try await client.call(.get, "/metrics", headers(guarded.admin)).status == .ok)
        }
        let open = try await TestHerald.make { $0.metricsPublic = true }
        try await open.test { (client: any TestClientProtocol) async throws in
            let response = try await client.call(.get, "/metrics")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
        }
    }
}
