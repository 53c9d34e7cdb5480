import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// The inbox across one user's two devices (docs/inbox.md), Herald and the FCM emulator as
/// separate processes: alerts carry the unread count as their badge, and a read on the phone
/// reaches the tablet as an `inbox` event on its stream and as a silent push with the new count,
/// while the phone itself gets no push.
@Suite(.cleansUp) struct InboxSyncTests {
    @Test func aReadOnThePhoneReachesTheTabletsStreamAndBadge() async throws {
        let directory = try TestResources.temporaryDirectory("herald-inbox")
        let account = directory.appendingPathComponent("fcm.json").path
        let fcm = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let admin = "hk_" + String(repeating: "i", count: 40)
        let environment = [
            "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_USER_TOKEN_SECRET": "inbox-sync-user-token-secret-0123456789",
            "HERALD_DATABASE": "sqlite:" + directory.appendingPathComponent("inbox.sqlite").path, "HERALD_FCM_CREDENTIALS": account,
            "HERALD_FCM_ENDPOINT": fcm.url, "HERALD_INBOX_SYNC_PUSH_INTERVAL": "5", "HERALD_STREAM_HEARTBEAT": "300",
        ]
        let herald = try await RunningHerald(arguments: [], environment: environment, in: directory)
        defer { herald.process.signal(SIGKILL) }
        let backend = CardSyncTests.Client(base: herald.url, token: admin)

        // Each device signs in as Ada with the backend's proof, and registers its FCM token.
        let proof = try await runCommand(Binaries.path("herald"), ["user-token", "--user", "ada"], environment: environment, in: directory)
        #expect(proof.status == 0, "\(proof.stderr)")
        var devices: [String: CardSyncTests.Client] = [:]
        var tokens: [String: String] = [:]
        for name in ["phone", "tablet"] {
            let (status, answer) = try await CardSyncTests.Client(base: herald.url, token: "").call(
                .POST, "/api/auth/device",
                json: ["device_id": name, "platform": "android", "proof": proof.stdout.trimmingCharacters(in: .whitespacesAndNewlines)])
            #expect(status == 200, "\(answer)")
            let token = answer["token"] as? String ?? ""
            tokens[name] = token
            devices[name] = CardSyncTests.Client(base: herald.url, token: token)
            #expect(try await devices[name]?.call(.POST, "/api/notifications/register", json: ["fcm_token": "\(name)-token"]).0 == 200)
        }
        let phone = try #require(devices["phone"])

        // The tablet holds a stream, as an app in the foreground does.
        let streamOutput = try OutputCollector()
        let curl = makeProcess(
            "/usr/bin/curl", ["-N", "-s", "-H", "Authorization: Bearer \(tokens["tablet"] ?? "")", herald.url + "/api/stream"],
            environment: [:], in: directory, collecting: streamOutput)
        try curl.run()
        defer { curl.terminate() }
        func inboxEvents() -> [[String: Any]] {
            streamOutput.stdout.components(separatedBy: "\n\n").compactMap { event in
                guard event.contains("event: inbox\n"), let line = event.split(separator: "\n").first(where: { $0.hasPrefix("data: ") }) else { return nil }
                return (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))) as? [String: Any]
            }
        }
        func messages() async throws -> [[String: Any]] {
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(fcm.url)/emulator/messages"), timeout: .seconds(10))
            let body = try JSONSerialization.jsonObject(with: Data(try await response.body.collect(upTo: 1 << 22).readableBytesView)) as? [String: Any]
            return ((body?["requests"] as? [[String: Any]]) ?? []).compactMap { ($0["request"] as? [String: Any])?["message"] as? [String: Any] }
        }
        func waitUntil(_ condition: () async throws -> Bool) async throws -> Bool {
            for _ in 0..<200 {
                if try await condition() { return true }
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }
        #expect(try await waitUntil { inboxEvents().count == 1 }, "an inbox event at connect: \(streamOutput.stdout)")
        #expect(inboxEvents().first?["unread"] as? Int == 0)

        // Two alerts: each carries the unread count when it was sent.
        var sent: [String] = []
        for (index, title) in ["First", "Second"].enumerated() {
            let (status, answer) = try await backend.call(.POST, "/api/notifications", json: ["type": "comment", "title": title, "user_ids": ["ada"]])
            #expect(status == 202)
            sent.append(answer["id"] as? String ?? "")
            #expect(try await waitUntil { try await messages().count == 2 * (index + 1) }, "both devices get the alert")
        }
        let alerts = try await messages()
        let badges = alerts.map { (($0["android"] as? [String: Any])?["notification"] as? [String: Any])?["notification_count"] as? Int }
        #expect(badges == [1, 1, 2, 2], "the badge is the unread count: \(alerts)")
        #expect(try await waitUntil { inboxEvents().last?["unread"] as? Int == 2 }, "the stream's counts follow new items")

        // The phone reads the first: the answer, the tablet's stream and a silent push to it only.
        let (status, counts) = try await phone.call(.POST, "/api/inbox/mark", json: ["ids": [sent[0]], "change": "read"])
        #expect(status == 200, "\(counts)")
        #expect(counts["unread"] as? Int == 1)
        #expect(try await waitUntil { inboxEvents().last?["unread"] as? Int == 1 }, "the tablet's stream hears of it: \(streamOutput.stdout)")
        #expect(try await waitUntil { try await messages().count == 5 }, "one sync push")
        let sync = try #require(try await messages().last)
        #expect(sync["token"] as? String == "tablet-token", "the device that read it knows already")
        #expect(sync["notification"] == nil, "silent: data only")
        let data = sync["data"] as? [String: String]
        #expect(data?["type"] == "inbox" && data?["unread"] == "1", "\(sync)")

        // A burst of changes is one push per device once the interval (5 s) since the last has
        // passed, carrying the count then.
        _ = try await phone.call(.POST, "/api/inbox/mark", json: ["all": true, "change": "seen"])
        _ = try await phone.call(.POST, "/api/inbox/mark", json: ["ids": [sent[1]], "change": "archived"])
        #expect(try await waitUntil { try await messages().count == 6 })
        try await Task.sleep(for: .milliseconds(1_000))
        let final = try await messages()
        #expect(final.count == 6, "coalesced: \(final.count - 5) sync pushes for two changes")
        #expect((final.last?["data"] as? [String: String])?["unread"] == "0", "the count when it was sent")

        curl.terminate()
        await herald.expectCleanStop()
        _ = await fcm.stop()
    }
}
