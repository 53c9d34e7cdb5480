import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing

/// The real `herald` binary on a free port, driven by the real `notifsim`, over loopback HTTP.
@Suite(.serialized, .cleansUp) struct EndToEndTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-e2e")
    }

    var database: String { "sqlite:" + directory.appendingPathComponent("herald.sqlite").path }

    func createKey(_ role: String) async throws -> String {
        let result = try await runCommand(Binaries.path("herald"), ["keys", "create", "--role", role, "--name", "e2e", "--database", database], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let key = try #require(result.stdout.split(whereSeparator: \.isWhitespace).last.map(String.init))
        #expect(key.hasPrefix("hk_"))
        return key
    }

    /// How many history items `user` has (at most 200), asked until there are `expected` or
    /// five seconds pass.
    func historyCount(at herald: RunningHerald, key: String, user: String, awaiting expected: Int) async throws -> Int {
        var count = 0
        for _ in 0..<50 {
            let page = try await get("\(herald.url)/api/notifications/history?limit=200", key: key, user: user)
            count = (page["history"] as? [Any])?.count ?? 0
            if count == expected { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return count
    }

    func get(_ url: String, key: String, user: String) async throws -> [String: Any] {
        try await LoadHarness.request(.GET, url, key: key, user: user).1
    }

    /// An argument or a `HERALD_*` variable whose bytes are not UTF-8 is refused before it is
    /// read as text: Swift would read `Jos\xE9` (Latin-1) as the user `Jos\u{FFFD}`, and a
    /// key's name the same way. A shell writes the bytes, as Swift's strings cannot hold them.
    @Test func commandLineBytesThatAreNotUTF8AreRefusedNotReplaced() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database], environment: ["HERALD_METRICS_PUBLIC": "true"], in: directory)
        let notifsim = Binaries.path("notifsim")
        let runs = [
            ("argument", #"exec "$0" -u "$(printf 'Jos\351')" --url "$1" --key "$2""#),
            ("environment", #"HERALD_NOTIFSIM_USER="$(printf 'Jos\351')" exec "$0" --url "$1" --key "$2""#),
        ]
        for (what, script) in runs {
            let run = try await runCommand("/bin/sh", ["-c", script, notifsim, herald.url, key], in: directory)
            #expect(run.status == 64 && run.stderr.contains("not UTF-8"), "\(what): \(run.status) \(run.stdout) \(run.stderr)")
        }
        // Nothing was sent, to anyone (the user `Jos\u{FFFD}` cannot even be named in X-User-ID).
        let metrics = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(herald.url)/metrics"), timeout: .seconds(10))
        #expect(metrics.status == .ok)
        let text = String(buffer: try await metrics.body.collect(upTo: 1 << 20))
        #expect(text.contains("# TYPE") && !text.contains("herald_notifications_accepted_total{"), "nothing accepted")
        await herald.expectCleanStop()

        let named = try await runCommand(
            "/bin/sh", ["-c", #"exec "$0" keys create --role backend --name "$(printf 'caf\351')" --database "$1""#, Binaries.path("herald"), database],
            in: directory)
        #expect(named.status == 64 && named.stderr.contains("argument"), "\(named.stderr)")
        let list = try await runCommand(Binaries.path("herald"), ["keys", "list", "--database", database], in: directory)
        // By the name column: "caf" is hex, and a key id held it once (6b09cc1548ccaf…).
        let names = list.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
            .compactMap { $0.count > 2 ? String($0[2]) : nil }
        #expect(list.status == 0 && names == ["e2e"], "no key named caf\u{FFFD}: \(list.stdout)")
    }

    /// The console sink's line for a push reaches a file (or a pipe, a container's log) while
    /// Herald runs: through `print` it waited in a block buffer until kilobytes more came or the
    /// process exited.
    @Test func consoleSinkLinesReachAFileAsPushesHappen() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database], environment: ["HERALD_SINKS_CONSOLE_ENABLED": "true"], in: directory)
        let (registered, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications/register", key: key, user: "watched", body: #"{"fcm_token":"console-token"}"#)
        #expect(registered == 200)
        let (sent, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: key, body: #"{"type":"generic","title":"Seen at once","user_ids":["watched"]}"#)
        #expect(sent == 202)
        var line: Substring?
        for _ in 0..<100 {
            line = herald.output.stdout.split(separator: "\n").first { $0.hasPrefix("[console]") }
            if line != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(line?.contains("user watched") == true && line?.contains("\"Seen at once\"") == true, "stdout: \(herald.output.stdout)")
        await herald.expectCleanStop()
    }

    @Test func notifsimSendsAndTheItemAppearsInHistory() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database, "--public-base-url", "https://pong.example"], in: directory)
        let user = "62cc403b99efc110a9a73a55"

        let sent = try await runCommand(Binaries.path("notifsim"), ["-u", user, "-t", "generic", "-r", "/", "--url", herald.url, "--key", key], in: directory)
        #expect(sent.status == 0, "\(sent.stderr)")
        let id = try #require(sent.stdout.split(separator: "\n").first.map(String.init))
        #expect(id.range(of: "^[0-9a-f]{24}$", options: .regularExpression) != nil, "first line is the id: \(sent.stdout)")
        #expect(sent.stdout.contains("history: delivered 1"), "\(sent.stdout)")

        let history = try await get("\(herald.url)/api/notifications/history", key: key, user: user)
        let item = try #require((history["history"] as? [[String: Any]])?.first)
        let data = try #require(item["data"] as? [String: Any])
        #expect(data["id"] as? String == id)
        #expect(data["url"] as? String == "https://pong.example/")
        #expect(data["type"] as? String == "generic")

        // The key given through the environment works the same.
        let viaEnv = try await runCommand(
            Binaries.path("notifsim"), ["-u", user, "-t", "hot", "-n", "Hot now", "--url", herald.url], environment: ["HERALD_API_KEY": key], in: directory)
        #expect(viaEnv.status == 0, "\(viaEnv.stderr)")

        await herald.expectCleanStop()

        let sinks = try await runCommand(Binaries.path("herald"), ["sinks", "--database", database], in: directory)
        #expect(sinks.status == 0, "\(sinks.stderr)")
        let historyRow = try #require(sinks.stdout.split(separator: "\n").first { $0.hasPrefix("history") })
        #expect(historyRow.split(separator: " ", omittingEmptySubsequences: true).contains("2"), "two delivered to history: \(historyRow)")
    }

    /// Registers `tokens` (two) for `user`, then sends them a message with notifsim, which waits
    /// for both pushes. - Returns: notifsim's run.
    func messageTwoDevices(of user: String, tokens: [String], title: String, at herald: RunningHerald, key: String) async throws -> CommandResult {
        for token in tokens {
            let (status, _) = try await LoadHarness.request(
                .POST, "\(herald.url)/api/notifications/register", key: key, user: user, body: "{\"fcm_token\":\"\(token)\"}")
            #expect(status == 200)
        }
        let sent = try await runCommand(
            Binaries.path("notifsim"), ["-u", user, "-t", "message", "-n", title, "--url", herald.url, "--key", key], in: directory)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stdout.contains("fcm: delivered 2"), "\(sent.stdout)")
        return sent
    }

    @Test func pushesThroughTheFCMEmulatorProcess() async throws {
        let account = directory.appendingPathComponent("fcm-emulator.json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let key = try await createKey("backend")
        let herald = try await RunningHerald(
            arguments: ["--database", database],
            environment: ["HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url, "HERALD_METRICS_PUBLIC": "true"], in: directory
        )
        let sent = try await messageTwoDevices(of: "zoe", tokens: ["phone-token", "tablet-token"], title: "New message", at: herald, key: key)
        let id = String(sent.stdout.prefix(24))
        let inspection = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(emulator.url)/emulator/messages"), timeout: .seconds(10))
        let body = try JSONSerialization.jsonObject(with: Data(try await inspection.body.collect(upTo: 1 << 20).readableBytesView)) as? [String: Any]
        let requests = (body?["requests"] as? [[String: Any]]) ?? []
        let messages = requests.compactMap { ($0["request"] as? [String: Any])?["message"] as? [String: Any] }
        #expect(Set(messages.compactMap { $0["token"] as? String }) == ["phone-token", "tablet-token"])
        #expect(messages.allSatisfy { ($0["data"] as? [String: String])?["id"] == id })
        #expect(body?["token_requests"] as? Int == 1)
        #expect(emulator.output.stdout.contains("message #1 to token phone-token"), "the emulator prints each message")
        // The process's own metrics saw the same traffic.
        let scrape = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(herald.url)/metrics"), timeout: .seconds(10))
        let metrics = String(buffer: try await scrape.body.collect(upTo: 1 << 22))
        #expect(metrics.contains("herald_fcm_token_refreshes_total{sink=\"fcm\"} 1"), "\(metrics)")
        #expect(metrics.contains("herald_deliveries_total{sink=\"fcm\",outcome=\"delivered\"} 2"))
        #expect(metrics.contains("herald_notifications_accepted_total{type=\"message\",target=\"user_ids\"} 1"))
        _ = await herald.stop()
        _ = await emulator.stop()
    }

    /// The documented HTTP/2 set-up: `fcm-emulator --tls --write-ca` and Herald trusting that
    /// certificate through HERALD_FCM_CA_FILE; the emulator sees every send as an HTTP/2 stream.
    @Test func pushesOverHTTP2ToTheTLSEmulator() async throws {
        let account = directory.appendingPathComponent("fcm-tls.json").path
        let ca = directory.appendingPathComponent("fcm-ca.pem").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on https://", arguments: ["--tls", "--write-ca", ca, "--write-service-account", account],
            in: directory)
        let endpoint = "https://127.0.0.1:\(emulator.port)"
        let key = try await createKey("backend")
        let herald = try await RunningHerald(
            arguments: ["--database", database],
            environment: ["HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": endpoint, "HERALD_FCM_CA_FILE": ca], in: directory
        )
        _ = try await messageTwoDevices(of: "yan", tokens: ["h2-phone", "h2-tablet"], title: "Over HTTP/2", at: herald, key: key)
        var configuration = HTTPClient.Configuration()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(ca)]
        configuration.tlsConfiguration = tls
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        TestResources.register { try? await client.shutdown() }
        let stats = try await client.execute(HTTPClientRequest(url: "\(endpoint)/emulator/stats"), timeout: .seconds(10))
        let body = try JSONSerialization.jsonObject(with: Data(try await stats.body.collect(upTo: 1 << 16).readableBytesView)) as? [String: Any]
        #expect(body?["delivered"] as? Int == 2)
        #expect(body?["requests_by_http_version"] as? [String: Int] == ["2": 2], "\(body ?? [:])")
        #expect(body?["send_connections"] as? Int == 1)
        await herald.expectCleanStop()
        _ = await emulator.stop()
    }

    /// A certificate to write needs a certificate to serve: `--write-ca` without `--tls` is refused
    /// before anything listens.
    @Test func theEmulatorRefusesWriteCAWithoutTLS() async throws {
        let ca = directory.appendingPathComponent("no-tls-ca.pem").path
        let run = try await runCommand(
            Binaries.path("herald"), ["fcm-emulator", "--port", "0", "--write-ca", ca], in: directory, timeout: .seconds(30))
        #expect(run.status != 0)
        #expect(run.stderr.contains("--write-ca needs --tls"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: ca))
    }

    /// The app team's documented commands: the user from HERALD_NOTIFSIM_USER, the resource from
    /// the type and --id, and --dry-run asking FCM to validate (validate_only) without sending.
    @Test func notifsimDryRunValidatesWithFCMAndSendsNothing() async throws {
        let account = directory.appendingPathComponent("fcm-dry.json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let key = try await createKey("backend")
        let herald = try await RunningHerald(
            arguments: ["--database", database], environment: ["HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url], in: directory
        )
        for (user, token) in [("dev", "good-token"), ("broken", "invalid-token")] {
            let (status, _) = try await LoadHarness.request(
                .POST, "\(herald.url)/api/notifications/register", key: key, user: user, body: "{\"fcm_token\":\"\(token)\"}")
            #expect(status == 200)
        }
        let environment = ["HERALD_NOTIFSIM_USER": "dev", "HERALD_API_KEY": key, "HERALD_URL": herald.url]
        let dry = try await runCommand(
            Binaries.path("notifsim"), ["-t", "comment", "--id", "DKJW", "-n", "New comment", "--dry-run"], environment: environment, in: directory)
        #expect(dry.status == 0, "\(dry.stdout)\(dry.stderr)")
        #expect(dry.stdout.contains("nothing was stored or sent") && dry.stdout.contains("fcm provider: valid"), "\(dry.stdout)")
        #expect(dry.stdout.contains("fcm: dev device"), "\(dry.stdout)")
        let refused = try await runCommand(Binaries.path("notifsim"), ["-u", "broken", "-t", "generic", "--dry-run"], environment: environment, in: directory)
        #expect(refused.status != 0 && refused.stdout.contains("fcm provider: invalid"), "\(refused.stdout)")

        let inspection = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(emulator.url)/emulator/messages"), timeout: .seconds(10))
        let body = try JSONSerialization.jsonObject(with: Data(try await inspection.body.collect(upTo: 1 << 20).readableBytesView)) as? [String: Any]
        let requests = (body?["requests"] as? [[String: Any]]) ?? []
        #expect(requests.count == 2 && requests.allSatisfy { ($0["request"] as? [String: Any])?["validate_only"] as? Bool == true }, "\(requests)")
        let message = (requests.first?["request"] as? [String: Any])?["message"] as? [String: Any]
        #expect((message?["data"] as? [String: String])?["url"]?.hasSuffix("/posts/DKJW") == true, "the resource follows from the type and --id")
        let stats = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(emulator.url)/emulator/stats"), timeout: .seconds(10))
        let delivered =
            (try JSONSerialization.jsonObject(with: Data(try await stats.body.collect(upTo: 1 << 16).readableBytesView)) as? [String: Any])?["delivered"]
            as? Int
        #expect(delivered == 0, "a dry run delivers nothing")
        let (_, history) = try await LoadHarness.request(.GET, "\(herald.url)/api/notifications/history", key: key, user: "dev")
        #expect((history["history"] as? [Any])?.isEmpty == true, "and stores nothing")
        await herald.expectCleanStop()
        _ = await emulator.stop()
    }

    @Test func notifsimReportsServerErrorsAndExitsNonZero() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        let unknownType = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "-t", "bogus", "--url", herald.url, "--key", key], in: directory)
        #expect(unknownType.status != 0)
        #expect(unknownType.stderr.contains("unknown type 'bogus'"), "\(unknownType.stderr)")
        #expect(unknownType.stderr.contains("upvote, comment, hot"), "lists the valid types: \(unknownType.stderr)")

        let badKey = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "--url", herald.url, "--key", "hk_nope"], in: directory)
        #expect(badKey.status != 0)
        #expect(badKey.stderr.contains("401"), "\(badKey.stderr)")

        let noKey = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "--url", herald.url], in: directory)
        #expect(noKey.status != 0)
        #expect(noKey.stderr.contains("HERALD_API_KEY"), "\(noKey.stderr)")
        _ = await herald.stop()

        let unreachable = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "--url", herald.url, "--key", key], in: directory)
        #expect(unreachable.status != 0)
        #expect(unreachable.stderr.contains("cannot reach Herald"), "\(unreachable.stderr)")
        // In load mode too: one line naming the first error, the exit status, and no waiting out a
        // connect timeout per request (50 requests took 35 s).
        let started = ContinuousClock.now
        let unreachableLoad = try await runCommand(
            Binaries.path("notifsim"), ["-u", "u1", "--count", "50", "--url", herald.url, "--key", key], in: directory)
        #expect(unreachableLoad.status == 1 && unreachableLoad.stdout.contains("errors 50"), "\(unreachableLoad.stdout)")
        #expect(unreachableLoad.stderr.contains("notifsim: error: cannot reach Herald"), "\(unreachableLoad.stderr)")
        #expect(!unreachableLoad.stderr.contains("Error:"), "only notifsim's own line: \(unreachableLoad.stderr)")
        #expect(ContinuousClock.now - started < .seconds(20))

        // A rate whose interval a Duration cannot hold (1e-300 a second) once trapped notifsim.
        for rate in ["1e-300", "0", "nan", "inf"] {
            let run = try await runCommand(
                Binaries.path("notifsim"), ["-u", "u1", "--count", "2", "--rate", rate, "--url", herald.url, "--key", key], in: directory)
            #expect(run.status == 64 && run.stderr.contains("--rate"), "\(rate): \(run.status) \(run.stderr)")
        }
    }

    @Test func loadModeReportsThroughputAndEveryNotificationLands() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        let load = try await runCommand(
            Binaries.path("notifsim"), ["-u", "loaded", "-t", "comment", "--count", "150", "--concurrency", "16", "--url", herald.url, "--key", key],
            in: directory
        )
        #expect(load.status == 0, "\(load.stderr)")
        #expect(load.stdout.contains("sent 150 in"), "\(load.stdout)")
        #expect(load.stdout.contains("errors 0"))
        // Into a pipe, progress comes a line at a time, the final count last (no tick after it).
        let progress = load.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(!load.stderr.contains("\r") && progress.last == "" && progress.dropLast().last?.hasPrefix("sent 150/150 ") == true, "\(load.stderr)")
        let count = try await historyCount(at: herald, key: key, user: "loaded", awaiting: 150)
        #expect(count == 150)
        _ = await herald.stop()
    }

    /// Herald answers 503 with `Retry-After` when its group-commit queue is full
    /// (`server.max_pending_accepts`): nothing was stored, and notifsim sends it again after the
    /// wait rather than counting an error. Every one of them was an error.
    @Test func loadModeWaitsWhenHeraldAsksAndLosesNothing() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database], environment: ["HERALD_SERVER_MAX_PENDING_ACCEPTS": "1"], in: directory)
        let load = try await runCommand(
            Binaries.path("notifsim"), ["-u", "waited", "-t", "comment", "--count", "200", "--concurrency", "16", "--url", herald.url, "--key", key],
            in: directory
        )
        #expect(load.status == 0, "\(load.stdout) \(load.stderr)")
        #expect(load.stdout.contains("sent 200 in") && load.stdout.contains("errors 0"), "\(load.stdout)")
        // Sixteen in flight against a queue of one: some were asked to wait.
        #expect(load.stdout.contains("retried"), "\(load.stdout)")
        let count = try await historyCount(at: herald, key: key, user: "waited", awaiting: 200)
        #expect(count == 200, "each notification once")
        _ = await herald.stop()
    }

    /// `Retry-After` may be an HTTP-date (RFC 9110 §10.2.3): notifsim waits for it as for
    /// seconds (one long past is no wait), and gives up after its attempts.
    @Test func loadModeReadsARetryAfterDate() async throws {
        let busy = try await RawAnswerServer.start(
            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let load = try await runCommand(
            Binaries.path("notifsim"), ["-u", "dated", "-t", "comment", "--count", "2", "--url", busy.url, "--key", "hk_unused"], in: directory)
        #expect(load.status != 0)
        #expect(load.stdout.contains("errors 2") && load.stdout.contains("retried 14"), "\(load.stdout) \(load.stderr)")
        #expect(load.stderr.contains("HTTP 503, with no body"), "\(load.stderr)")
        try await busy.stop()
    }

    /// `herald users erase` does what `DELETE /api/users/{id}` does, for an operator with a
    /// ticket and no API key at hand; beside a running server, which then has nothing of theirs.
    @Test func usersCanBeErasedFromTheCommandLine() async throws {
        let key = try await createKey("backend")
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        for user in ["gone", "kept"] {
            let (registered, _) = try await LoadHarness.request(
                .POST, "\(herald.url)/api/notifications/register", key: key, user: user, body: "{\"fcm_token\":\"token-\(user)\"}")
            #expect(registered == 200)
        }
        let (sent, _) = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications", key: key, body: #"{"type":"generic","title":"T","user_ids":["gone","kept"]}"#)
        #expect(sent == 202)
        #expect(try await historyCount(at: herald, key: key, user: "gone", awaiting: 1) == 1)

        let erase = try await runCommand(Binaries.path("herald"), ["users", "erase", "gone", "--database", database], in: directory)
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(erase.stdout.contains("erased user gone: 1 devices, 0 subscriptions, 1 history items"), "\(erase.stdout)")
        #expect(try await historyCount(at: herald, key: key, user: "gone", awaiting: 0) == 0)
        #expect(try await historyCount(at: herald, key: key, user: "kept", awaiting: 1) == 1, "another user keeps theirs")
        let again = try await runCommand(Binaries.path("herald"), ["users", "erase", "gone", "--database", database], in: directory)
        #expect(again.status == 0 && again.stdout.contains("erased user gone: 0 devices"), "erasing twice is not an error: \(again.stdout)")

        for bad in ["", "two words"] {
            for command in ["erase", "sign-out"] {
                let refused = try await runCommand(Binaries.path("herald"), ["users", command, bad, "--database", database], in: directory)
                #expect(refused.status != 0 && refused.stderr.contains("'user id' must"), "\(command) '\(bad)': \(refused.stderr)")
            }
        }
        let signedOut = try await runCommand(Binaries.path("herald"), ["users", "sign-out", "kept", "--database", database], in: directory)
        #expect(signedOut.status == 0 && signedOut.stdout.contains("signed out user kept"), "\(signedOut.stderr)")
        await herald.expectCleanStop()
    }

    /// An admin subcommand pointed at a database that is not there (a mistyped path, the wrong
    /// working directory) made a new empty one and reported success: a key created where the
    /// server never looks, a user "erased" from nothing, sinks with nothing delivered. Listing,
    /// revoking, erasing and `herald sinks` now refuse and make no file; creating a key, which
    /// may come before the first `serve`, names the file it made.
    @Test func adminCommandsOnAMissingDatabaseSaySo() async throws {
        let missing = directory.appendingPathComponent("typo.sqlite").path
        for command in [["keys", "list"], ["keys", "revoke", "0123456789abcdef01234567"], ["users", "erase", "someone"], ["sinks"]] {
            let result = try await runCommand(Binaries.path("herald"), command + ["--database", "sqlite:\(missing)"], in: directory)
            #expect(result.status == 1, "\(command)")
            #expect(
                result.stderr
                    == "herald: error: there is no SQLite database at '\(missing)' (database, HERALD_DATABASE, --database); herald serve or herald migrate creates one\n",
                "\(command)")
            #expect(!FileManager.default.fileExists(atPath: missing), "\(command) made the file")
        }
        // The default path is relative to the working directory.
        let defaulted = try await runCommand(Binaries.path("herald"), ["keys", "list"], in: directory)
        #expect(
            defaulted.status == 1 && defaulted.stderr.contains("no SQLite database at '\(directory.appendingPathComponent("herald.sqlite").path)'"),
            "\(defaulted.stderr)")

        let created = try await runCommand(Binaries.path("herald"), ["keys", "create", "--role", "backend", "--database", "sqlite:\(missing)"], in: directory)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stderr == "herald: there was no database at '\(missing)'; created it\n")
        let listed = try await runCommand(Binaries.path("herald"), ["keys", "list", "--database", "sqlite:\(missing)"], in: directory)
        #expect(listed.status == 0 && listed.stderr.isEmpty && listed.stdout.contains("\tbackend\t"), "\(listed.stderr)")
        let migrated = try await runCommand(Binaries.path("herald"), ["migrate", "--database", "sqlite:\(missing)-2"], in: directory)
        #expect(migrated.status == 0 && migrated.stderr.isEmpty, "herald migrate creates without a word: \(migrated.stderr)")
    }

    /// The same commands pointed at a database that exists but is not Herald's (an empty file,
    /// another program's SQLite file, a PostgreSQL database with a mistyped name or the
    /// application's own) migrated it: Herald's tables created in it, and success reported.
    /// They refuse and leave it as it was; `keys create` names it and creates them.
    @Test func adminCommandsOnADatabaseThatIsNotHeraldsSaySo() async throws {
        let foreign = directory.appendingPathComponent("app.db").path
        let made = try await runCommand(
            "/usr/bin/env",
            ["python3", "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE orders (id)'); c.commit()", foreign],
            in: directory)
        try #require(made.status == 0, "\(made.stderr)")
        let empty = directory.appendingPathComponent("empty.sqlite").path
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let before = try Data(contentsOf: URL(fileURLWithPath: foreign))
        let commands = [["keys", "list"], ["keys", "revoke", "0123456789abcdef01234567"], ["users", "erase", "someone"], ["sinks"]]
        for path in [foreign, empty] {
            for command in commands {
                let result = try await runCommand(Binaries.path("herald"), command + ["--database", "sqlite:\(path)"], in: directory)
                #expect(result.status == 1, "\(command)")
                #expect(
                    result.stderr
                        == "herald: error: the database at '\(path)' holds no Herald tables: it is empty or another program's (database, HERALD_DATABASE, --database); herald serve or herald migrate creates them\n",
                    "\(command): \(result.stderr)")
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: foreign)) == before, "another program's database is left as it was")
        #expect(try Data(contentsOf: URL(fileURLWithPath: empty)).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: foreign + "-wal") && !FileManager.default.fileExists(atPath: empty + "-wal"))

        let created = try await runCommand(Binaries.path("herald"), ["keys", "create", "--role", "backend", "--database", "sqlite:\(empty)"], in: directory)
        #expect(created.status == 0 && created.stderr == "herald: the database at '\(empty)' held no Herald tables; created them\n", "\(created.stderr)")
        let listed = try await runCommand(Binaries.path("herald"), ["keys", "list", "--database", "sqlite:\(empty)"], in: directory)
        #expect(listed.status == 0 && listed.stderr.isEmpty && listed.stdout.contains("\tbackend\t"), "\(listed.stderr)")

        guard PostgresTestDatabase.serverURL != nil else { return }
        let postgres = try await PostgresTestDatabase.create()
        let shown = try #require(postgres.firstMatch(of: /^postgres(ql)?:\/\/(?:[^@\/]*@)?([^?]*)/).map { "postgres://\($0.2)" })
        // Twice: the second refusal shows the first created nothing.
        for command in commands + [["keys", "list"]] {
            let result = try await runCommand(
                Binaries.path("herald"), command + ["--database", postgres, "--log-level", "error"], in: directory, timeout: .seconds(60))
            #expect(result.status == 1, "\(command): \(result.stderr)")
            #expect(
                result.stderr.contains("herald: error: the database at '\(shown)") && result.stderr.contains("holds no Herald tables"),
                "\(command): \(result.stderr)")
            #expect(!result.stderr.contains("@"), "no credentials shown: \(result.stderr)")
        }
        let createdThere = try await runCommand(
            Binaries.path("herald"), ["keys", "create", "--role", "admin", "--database", postgres, "--log-level", "error"], in: directory,
            timeout: .seconds(60))
        #expect(createdThere.status == 0, "\(createdThere.stderr)")
        #expect(
            createdThere.stderr.contains("herald: the database at '\(shown)") && createdThere.stderr.contains("held no Herald tables; created them"),
            "\(createdThere.stderr)")
        let listedThere = try await runCommand(
            Binaries.path("herald"), ["keys", "list", "--database", postgres, "--log-level", "error"], in: directory, timeout: .seconds(60))
        #expect(listedThere.status == 0 && listedThere.stdout.contains("\tadmin\t"), "\(listedThere.stderr)")
    }

    @Test func keysCanBeListedAndRevoked() async throws {
        let key = try await createKey("backend")
        let list = try await runCommand(Binaries.path("herald"), ["keys", "list", "--database", database], in: directory)
        #expect(list.status == 0)
        #expect(!list.stdout.contains(key), "secrets are never listed")
        let id = try #require(list.stdout.split(separator: "\n").dropFirst().first?.split(separator: "\t").first.map(String.init))
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        let accepted = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "--url", herald.url, "--key", key], in: directory)
        #expect(accepted.status == 0, "\(accepted.stderr)")
        let revoke = try await runCommand(Binaries.path("herald"), ["keys", "revoke", id, "--database", database], in: directory)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        // The server remembers valid keys for 5 s: the revocation holds within that. Judged by
        // when each attempt started, not when it ended: a notifsim run can take seconds with the
        // whole suite on two cores, which says nothing of the server's cache.
        let revoked = ContinuousClock.now
        var refused = false
        var acceptedLate: [Duration] = []
        while !refused, ContinuousClock.now - revoked < .seconds(15) {
            let started = ContinuousClock.now - revoked
            refused = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "--url", herald.url, "--key", key], in: directory).status != 0
            if !refused {
                if started > .seconds(6) { acceptedLate.append(started) }
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        #expect(refused, "a revoked key stops working while the server runs")
        #expect(acceptedLate.isEmpty, "accepted in attempts begun this long after the revocation: \(acceptedLate)")
        let again = try await runCommand(Binaries.path("herald"), ["keys", "revoke", id, "--database", database], in: directory)
        #expect(again.status != 0)
        #expect(again.stderr.contains("no active key"))
        _ = await herald.stop()
    }

    @Test func badConfigurationIsOneClearLine() async throws {
        let badPort = try await runCommand(Binaries.path("herald"), ["migrate", "--database", "mysql://x"], in: directory)
        #expect(badPort.status != 0)
        #expect(badPort.stderr.contains("herald: error: database must be sqlite:PATH"), "\(badPort.stderr)")
        let badEnv = try await runCommand(
            Binaries.path("herald"), ["migrate", "--database", database], environment: ["HERALD_DELIVERY_MAX_ATTEMPTS": "lots"], in: directory)
        #expect(badEnv.status != 0)
        #expect(badEnv.stderr.contains("delivery.max_attempts"), "\(badEnv.stderr)")
        let badRole = try await runCommand(Binaries.path("herald"), ["keys", "create", "--role", "root", "--database", database], in: directory)
        #expect(badRole.status != 0)
        #expect(badRole.stderr.contains("admin, communicator, backend"))
        // A name is a column of `keys list`'s tab-separated table: a tab or newline in it broke the table.
        for name in ["", "  ", "team\tb", "team\nb", String(repeating: "n", count: 101)] {
            let badName = try await runCommand(
                Binaries.path("herald"), ["keys", "create", "--role", "backend", "--name", name, "--database", database], in: directory)
            #expect(badName.status != 0 && badName.stderr.contains("--name must be 1-100 characters"), "\(name): \(badName.stderr)")
        }
        // A log level swift-log does not name was ignored (the server ran at info).
        let badLevel = try await runCommand(Binaries.path("herald"), ["migrate", "--database", database, "--log-level", "loud"], in: directory)
        #expect(badLevel.status == 1 && badLevel.stderr.contains("herald: error: log_level must be one of trace,"), "\(badLevel.stderr)")
        // A port another process holds: which settings to change, not NIO's bind(2) wrapper.
        let holder = try await RunningHerald(arguments: ["--database", database], in: directory)
        let taken = try await runCommand(
            Binaries.path("herald"), ["serve", "--port", String(holder.port), "--database", database], in: directory, timeout: .seconds(20))
        #expect(taken.status == 1 && taken.stderr.contains("herald: error: cannot listen on 127.0.0.1 port \(holder.port) (host, port;"), "\(taken.stderr)")
        #expect(!taken.stderr.contains("\nError:"), "\(taken.stderr)")
        // Its services were cancelled as it ended: no storage failure was reported for that.
        #expect(!taken.stderr.contains("CancellationError"), "\(taken.stderr)")
        await holder.expectCleanStop()
        // `herald sinks` counts the finished deliveries of a window, named by `--since`.
        let badWindow = try await runCommand(Binaries.path("herald"), ["sinks", "--since", "8d", "--database", database], in: directory)
        #expect(badWindow.status != 0 && badWindow.stderr.contains("--since must be a duration such as 90s"), "\(badWindow.stderr)")
        let sinks = try await runCommand(Binaries.path("herald"), ["sinks", "--since", "90m", "--database", database], in: directory)
        #expect(sinks.status == 0 && sinks.stdout.contains("in the last 90m.\nSINK "), "\(sinks.stdout)\n\(sinks.stderr)")
    }

    /// A command whose output cannot be written (a full disk) says so and exits 74 (EX_IOERR):
    /// `keys create` exited 0 with the secret it shows only once lost, and a line to standard
    /// error through Foundation's FileHandle trapped the process.
    @Test func aCommandWhoseOutputIsLostDoesNotExitZero() async throws {
        let created = try await runCommand(
            "/bin/sh", ["-c", #"exec "$0" keys create --role backend --name lost --database "$1" >/dev/full"#, Binaries.path("herald"), database],
            in: directory)
        #expect(created.status == 74 && created.stderr.contains("cannot write standard output"), "\(created.status) \(created.stderr)")
        #expect(created.stderr.contains("was revoked, as its secret could not be shown"), "\(created.stderr)")
        let list = try await runCommand(Binaries.path("herald"), ["keys", "list", "--database", database], in: directory)
        let lost = list.stdout.split(separator: "\n").first { $0.contains("\tlost\t") }
        #expect(lost?.split(separator: "\t").last?.hasPrefix("revoked") == true, "nobody holds its secret, so it does not work: \(list.stdout)")
        let noKey = try await runCommand(
            "/bin/sh", ["-c", #"exec "$0" -u u1 --url http://127.0.0.1:1 --key k 2>/dev/full"#, Binaries.path("notifsim")], in: directory)
        #expect(noKey.status == 1, "notifsim's error line to a full disk is dropped, not a trap: \(noKey.status)")
    }

    /// A URL whose port is past 16 bits is refused before any request: the request trapped.
    @Test func commandLineURLsWithAPortPastSixteenBitsAreRefused() async throws {
        let probe = try await runCommand(Binaries.path("herald"), ["healthcheck", "--url", "http://127.0.0.1:99999"], in: directory)
        #expect(probe.status == 64 && probe.stderr.contains("--url has port 99999"), "\(probe.status) \(probe.stderr)")
        let send = try await runCommand(Binaries.path("notifsim"), ["-u", "u1", "--key", "hk_x", "--url", "http://127.0.0.1:99999"], in: directory)
        #expect(send.status == 64 && send.stderr.contains("--url has port 99999"), "\(send.status) \(send.stderr)")
    }

    /// A negative number reaches the option's own range check: it was read as an option name
    /// ("Missing value for '--count <count>'").
    @Test(arguments: [
        ("notifsim", ["-u", "u1", "--key", "hk_x", "--count", "-5"], "--count must be at least 1"),
        ("notifsim", ["-u", "u1", "--key", "hk_x", "--concurrency", "-1"], "--concurrency must be 1-1024"),
        ("notifsim", ["-u", "u1", "--key", "hk_x", "--rate", "-2"], "--rate must be a number of requests a second"),
        ("herald", ["user-token", "--user", "u1", "--ttl", "-5"], "--ttl must be 1-315360000 seconds"),
        ("herald", ["healthcheck", "--timeout", "-1"], "--timeout must be 1-3600 seconds"),
        ("herald", ["fcm-emulator", "--port", "-1"], "--port must be 0-65535"),
        // The emulators' fault modes, and the FCM emulator's --fail-first.
        ("herald", ["fcm-emulator", "--fail-rate", "-0.1"], "--fail-rate must be a share between 0 and 1"),
        ("herald", ["apns-emulator", "--reset-rate", "2"], "--reset-rate must be a share between 0 and 1"),
        ("herald", ["webpush-emulator", "--fail-rate", "0.6", "--rate-limit-rate", "0.6"], "add up to more than 1"),
        ("herald", ["fcm-emulator", "--latency", "-1"], "--latency must be 0-300 seconds"),
        ("herald", ["fcm-emulator", "--latency", "2", "--latency-rate", "1.5"], "--latency-rate must be a share between 0 and 1"),
        ("herald", ["apns-emulator", "--outage-for", "nan"], "--outage-for must be 0-3600 seconds"),
        ("herald", ["fcm-emulator", "--fail-first", "-2"], "--fail-first must be 0-100"),
    ])
    func negativeNumbersAreNamedByTheirRange(_ tool: String, _ arguments: [String], _ message: String) async throws {
        let run = try await runCommand(Binaries.path(tool), arguments, in: directory, timeout: .seconds(20))
        #expect(run.status == 64 && run.stderr.contains(message), "\(arguments): \(run.status) \(run.stderr)")
    }

    /// An emulator's port past 16 bits is refused: 70000 listened on 4464 (70000 - 65536).
    @Test func emulatorPortsPastSixteenBitsAreRefused() async throws {
        for command in ["fcm-emulator", "apns-emulator", "webpush-emulator"] {
            let run = try await runCommand(Binaries.path("herald"), [command, "--port", "70000"], in: directory, timeout: .seconds(20))
            #expect(run.status == 64 && run.stderr.contains("--port must be 0-65535"), "\(command): \(run.status) \(run.stdout) \(run.stderr)")
        }
    }

    /// `herald healthcheck` answers 0 only for a ready server, with one line otherwise.
    @Test func healthcheckTellsReadyFromUnreachable() async throws {
        let herald = try await RunningHerald(arguments: ["--database", database], in: directory)
        let ready = try await runCommand(Binaries.path("herald"), ["healthcheck", "--url", herald.url], in: directory)
        #expect(ready.status == 0 && ready.stdout.contains("ready"), "\(ready.stderr)")
        _ = await herald.stop()
        // A refused connection is the answer: it does not wait out the timeout.
        let started = ContinuousClock.now
        let down = try await runCommand(Binaries.path("herald"), ["healthcheck", "--url", herald.url, "--timeout", "30"], in: directory)
        #expect(down.status == 1)
        #expect(down.stderr.contains("is not reachable"), "\(down.stderr)")
        #expect(ContinuousClock.now - started < .seconds(20), "a refused connection ended the probe")
        // Its line to a full disk is dropped; the exit status still tells (Foundation's
        // FileHandle.write trapped on ENOSPC: exit 132).
        let full = try await runCommand(
            "/bin/sh", ["-c", #"exec "$0" healthcheck --url "$1" 2>/dev/full"#, Binaries.path("herald"), herald.url], in: directory)
        #expect(full.status == 1, "\(full.status) \(full.stderr)")
        // A wait longer than an hour is a typo, not a probe (a huge one kept retrying the connection).
        for given in [["--timeout", "0"], ["--timeout=-5"], ["--timeout", "9223372036854775807"]] {
            let odd = try await runCommand(
                Binaries.path("herald"), ["healthcheck", "--url", herald.url] + given, in: directory, timeout: .seconds(20))
            #expect(odd.status == 64 && odd.stderr.contains("--timeout must be 1-3600"), "\(given): \(odd.status) \(odd.stderr)")
        }
    }
}
