import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Herald and each provider's emulator as separate processes: a user with an FCM device and a
/// Web Push device gets exactly one push on each, each in its provider's format, and a gone
/// subscription is removed from that provider only.
@Suite struct MultiProviderTests {
    func json(_ url: String) async throws -> Any? {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        return try JSONSerialization.jsonObject(with: Data(try await response.body.collect(upTo: 1 << 22).readableBytesView))
    }

    @Test func oneUserOnePushPerProviderEachInItsFormat() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-providers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let account = directory.appendingPathComponent("fcm.json").path
        let subscriptionFile = directory.appendingPathComponent("subscription.json").path
        let fcm = try await RunningHerald(command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let webPush = try await RunningHerald(
            command: "webpush-emulator", banner: "Web Push emulator listening on", arguments: ["--write-subscription", subscriptionFile], in: directory
        )
        let vapid = try await runCommand(Binaries.path("herald"), ["vapid", "generate"], in: directory)
        let privateKey = try #require(vapid.stdout.split(separator: "\n").first { $0.hasPrefix("private_key: ") }.map { String($0.dropFirst(13)) })
        let admin = "hk_" + String(repeating: "m", count: 40)
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: [
                "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": fcm.url,
                "HERALD_SINKS_INSTANCES": "webpush", "HERALD_SINKS_WEBPUSH_TYPE": "webpush", "HERALD_SINKS_WEBPUSH_VAPID_PRIVATE_KEY": privateKey,
                "HERALD_SINKS_WEBPUSH_SUBJECT": "mailto:ops@example.com",
            ],
            in: directory
        )
        let subscription = try String(contentsOfFile: subscriptionFile, encoding: .utf8)
        let gone = try #require(try await {
            var request = HTTPClientRequest(url: "\(webPush.url)/emulator/subscriptions?name=gone-1")
            request.method = .POST
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            return String(buffer: try await response.body.collect(upTo: 1 << 16))
        }())
        for body in [#"{"fcm_token":"phone-1"}"#, "{\"web_push\": \(subscription)}", "{\"web_push\": \(gone)}"] {
            let (status, answer) = try await LoadHarness.request(.POST, "\(herald.url)/api/notifications/register", key: admin, user: "zoe", body: body)
            #expect(status == 200, "\(answer)")
        }
        let (status, sent) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"comment","title":"Hi Zoe","body":"A reply","url":"/posts/7","user_ids":["zoe"]}"#
        )
        #expect(status == 202)
        let id = try #require(sent["id"] as? String)
        // Wait on the outcome: every push delivery finished.
        let deadline = ContinuousClock.now + .seconds(20)
        var states: [String] = []
        while ContinuousClock.now < deadline {
            let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(id)", key: admin)
            states = ((detail["deliveries"] as? [[String: Any]]) ?? []).filter { $0["sink"] as? String != "history" }.compactMap { $0["state"] as? String }
            if states.count == 3 && !states.contains("pending") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(states.sorted() == ["delivered", "delivered", "failed"], "FCM and the live subscription delivered, the gone one failed: \(states)")
        // FCM got one message in its format.
        let fcmMessages = ((try await json("\(fcm.url)/emulator/messages") as? [String: Any])?["requests"] as? [[String: Any]] ?? [])
            .compactMap { ($0["request"] as? [String: Any])?["message"] as? [String: Any] }
        #expect(fcmMessages.count == 1)
        #expect(fcmMessages.first?["token"] as? String == "phone-1")
        #expect((fcmMessages.first?["notification"] as? [String: String])?["title"] == "Hi Zoe")
        // The browser got one decrypted message in Web Push's format.
        let pushes = (try await json("\(webPush.url)/emulator/messages") as? [[String: Any]]) ?? []
        let delivered = pushes.filter { $0["status"] as? Int == 201 }
        #expect(delivered.count == 1 && delivered.first?["subscription"] as? String == "browser-1")
        let payload = try #require((delivered.first?["plaintext"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(payload["title"] as? String == "Hi Zoe" && payload["id"] as? String == id)
        // The gone subscription is removed, from Web Push only: the next notification goes to
        // the FCM device and the live subscription, and nothing else.
        let (_, again) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"comment","title":"Again","body":"b","user_ids":["zoe"]}"#
        )
        let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(again["id"] as? String ?? "")", key: admin)
        let sinks = ((detail["deliveries"] as? [[String: Any]]) ?? []).compactMap { $0["sink"] as? String }.sorted()
        #expect(sinks == ["fcm", "history", "webpush"], "\(sinks)")
        #expect(await herald.stop() == 0)
        _ = await fcm.stop()
        _ = await webPush.stop()
    }
}
