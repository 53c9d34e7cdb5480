import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// The Message Hub app's flow as docs/topics.md documents it, on the real binaries: the FCM
/// emulator's topics hold exactly the devices Herald has subscribed, and a message reaches them.
@Suite(.cleansUp) struct MessageHubTests {
    @Test func fcmTopicsHoldExactlyHeraldsSubscribers() async throws {
        let directory = try TestResources.temporaryDirectory("herald-hub")
        let account = directory.appendingPathComponent("fcm.json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        defer { emulator.process.signal(SIGKILL) }
        let admin = "hk_" + String(repeating: "h", count: 40)
        let herald = try await RunningHerald(
            arguments: [],
            environment: [
                "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_DATABASE": "sqlite:hub.sqlite", "HERALD_FCM_CREDENTIALS": account,
                "HERALD_FCM_ENDPOINT": emulator.url, "HERALD_FCM_IID_ENDPOINT": emulator.url,
            ],
            in: directory
        )
        defer { herald.process.signal(SIGKILL) }
        func call(_ method: HTTPMethod, _ path: String, user: String? = nil, _ body: Any? = nil) async throws -> (Int, [String: Any]) {
            try await LoadHarness.request(
                method, herald.url + path, key: admin, user: user,
                body: body.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) })
        }
        func topics() async throws -> [String: [String: Any]] {
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(emulator.url)/emulator/topics"), timeout: .seconds(10))
            let body = try JSONSerialization.jsonObject(with: Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)) as? [String: Any]
            return body?["topics"] as? [String: [String: Any]] ?? [:]
        }
        func members(_ topic: String) async throws -> Set<String> { Set(try await topics()[topic]?["members"] as? [String] ?? []) }
        func eventually(_ topic: String, _ expected: Set<String>) async throws -> Set<String> {
            var seen: Set<String> = []
            for _ in 0..<100 {
                seen = try await members(topic)
                if seen == expected { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            return seen
        }

        let (_, channel) = try await call(.POST, "/channel", ["name": "Campus", "desc": "All campus news"])
        let channelID = try #require(channel["_id"] as? String)
        let (_, area) = try await call(.POST, "/area/\(channelID)", ["name": "Safety", "desc": ""])
        let areaID = try #require(area["id"] as? String)
        func subject(_ name: String, _ level: String, _ distribution: String) async throws -> (id: String, key: String) {
            let (status, body) = try await call(
                .POST, "/subject/\(channelID)/\(areaID)", ["name": name, "desc": "", "opt": ["level": level, "distribution": distribution]])
            #expect(status == 201 || status == 200, "\(body)")
            return (try #require(body["id"] as? String), try #require(body["topic_key"] as? String))
        }
        let emergencies = try await subject("Emergencies", "Forced", "Alert")
        let sports = try await subject("Sports", "", "Information")
        let events = try await subject("Events", "Recommended", "Information")

        for (user, token) in [("ann", "tok-ann"), ("bob", "tok-bob")] {
            let (status, body) = try await call(.POST, "/api/notifications/register", user: user, ["fcm_token": token])
            #expect(status == 200, "\(body)")
        }
        #expect(try await eventually(emergencies.key, ["tok-ann", "tok-bob"]) == ["tok-ann", "tok-bob"], "Forced: every device")
        #expect(try await eventually(events.key, ["tok-ann", "tok-bob"]) == ["tok-ann", "tok-bob"], "Recommended: at first registration")
        #expect(try await members(sports.key).isEmpty)

        #expect((200..<300).contains(try await call(.PUT, "/api/notifications/subscriptions/\(sports.key)", user: "ann").0))
        #expect((200..<300).contains(try await call(.DELETE, "/api/notifications/subscriptions/\(events.key)", user: "bob").0))
        #expect(try await eventually(sports.key, ["tok-ann"]) == ["tok-ann"], "opt-in")
        #expect(try await eventually(events.key, ["tok-ann"]) == ["tok-ann"], "opt-out")

        let (sent, receipt) = try await call(
            .POST, "/message", ["title": "Match tonight", "desc": "", "message": "Gym, 19:00", "topic_key": sports.key, "distribution": "Information"])
        #expect(sent == 201, "\(receipt)")
        var delivered = 0
        for _ in 0..<100 where delivered == 0 {
            delivered = try await topics()[sports.key]?["deliveries"] as? Int ?? 0
            if delivered == 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(delivered == 1, "the message reached the topic's one member")

        #expect(try await call(.DELETE, "/api/notifications/register", user: "ann", ["fcm_token": "tok-ann"]).0 == 204)
        #expect(try await eventually(emergencies.key, ["tok-bob"]) == ["tok-bob"], "a removed device leaves every topic")
        #expect(try await eventually(sports.key, []) == [])
        #expect(try await call(.DELETE, "/subject/\(channelID)/\(areaID)/\(emergencies.id)").0 == 204)
        #expect(try await eventually(emergencies.key, []) == [], "a deleted subject's topic is emptied")
        await herald.expectCleanStop()
        _ = await emulator.stop()
    }
}
