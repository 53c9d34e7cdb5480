import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// The operator's example under Examples/ChatSink: its own package adds a sink type to Herald
/// without touching Herald's code. `scripts/test` builds it into the shared build folder.
@Suite(.cleansUp) struct PluginExampleTests {
    static var binary: String { Binaries.path("herald-chat") }

    @Test func anOperatorsOwnSinkDeliversThroughHerald() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.binary),
            "build the example first: swift build --package-path Examples/ChatSink --scratch-path .build (scripts/test does)"
        )
        let receiver = Receiver()
        try await receiver.start()
        let directory = try TestResources.temporaryDirectory("herald-chat")
        let admin = "hk_" + String(repeating: "c", count: 40)
        let config = directory.appendingPathComponent("herald.yaml")
        try """
        port: 0
        database: sqlite:\(directory.appendingPathComponent("h.sqlite").path)
        bootstrap_admin_key: \(admin)
        sinks:
          room:
            type: chat
            url: \(receiver.url)
            types: [violation]
        """.write(to: config, atomically: true, encoding: .utf8)
        let herald = try await RunningHerald(executable: Self.binary, arguments: [config.path], in: directory)
        let (status, sent) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin,
            body: #"{"type":"violation","title":"Post flagged","body":"post 9 needs review","user_ids":["mod-1"]}"#
        )
        #expect(status == 202, "\(sent)")
        let (_, other) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"comment","title":"c","body":"b","user_ids":["mod-1"]}"#
        )
        func deliveries(_ id: Any?) async throws -> [String: String] {
            let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(id as? String ?? "")", key: admin)
            let list = (detail["deliveries"] as? [[String: Any]]) ?? []
            return Dictionary(list.compactMap { d in (d["sink"] as? String).map { ($0, d["state"] as? String ?? "") } }) { first, _ in first }
        }
        // Wait on the outcome, not a fixed time.
        let deadline = ContinuousClock.now + .seconds(20)
        while try await deliveries(sent["id"])["room"] != "delivered" && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await deliveries(sent["id"]) == ["history": "delivered", "room": "delivered"], "\(herald.output.stdout)\(herald.output.stderr)")
        #expect(try await deliveries(other["id"]).keys.sorted() == ["history"], "a comment matches no rule of the room")
        #expect(receiver.received.count == 1)
        let hit = try #require(receiver.received.first)
        let body = try #require(try JSONSerialization.jsonObject(with: hit.body) as? [String: String])
        #expect(body == ["text": "*Post flagged*: post 9 needs review (for mod-1)"])
        #expect(hit.headers["idempotency-key"]?.hasPrefix("herald-") == true)
        await herald.expectCleanStop()
        await receiver.stop()
    }
}
