import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// Examples/HeraldPhone, the command-line device built on HeraldKit, against the real herald:
/// it signs up, registers, shows the feed message meant for its region, swipes the cards the
/// backend ranked for it, uploads what it queued, and prints a push from the live stream.
/// `scripts/test` builds it into the shared build folder.
@Suite(.cleansUp) struct HeraldPhoneTests {
    static var binary: String { Binaries.path("herald-phone") }
    static let admin = "hk_" + String(repeating: "d", count: 40)

    @Test func aCommandLineDeviceDoesEachSeedsFlow() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.binary),
            "build the example first: swift build --package-path Examples/HeraldPhone --scratch-path .build (scripts/test does)")
        let directory = try TestResources.temporaryDirectory("herald-phone")
        let herald = try await RunningHerald(
            arguments: ["--database", "sqlite:" + directory.appendingPathComponent("h.sqlite").path],
            environment: [
                "HERALD_AUTH_DEVICE_SIGN_UP": "true", "HERALD_USER_TOKEN_SECRET": "herald-phone-test-user-token-secret-0123",
                "HERALD_SINKS_CONSOLE_ENABLED": "true", "HERALD_BOOTSTRAP_ADMIN_KEY": Self.admin,
            ], in: directory)
        let state = directory.appendingPathComponent("phone").path
        let phone = ["--server", herald.url, "--state", state, "--region", "qc", "--app-version", "2.1"]

        // Bad arguments are refused, naming the option, before anything is sent.
        for (arguments, said) in [(["--swipes", "-1"], "--swipes"), (["--server", "not a url"], "--server")] {
            let refused = try await runCommand(Self.binary, ["--state", state] + arguments, in: directory, timeout: .seconds(30))
            #expect(refused.status == 64 && refused.stderr.contains(said), "\(refused.status) \(refused.stderr)")
        }

        // First run: signs up and registers; nothing to show yet.
        let first = try await runCommand(Self.binary, phone + ["--fcm-token", "phone-token", "--listen", "0"], in: directory, timeout: .seconds(60))
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        let user = try #require(first.stdout.firstMatch(of: /signed in as (dev_[0-9a-f]+)/).map { String($0.1) }, "\(first.stdout)")
        #expect(first.stdout.contains("registered FCM token phone-token"))
        #expect(first.stdout.contains("feed: nothing to show"))

        // The backend ranks cards for the user; an admin posts feed messages for two regions.
        for (card, score) in [("c1", 0.9), ("c2", 0.4)] {
            let (status, _) = try await LoadHarness.request(
                .PUT, "\(herald.url)/api/cards/\(card)", key: Self.admin, body: #"{"metadata":{},"posted_at":"2026-11-01T00:00:00Z","hot":\#(score)}"#)
            #expect(status == 201)
        }
        let (scored, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/pool/scores", key: Self.admin, body: #"{"timestamp":1,"users":{"\#(user)":{"c1":0.9,"c2":0.4}}}"#)
        #expect(scored == 200)
        let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3_600))
        for (title, region) in [("For Quebec", "QC"), ("For Ontario", "ON")] {
            let (status, _) = try await LoadHarness.request(
                .POST, "\(herald.url)/api/feed/messages", key: Self.admin,
                body: #"{"title":"\#(title)","body":"b","expires_at":"\#(expires)","priority":1,"target_regions":["\#(region)"],"target_version":">=2"}"#)
            #expect(status == 201)
        }

        // Second run: the feed message for its region, two swipes, and a push while it listens.
        let output = try OutputCollector()
        let process = makeProcess(Self.binary, phone + ["--swipes", "2", "--listen", "20"], environment: [:], in: directory, collecting: output)
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while !output.stdout.contains("stream: connected"), process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let (sent, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: Self.admin, body: #"{"type":"message","title":"Hello phone","user_ids":["\#(user)"]}"#)
        #expect(sent == 202)
        while !output.stdout.contains("push: Hello phone"), process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        process.terminate()
        _ = await process.waitForExit()
        let text = output.stdout
        #expect(text.contains("feed: For Quebec — b"), "\(text)")
        #expect(text.contains("swiped card c1") && text.contains("swiped card c2"), "\(text)")
        #expect(text.contains("uploaded 4, waiting 0, refused 0"), "two seen reports and two reactions: \(text)")
        #expect(text.contains("push: Hello phone"), "\(text)\(output.stderr)")

        // Herald has the swipes: the user's history holds both cards.
        let (_, pulled) = try await LoadHarness.request(.GET, "\(herald.url)/api/pull", key: Self.admin, user: user)
        #expect(((pulled["history"] as? [[String: Any]]) ?? []).compactMap { $0["card"] as? String } == ["c1", "c2"])
        await herald.expectCleanStop()
    }
}
