import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// Logs are for operators: one line per request and per delivery outcome, and never a secret.
@Suite(.serialized, .cleansUp) struct LogTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-logs")
    }

    @Test func aTraceLevelRunLogsRequestsAndOutcomesButNoSecret() async throws {
        let account = directory.appendingPathComponent("fcm.json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let generated = try await runCommand(Binaries.path("herald"), ["keys", "generate"], in: directory)
        let admin = try #require(generated.stdout.split(whereSeparator: \.isWhitespace).last.map(String.init))
        let userTokenSecret = "user-token-secret-\(UUID().uuidString)-\(UUID().uuidString)"
        let webhookSecret = "webhook-secret-\(UUID().uuidString)"
        let deviceToken = "device-token-\(UUID().uuidString)"
        let database = "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        let herald = try await RunningHerald(
            arguments: ["--database", database, "--log-level", "trace"],
            environment: [
                "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_USER_TOKEN_SECRET": userTokenSecret,
                "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url,
                // A webhook nobody listens to: its failures are logged, its secret must not be.
                "HERALD_SINKS_WEBHOOKS": "audit", "HERALD_SINKS_AUDIT_URL": "http://127.0.0.1:9/audit",
                "HERALD_SINKS_AUDIT_SECRET": webhookSecret, "HERALD_DELIVERY_BACKOFF": "0.1", "HERALD_DELIVERY_MAX_ATTEMPTS": "2",
            ],
            in: directory
        )

        let backend = try await LoadHarness.backendKey(database: database, in: directory)
        #expect(
            try await LoadHarness.request(
                .POST, "\(herald.url)/api/notifications/register", key: backend, user: "lena", body: "{\"fcm_token\":\"\(deviceToken)\"}"
            ).0 == 200)
        let (sent, sentBody) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: backend, body: "{\"type\":\"comment\",\"title\":\"hi\",\"user_ids\":[\"lena\"]}")
        #expect(sent == 202)
        let id = try #require(sentBody["id"] as? String)
        #expect(try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/history", key: "hk_wrong_key_\(UUID().uuidString)", user: "lena").0 == 401)
        // Wait for the push and for the webhook to give up.
        for _ in 0..<100 {
            let (_, status) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/\(id)", key: backend)
            let states = (status["deliveries"] as? [[String: Any]] ?? []).compactMap { $0["state"] as? String }
            if states.count == 3, !states.contains("pending") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        await herald.expectCleanStop()
        _ = await emulator.stop()

        let log = herald.output.stdout + herald.output.stderr
        let requestLines = log.split(separator: "\n").filter { $0.contains(" request") && $0.contains("hb.request.id=") }
        #expect(requestLines.contains { $0.contains("route=/api/notifications ") && $0.contains("status=202") && $0.contains("notification_id=\(id)") })
        #expect(log.split(separator: "\n").contains { $0.contains("delivery delivered") && $0.contains("notification_id=\(id)") && $0.contains("sink=fcm") })
        #expect(log.contains("sink=webhook:audit"), "the webhook's outcome is logged")

        let privateKey = try #require(
            (try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: account))) as? [String: Any])?["private_key"] as? String
        )
        let keyLines = privateKey.split(separator: "\n").filter { $0.count > 40 }.map(String.init)
        var secrets = [
            "admin key": admin, "backend key": backend, "user token secret": userTokenSecret, "webhook secret": webhookSecret, "device token": deviceToken,
        ]
        for (index, line) in keyLines.enumerated() { secrets["private key line \(index)"] = line }
        for (name, secret) in secrets {
            #expect(!log.contains(secret), "the \(name) appears in the log")
        }
    }

    /// `--log-level` reaches PostgreSQL's connection pool too: a server that cannot reach its
    /// database logged each failed connection at info whatever the level, and a command-line
    /// tool did the same on standard error around its one line of error.
    @Test func theLogLevelAppliesToThePostgreSQLPoolsLines() async throws {
        for command in [["serve", "--port", "0"], ["keys", "list"]] {
            let result = try await runCommand(
                Binaries.path("herald"), command + ["--log-level", "error", "--database", "postgres://herald:s3cret@127.0.0.1:1/herald"], in: directory,
                timeout: .seconds(60))
            #expect(result.status == 1, "\(command): \(result.stderr)")
            // serve migrates first; the admin commands first look for Herald's tables.
            #expect(
                result.stderr.contains("herald: error: cannot migrate PostgreSQL") || result.stderr.contains("herald: error: cannot read PostgreSQL"),
                "\(command): \(result.stderr)")
            let belowError = result.stderr.split(separator: "\n").filter { $0.contains(" info ") || $0.contains(" notice ") || $0.contains(" warning ") }
            #expect(belowError.isEmpty, "\(command): \(belowError.prefix(3))")
            #expect(!result.stderr.contains("s3cret"), "\(command)")
        }
    }
}
