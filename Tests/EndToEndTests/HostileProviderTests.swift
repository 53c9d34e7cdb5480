import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// What a provider answers can never stop Herald (issue: one bad endpoint took the service down
/// for good, again after each restart).
@Suite(.cleansUp) struct HostileProviderTests {
    /// A webhook answering 503 with an absurd Retry-After: the delivery waits at most
    /// `delivery.max_retry_after`, and the process stays up.
    @Test func anAbsurdRetryAfterIsCappedAndNeverTraps() async throws {
        let receiver = Receiver()
        try await receiver.start()
        receiver.answer(503, headers: ["Retry-After": "100000000000000"])
        let directory = try TestResources.temporaryDirectory("herald-hostile")
        let admin = "hk_" + String(repeating: "h", count: 40)
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: [
                "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_SINKS_WEBHOOKS": "hook", "HERALD_SINKS_HOOK_URL": receiver.url,
                "HERALD_SINKS_HOOK_SECRET": "hostile-test-secret-123", "HERALD_DELIVERY_MAX_RETRY_AFTER": "600",
            ],
            in: directory
        )
        let started = Date()
        let (status, sent) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"generic","title":"t","body":"b","user_ids":["u"]}"#
        )
        #expect(status == 202)
        var hook: [String: Any] = [:]
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(sent["id"] as? String ?? "")", key: admin)
            hook = ((detail["deliveries"] as? [[String: Any]]) ?? []).first { $0["sink"] as? String == "webhook:hook" } ?? [:]
            if hook["last_error"] != nil { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(receiver.received.count == 1)
        #expect(hook["state"] as? String == "pending", "\(hook)")
        let next = try #require((hook["next_attempt_at"] as? String).flatMap(Timestamp8601.parse))
        #expect(next > started && next <= Date().addingTimeInterval(600 + 5), "waits at most delivery.max_retry_after: \(next)")
        #expect(herald.process.isRunning, "the process is still up: \(herald.output.stderr)")
        let (ready, _) = try await LoadHarness.request(.GET, "\(herald.url)/health/ready", key: admin)
        #expect(ready == 200)
        await herald.expectCleanStop()
        await receiver.stop()
    }
}

/// RFC 3339 instants as the API writes them.
enum Timestamp8601 {
    static func parse(_ text: String) -> Date? {
        try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
