import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// The operator's example under Examples/OperatorSinks: its own package adds two sink types to
/// Herald without touching Herald's code, a chat room and a push provider with its own
/// registration field. `scripts/test` builds it into the shared build folder.
@Suite(.cleansUp) struct PluginExampleTests {
    static var binary: String { Binaries.path("herald-chat") }

    static let admin = "hk_" + String(repeating: "c", count: 40)

    /// The example's server, with `sinks` (YAML lines under `sinks:`) configured, and `more`
    /// top-level YAML after them.
    static func start(sinks: String, more: String = "") async throws -> RunningHerald {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.binary),
            "build the example first: swift build --package-path Examples/OperatorSinks --scratch-path .build (scripts/test does)"
        )
        let directory = try TestResources.temporaryDirectory("herald-chat")
        let config = directory.appendingPathComponent("herald.yaml")
        try """
        port: 0
        database: sqlite:\(directory.appendingPathComponent("h.sqlite").path)
        bootstrap_admin_key: \(admin)
        sinks:
        \(sinks)
        \(more)
        """.write(to: config, atomically: true, encoding: .utf8)
        return try await RunningHerald(executable: Self.binary, arguments: [config.path], in: directory)
    }

    @Test func anOperatorsOwnSinkDeliversThroughHerald() async throws {
        let receiver = Receiver()
        try await receiver.start()
        let admin = Self.admin
        let herald = try await Self.start(sinks: "  room:\n    type: chat\n    url: \(receiver.url)\n    types: [violation]")
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

    /// A push provider Herald does not know (ntfy), from the example package: devices register
    /// with its own field and option, its own address rule refuses a bad topic naming the
    /// field, and a notification for the user is pushed to the device's topic.
    @Test func anOutsideProviderRegistersWithItsOwnFieldAndIsPushed() async throws {
        let receiver = Receiver()
        try await receiver.start()
        // The receiver answers at /hook: the server is its root and the device's topic `hook`.
        let server = receiver.url.replacingOccurrences(of: "/hook", with: "")
        let herald = try await Self.start(sinks: "  phones:\n    type: ntfy\n    server: \(server)")
        let register = "\(herald.url)/api/notifications/register"
        let (refused, refusal) = try await LoadHarness.request(.POST, register, key: Self.admin, user: "ann", body: #"{"ntfy_topic":"no spaces allowed"}"#)
        #expect(refused == 422 && "\(refusal)".contains("ntfy_topic"), "\(refusal)")
        let (badOption, optionRefusal) = try await LoadHarness.request(
            .POST, register, key: Self.admin, user: "ann", body: #"{"ntfy_topic":"hook","ntfy_priority":"loud"}"#)
        #expect(badOption == 422 && "\(optionRefusal)".contains("ntfy_priority"), "\(optionRefusal)")
        let (status, registered) = try await LoadHarness.request(
            .POST, register, key: Self.admin, user: "ann", body: #"{"ntfy_topic":"hook","ntfy_priority":"high"}"#)
        #expect(status == 200, "\(registered)")
        #expect(registered["provider"] as? String == "ntfy" && registered["ntfy_topic"] as? String == "hook")
        #expect(registered["ntfy_priority"] as? String == "high")

        let (accepted, sent) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"comment","title":"New reply","body":"Bea answered","user_ids":["ann"]}"#
        )
        #expect(accepted == 202, "\(sent)")
        let deadline = ContinuousClock.now + .seconds(20)
        while receiver.received.isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let hit = try #require(receiver.received.first, "\(herald.output.stdout)\(herald.output.stderr)")
        #expect(hit.headers["title"] == "New reply" && hit.headers["priority"] == "high")
        #expect(String(decoding: hit.body, as: UTF8.self) == "Bea answered")
        await herald.expectCleanStop()
        await receiver.stop()
    }

    /// The example's chat room is a user-facing `chat` channel: a user who turned chat off for
    /// comments gets the push and no chat message, one who kept it gets both, and a critical
    /// type reaches both channels whatever the user chose.
    @Test func theChatChannelFollowsEachUsersChoiceAndCriticalTypesReachIt() async throws {
        let receiver = Receiver()
        try await receiver.start()
        let admin = Self.admin
        let herald = try await Self.start(
            sinks: "  room:\n    type: chat\n    url: \(receiver.url)\n    types: [comment, alert]\n  console:\n    enabled: true",
            more: "preferences:\n  critical: [alert]")
        for user in ["ann", "bob"] {
            let (status, body) = try await LoadHarness.request(
                .POST, "\(herald.url)/api/notifications/register", key: admin, user: user, body: #"{"fcm_token":"phone-\#(user)"}"#)
            #expect(status == 200, "\(body)")
        }
        let (patched, settings) = try await LoadHarness.request(
            .PATCH, "\(herald.url)/api/notifications/settings", key: admin, user: "ann", body: #"{"preferences":{"comment":{"chat":false}}}"#)
        #expect(patched == 200 && (settings["channels"] as? [String: Bool]) == ["push": true, "chat": true], "\(settings)")
        func deliveries(_ id: Any?) async throws -> Set<String> {
            let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(id as? String ?? "")", key: admin)
            let list = (detail["deliveries"] as? [[String: Any]]) ?? []
            return Set(list.compactMap { d in d["state"] as? String == "delivered" ? "\(d["sink"] ?? "")/\(d["user_id"] ?? "")" : nil })
        }
        func waitFor(_ id: Any?, _ expected: Set<String>) async throws -> Set<String> {
            let deadline = ContinuousClock.now + .seconds(20)
            var seen = try await deliveries(id)
            while seen != expected && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                seen = try await deliveries(id)
            }
            return seen
        }
        let (_, comment) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"comment","title":"Re","body":"a reply","user_ids":["ann","bob"]}"#)
        let commentExpected: Set = ["history/ann", "history/bob", "console/ann", "console/bob", "room/bob"]
        #expect(try await waitFor(comment["id"], commentExpected) == commentExpected, "\(herald.output.stderr)")
        // Ann turns chat and push off altogether: the critical alert reaches both anyway.
        _ = try await LoadHarness.request(
            .PATCH, "\(herald.url)/api/notifications/settings", key: admin, user: "ann", body: #"{"enabled":false,"channels":{"chat":false}}"#)
        let (_, alert) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"alert","title":"Outage","body":"down","user_ids":["ann"]}"#)
        let alertExpected: Set = ["history/ann", "console/ann", "room/ann"]
        #expect(try await waitFor(alert["id"], alertExpected) == alertExpected)
        let texts = receiver.received.compactMap { (try? JSONSerialization.jsonObject(with: $0.body) as? [String: String])?["text"] }
        #expect(texts.sorted() == ["*Outage*: down (for ann)", "*Re*: a reply (for bob)"])
        await herald.expectCleanStop()
        await receiver.stop()
    }
}
