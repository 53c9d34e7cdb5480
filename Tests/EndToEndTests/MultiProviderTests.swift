import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing

/// Herald and each provider's emulator as separate processes: a user with an FCM, an APNs and a
/// Web Push device gets exactly one push on each, each in its provider's format; a gone
/// subscription is removed from that provider only; quiet hours turn the APNs alert into a
/// background push.
@Suite(.cleansUp) struct MultiProviderTests {
    func json(_ url: String, client: HTTPClient = .shared) async throws -> Any? {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        return try JSONSerialization.jsonObject(with: Data(try await response.body.collect(upTo: 1 << 22).readableBytesView))
    }

    @Test func oneUserOnePushPerProviderEachInItsFormat() async throws {
        let directory = try TestResources.temporaryDirectory("herald-providers")
        let account = directory.appendingPathComponent("fcm.json").path
        let subscriptionFile = directory.appendingPathComponent("subscription.json").path
        let fcm = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let webPush = try await RunningHerald(
            command: "webpush-emulator", banner: "Web Push emulator listening on", arguments: ["--write-subscription", subscriptionFile], in: directory
        )
        let ca = directory.appendingPathComponent("apns-ca.pem").path
        let p8 = directory.appendingPathComponent("apns-key.p8").path
        let apns = try await RunningHerald(
            command: "apns-emulator", banner: "APNs emulator listening on", arguments: ["--write-ca", ca, "--write-key", p8], in: directory)
        let apnsURL = "https://127.0.0.1:\(apns.port)"
        // The emulator's own pages are TLS too: a client that trusts its certificate.
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(ca)]
        var trustingConfiguration = HTTPClient.Configuration()
        trustingConfiguration.tlsConfiguration = tls
        let trusting = HTTPClient(eventLoopGroupProvider: .singleton, configuration: trustingConfiguration)
        defer { Task { try? await trusting.shutdown() } }
        let vapid = try await runCommand(Binaries.path("herald"), ["vapid", "generate"], in: directory)
        let privateKey = try #require(vapid.stdout.split(separator: "\n").first { $0.hasPrefix("private_key: ") }.map { String($0.dropFirst(13)) })
        let admin = "hk_" + String(repeating: "m", count: 40)
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: [
                "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": fcm.url,
                "HERALD_SINKS_INSTANCES": "webpush,apns", "HERALD_SINKS_WEBPUSH_TYPE": "webpush", "HERALD_SINKS_WEBPUSH_VAPID_PRIVATE_KEY": privateKey,
                "HERALD_SINKS_WEBPUSH_SUBJECT": "mailto:ops@example.com", "HERALD_SINKS_WEBPUSH_ALLOW_PRIVATE_ENDPOINTS": "true",
                "HERALD_SINKS_APNS_TYPE": "apns", "HERALD_SINKS_APNS_KEY_FILE": p8,
                "HERALD_SINKS_APNS_KEY_ID": "HERALDKEY1", "HERALD_SINKS_APNS_TEAM_ID": "HERALDTEAM", "HERALD_SINKS_APNS_TOPIC": "com.example.herald",
                "HERALD_SINKS_APNS_CA_FILE": ca, "HERALD_SINKS_APNS_PRODUCTION_ENDPOINT": apnsURL, "HERALD_SINKS_APNS_SANDBOX_ENDPOINT": apnsURL,
            ],
            in: directory
        )
        let subscription = try String(contentsOfFile: subscriptionFile, encoding: .utf8)
        let gone = try #require(
            try await {
                var request = HTTPClientRequest(url: "\(webPush.url)/emulator/subscriptions?name=gone-1")
                request.method = .POST
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                return String(buffer: try await response.body.collect(upTo: 1 << 16))
            }())
        for body in [
            #"{"fcm_token":"phone-1"}"#, #"{"apns_token":"ab12cd","apns_environment":"sandbox"}"#, "{\"web_push\": \(subscription)}", "{\"web_push\": \(gone)}",
        ] {
            let (status, answer) = try await LoadHarness.request(.POST, "\(herald.url)/api/notifications/register", key: admin, user: "zoe", body: body)
            #expect(status == 200, "\(answer)")
        }
        let (status, sent) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin,
            body: #"{"type":"comment","title":"Hi Zoe","body":"A reply","url":"/posts/7","user_ids":["zoe"]}"#
        )
        #expect(status == 202)
        let id = try #require(sent["id"] as? String)
        // Wait on the outcome: every push delivery finished.
        let deadline = ContinuousClock.now + .seconds(20)
        var states: [String] = []
        while ContinuousClock.now < deadline {
            let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(id)", key: admin)
            states = ((detail["deliveries"] as? [[String: Any]]) ?? []).filter { $0["sink"] as? String != "history" }.compactMap { $0["state"] as? String }
            if states.count == 4 && !states.contains("pending") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(
            states.sorted() == ["delivered", "delivered", "delivered", "failed"],
            "FCM, APNs and the live subscription delivered, the gone one failed: \(states)")
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
        let payload = try #require(
            (delivered.first?["plaintext"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(payload["title"] as? String == "Hi Zoe" && payload["id"] as? String == id)
        // APNs got one alert in Apple's shape.
        let apnsMessages = ((try await json("\(apnsURL)/emulator/messages", client: trusting)) as? [[String: Any]]) ?? []
        #expect(apnsMessages.count == 1 && apnsMessages.first?["token"] as? String == "ab12cd")
        let aps = ((apnsMessages.first?["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect((aps?["alert"] as? [String: String])?["title"] == "Hi Zoe")
        #expect((apnsMessages.first?["headers"] as? [String: String])?["apns-push-type"] == "alert")
        // The gone subscription is removed, from Web Push only: the next notification goes to
        // the FCM device, the APNs device and the live subscription, and nothing else.
        let (_, again) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"comment","title":"Again","body":"b","user_ids":["zoe"]}"#
        )
        let (_, detail) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(again["id"] as? String ?? "")", key: admin)
        let sinks = ((detail["deliveries"] as? [[String: Any]]) ?? []).compactMap { $0["sink"] as? String }.sorted()
        #expect(sinks == ["apns", "fcm", "history", "webpush"], "\(sinks)")
        // Quiet hours all day: the APNs alert arrives as a background push.
        let (patched, _) = try await LoadHarness.request(
            .PATCH, "\(herald.url)/api/notifications/settings", key: admin, user: "zoe", body: #"{"quiet_hours":{"start":"00:00","end":"23:59","tz":"UTC"}}"#
        )
        #expect(patched == 200)
        _ = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: admin, body: #"{"type":"comment","title":"Shh","body":"b","user_ids":["zoe"]}"#)
        var quiet: [String: Any]?
        let quietDeadline = ContinuousClock.now + .seconds(20)
        while quiet == nil && ContinuousClock.now < quietDeadline {
            let messages = ((try await json("\(apnsURL)/emulator/messages", client: trusting)) as? [[String: Any]]) ?? []
            quiet = messages.first { (($0["payload"] as? [String: Any])?["title"] as? String) == "Shh" }
            try await Task.sleep(for: .milliseconds(50))
        }
        let quietHeaders = try #require(quiet?["headers"] as? [String: String], "the quiet-hours push reached APNs")
        #expect(quietHeaders["apns-push-type"] == "background" && quietHeaders["apns-priority"] == "5")
        await herald.expectCleanStop()
        _ = await fcm.stop()
        _ = await webPush.stop()
        _ = await apns.stop()
    }
}
