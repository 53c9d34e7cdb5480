import ArgumentParser
import AsyncHTTPClient
import Foundation
import GRDB
import HeraldCore
import HeraldFCMSink
import HeraldStore
import HeraldTopics
import NIOHTTP1

@main
struct HeraldBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-bench",
        abstract: "Measure Herald on loopback: accepts, pushes, fan-out and the feed, against the HTTP stack's own ceiling.",
        subcommands: [Run.self, Faults.self, Timing.self, Seed.self, Year.self, EchoServer.self],
        defaultSubcommand: Run.self
    )

    /// Runs the subcommand, then stops every child process it left running: a step that fails
    /// throws past the `stop()` calls, and a Herald or an emulator left behind would take the
    /// cores of the next run.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            await ChildProcess.stopAll()
            exit(withError: error)
        }
        await ChildProcess.stopAll()
    }
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run every benchmark once and print the table (the default).")

    @Option(help: "Notifications to send in the accept benchmark.")
    var notifications = 20_000

    @Option(help: "Concurrent connections for every load.")
    var concurrency = 64

    @Option(help: "Users (one device each) the notifications go to.")
    var users = 1_000

    @Option(help: "Subscribers of the fan-out topic (0 skips the fan-out).")
    var subscribers = 100_000

    @Option(help: "Requests for the emulator's ceiling and the card measurements.")
    var requests = 20_000

    @Option(help: "Seconds each wrk load runs (ceilings, accepts, feed).")
    var seconds = 10

    @Option(help: "Seconds of the end-to-end run (accepts and pushes together against nginx; 0 skips it).")
    var endToEndSeconds = 30

    @Option(help: "Items in the history of the user whose inbox marks and counts are measured (0 skips the inbox).")
    var inboxItems = 100_000

    @Option(help: "Live messages in the feed while its 200 and 304 paths are measured.")
    var feedMessages = 1_000

    @Option(
        help: """
            A PostgreSQL server (postgres://user@host:port/db) for the end-to-end runs with one and two Herald processes \
            on one database (./scripts/bench starts a durable throwaway server); none skips them.
            """)
    var postgres: String?

    @Option(help: "Herald's delivery.batch_size for every Herald it starts (default: Herald's own).")
    var deliveryBatchSize: Int?

    @Option(help: "The herald binary (default: beside this one, so the release build).")
    var herald: String?

    @Option(help: "Where the results go as JSON.")
    var output = "Benchmarks/results/latest.json"

    func validate() throws {
        guard users >= 1 else { throw ValidationError("--users must be at least 1: every notification goes to one of them") }
        guard inboxItems >= 0 else { throw ValidationError("--inbox-items must be 0 (skip) or more") }
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try ChildProcess.heraldPath(herald)
        // Said aloud: a variable set to switch Herald's behaviour for a comparison would
        // otherwise be dropped in silence, and both arms would run the same configuration.
        let ignored = ProcessInfo.processInfo.environment.keys.filter { $0.hasPrefix("HERALD_") }.sorted()
        if !ignored.isEmpty {
            progress("not passed to the servers it starts (they get the harness's settings only): \(ignored.joined(separator: ", "))")
        }
        let report = try await LoadDriver.with(concurrency: concurrency) { driver in
            var report = Report(concurrency: concurrency)
            try await measure(report: &report, driver: driver, directory: directory)
            return report
        }
        print(report.table())
        try report.write(to: output)
        progress("wrote \(output)")
    }

    func measure(report: inout Report, driver: LoadDriver, directory: URL) async throws {
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let heraldPath = try ChildProcess.heraldPath(herald)

        // 1. The FCM emulator alone: its ceiling must sit well above Herald's push rate.
        progress("FCM emulator ceiling")
        let account = directory.appendingPathComponent("fcm.json").path
        let emulator = try await ChildProcess(
            heraldPath, ["fcm-emulator", "--port", "0", "--quiet", "--write-service-account", account], banner: "FCM emulator listening on"
        )
        let tokens = try await FCMAccessTokenProvider(account: try ServiceAccount.load(path: account), http: driver.client)
        let accessToken = try await tokens.token()
        let emulatorCeiling = await driver.run(count: requests, concurrency: concurrency, expect: 200) { index in
            LoadDriver.post(
                "\(emulator.url)/v1/projects/herald-emulator/messages:send",
                json: "{\"message\":{\"token\":\"ceiling-\(index)\",\"data\":{\"id\":\"\(index)\"}}}", token: accessToken
            )
        }
        report.add("emulator ceiling (push requests/s)", emulatorCeiling.perSecond, unit: "/s")
        var reset = LoadDriver.get("\(emulator.url)/emulator/messages")
        reset.method = .DELETE
        _ = try await driver.call(reset)

        // 2. The HTTP stack's ceiling: the same Hummingbird server with trivial routes, loaded by
        // wrk (a C client), so the ceiling is the server's and not the load generator's.
        progress("HTTP ceiling (JSON POST and GET, wrk for \(seconds) s each)")
        let wrk = Wrk(directory: directory, connections: concurrency, duration: .seconds(seconds))
        let echo = try await ChildProcess(bench.path, ["echo-server"], banner: "echo listening on")
        let body = "{\"type\":\"comment\",\"title\":\"Bench\",\"body\":\"b\",\"user_ids\":[\"bench-user-1\"]}"
        let echoCPUBefore = echo.cpuSeconds
        let postCeiling = try await wrk.run("\(echo.url)/echo", .post(json: body))
        let echoCPU = Self.microseconds(echo.cpuSeconds - echoCPUBefore, per: postCeiling.requests)
        let getCeiling = try await wrk.run("\(echo.url)/ping", .get())
        await echo.stop()
        report.add("JSON POST ceiling (wrk)", postCeiling.perSecond, unit: "/s")
        report.add("GET ceiling (wrk)", getCeiling.perSecond, unit: "/s")
        // CPU per request, all processes on the same cores: what the ratios below are made of.
        report.add("echo server CPU per JSON POST", echoCPU, unit: "µs")

        // 3. Herald on SQLite, pushing through the emulator.
        progress("Herald: registering \(users) users")
        let admin = "hk_bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let server = try await ChildProcess(
            heraldPath, ["serve", "--port", "0", "--database", "sqlite:" + directory.appendingPathComponent("herald.sqlite").path, "--log-level", "warning"],
            banner: "Herald listening on",
            environment: tuning.merging(["HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url]) {
                _, new in new
            }
        )
        try await registerUsers(at: server, prefix: "bench", admin: admin, driver: driver)

        progress("Herald: accepts for \(seconds) s at \(concurrency) connections (wrk)")
        let pushedBefore = try await driver.delivered(at: emulator)
        let (heraldCPUBefore, emulatorCPUBefore) = (server.cpuSeconds, emulator.cpuSeconds)
        let accepts = try await wrk.run(
            "\(server.url)/api/notifications",
            acceptLoad(prefix: "bench", admin: admin)
        )
        report.add(
            "accepted", accepts.perSecond, unit: "/s", ratio: accepts.perSecond / postCeiling.perSecond, target: ">= 0.50 of JSON POST ceiling",
            met: accepts.perSecond >= 0.5 * postCeiling.perSecond)
        report.add("accept errors", Double(accepts.errors), unit: "")
        report.add("accept latency p50", accepts.p50Milliseconds, unit: "ms")
        report.add("accept latency p99", accepts.p99Milliseconds, unit: "ms", target: "<= 10 ms at 64 connections", met: accepts.p99Milliseconds <= 10)
        report.add("Herald peak RSS (accepts)", server.peakRSS, unit: "MiB")
        // The accepts leave pushes queued (the emulator shares the cores): the feed and card
        // loads below measure those paths, not the same paths beside a draining queue.
        try await waitForPushes(from: emulator, atLeast: pushedBefore + accepts.requests - accepts.errors, driver: driver)
        let accepted = accepts.requests - accepts.errors
        report.add("Herald CPU per accept and its push", Self.microseconds(server.cpuSeconds - heraldCPUBefore, per: accepted), unit: "µs")
        report.add("emulator CPU per push", Self.microseconds(emulator.cpuSeconds - emulatorCPUBefore, per: accepted), unit: "µs")

        // The same accepts for users without a device (each is its notification and history
        // row): Herald alone on the cores, to tell the accept's cost from its push's.
        progress("Herald: accepts without pushes for \(seconds) s (wrk)")
        let bareCPUBefore = server.cpuSeconds
        let bare = try await wrk.run("\(server.url)/api/notifications", acceptLoad(prefix: "bare", admin: admin))
        report.add("accepted without pushes", bare.perSecond, unit: "/s", ratio: bare.perSecond / postCeiling.perSecond)
        report.add("accept latency p99 without pushes", bare.p99Milliseconds, unit: "ms")
        report.add("Herald CPU per accept without a push", Self.microseconds(server.cpuSeconds - bareCPUBefore, per: bare.requests - bare.errors), unit: "µs")

        // 4. The pull feed with `feedMessages` live messages: the 200 path and the 304 (ETag) path.
        progress("Herald: feed with \(feedMessages) messages")
        let expires = Timestamp.format(Date().addingTimeInterval(86_400))
        let posted = await driver.run(count: feedMessages, concurrency: 4, expect: 201) { index in
            LoadDriver.post(
                "\(server.url)/api/feed/messages",
                json:
                    "{\"title\":\"Bench \(index)\",\"body\":\"feed message \(index)\",\"expires_at\":\"\(expires)\",\"priority\":\(index % 5),\"target_regions\":[\"CA\"]}",
                token: admin)
        }
        guard posted.errors == 0 else { throw BenchError("\(posted.errors) feed messages were refused") }
        let (_, _, headers) = try await driver.call(LoadDriver.get("\(server.url)/feed/index.json"))
        let etag = headers.first(name: "ETag") ?? ""
        let feed200 = try await wrk.run("\(server.url)/feed/index.json", .get())
        let feed304 = try await wrk.run("\(server.url)/feed/index.json", .get(headers: ["If-None-Match": etag]))
        report.add("feed index.json 200", feed200.perSecond, unit: "/s", ratio: feed200.perSecond / getCeiling.perSecond)
        report.add(
            "feed index.json 304", feed304.perSecond, unit: "/s", ratio: feed304.perSecond / getCeiling.perSecond, target: ">= 0.80 of GET ceiling",
            met: feed304.perSecond >= 0.8 * getCeiling.perSecond)
        try await measureCards(report: &report, driver: driver, wrk: wrk, server: server, admin: admin, getCeiling: getCeiling.perSecond)
        if inboxItems > 0 {
            try await measureInbox(report: &report, driver: driver, wrk: wrk, server: server, admin: admin, getCeiling: getCeiling.perSecond)
        }
        await server.stop()

        // 5. Pushes: a queue of `notifications` pushes (written straight into a fresh database,
        // so accepts do not pace them) drained through the emulator.
        progress("pushes: preparing a queue of \(notifications)")
        let backlog = directory.appendingPathComponent("backlog.sqlite").path
        try await Backlog.prepare(database: backlog, notifications: notifications, users: users)
        let before = try await driver.delivered(at: emulator)
        let pusher = try await ChildProcess(
            heraldPath, ["serve", "--port", "0", "--database", "sqlite:" + backlog, "--log-level", "warning"], banner: "Herald listening on",
            environment: tuning.merging(["HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url]) {
                _, new in new
            }
        )
        progress("pushes: draining")
        let drainStart = ContinuousClock.now
        let pushed =
            try await driver.pushes(at: emulator, reaching: before + notifications, within: .seconds(300), every: .milliseconds(20)) - before
        let drained = ContinuousClock.now - drainStart
        let pushRate = Double(pushed) / drained.seconds
        report.add(
            "delivered (pushes at the emulator)", pushRate, unit: "/s", ratio: pushRate / emulatorCeiling.perSecond, target: ">= 20000/s",
            met: pushRate >= 20_000)
        report.add("Herald peak RSS (pushes)", pusher.peakRSS, unit: "MiB")
        if pushed < notifications { report.add("pushes missing", Double(notifications - pushed), unit: "") }
        await pusher.stop()
        if endToEndSeconds > 0 {
            try await measureEndToEnd(report: &report, driver: driver, wrk: wrk, heraldPath: heraldPath, account: account, admin: admin, directory: directory)
        }
        await emulator.stop()

        // 6. Fan-out: a Message Hub message to a topic with many subscribers.
        if subscribers > 0 {
            progress("fan-out: preparing \(subscribers) subscribers")
            let database = directory.appendingPathComponent("fanout.sqlite").path
            let topic = try await prepareTopic(database: database, subscribers: subscribers)
            let fanOut = try await ChildProcess(
                heraldPath, ["serve", "--port", "0", "--database", "sqlite:" + database, "--log-level", "warning"], banner: "Herald listening on",
                environment: tuning.merging(["HERALD_BOOTSTRAP_ADMIN_KEY": admin]) { _, new in new }
            )
            progress("fan-out: posting the message, then accepts for \(seconds) s while it is written")
            let rssBefore = fanOut.peakRSS
            let start = ContinuousClock.now
            let (status, answer, _) = try await driver.call(
                LoadDriver.post(
                    "\(fanOut.url)/message",
                    json: "{\"title\":\"Bench\",\"desc\":\"fan-out\",\"message\":\"m\",\"topic_key\":\"\(topic)\",\"distribution\":\"Alert\"}",
                    token: admin
                )
            )
            let answered = ContinuousClock.now - start
            guard status == 201, let id = answer["msi_key"] as? String else { throw BenchError("the message was refused: \(status) \(answer)") }
            // Accepts beside the fan-out: above fanout.inline_limit it is written in pages after the 201.
            let (load, acceptURL, request) = (wrk, "\(fanOut.url)/api/notifications", acceptLoad(prefix: "beside", admin: admin))
            async let beside = load.run(acceptURL, request)
            var written = 0
            var writtenDuringAccepts = 0
            let acceptsEnd = start + .seconds(seconds)
            while ContinuousClock.now - start < .seconds(600) {
                let (_, status, _) = try await driver.call(
                    LoadDriver.get("\(fanOut.url)/api/notifications/\(id)", headers: [("Authorization", "Bearer \(admin)")]))
                let progress = status["fan_out"] as? [String: Any]
                written = progress?["written"] as? Int ?? ((status["summary"] as? [String: Any])?["history"] as? [String: Any])?["delivered"] as? Int ?? 0
                if ContinuousClock.now < acceptsEnd { writtenDuringAccepts = written }
                if (progress?["state"] as? String ?? "done") == "done" && written >= subscribers { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let total = ContinuousClock.now - start
            report.add("fan-out subscribers", Double(subscribers), unit: "")
            report.add("fan-out 201 after", answered.seconds, unit: "s")
            report.add(
                "fan-out all history written", total.seconds, unit: "s", target: subscribers >= 1_000_000 ? "< 10 s for 1 M" : nil,
                met: subscribers >= 1_000_000 ? total.seconds < 10 : nil)
            report.add(
                "fan-out peak RSS", fanOut.peakRSS, unit: "MiB", target: subscribers >= 1_000_000 ? "< 150 MB for 1 M" : nil,
                met: subscribers >= 1_000_000 ? fanOut.peakRSS * 1.048576 < 150 : nil)
            report.add("fan-out RSS at start", rssBefore, unit: "MiB")
            let accepts = try await beside
            report.add("accepted during the fan-out", accepts.perSecond, unit: "/s")
            report.add("fan-out rows written while accepts ran", Double(writtenDuringAccepts), unit: "")
            report.add(
                "accept p99 during the fan-out", accepts.p99Milliseconds, unit: "ms", target: "<= 100 ms", met: accepts.p99Milliseconds <= 100)
            if written < subscribers { report.add("fan-out rows missing", Double(subscribers - written), unit: "") }
            await fanOut.stop()
        }
    }

    /// Cards (docs/cards.md): 100 000 score updates as NDJSON, a pull of a 1 000-card pool, and
    /// the 304 path of an unchanged cache key.
    func measureCards(report: inout Report, driver: LoadDriver, wrk: Wrk, server: ChildProcess, admin: String, getCeiling: Double) async throws {
        progress("cards: storing 1000 cards")
        for batch in stride(from: 0, to: 1_000, by: 250) {
            let cards = (batch..<batch + 250).map { #"{"id":"bench-card-\#($0)","metadata":{"title":"Card \#($0)"},"posted_at":"2026-11-01T10:00:00Z"}"# }
            let (status, _, _) = try await driver.call(
                LoadDriver.post("\(server.url)/api/cards", json: #"{"cards":[\#(cards.joined(separator: ","))]}"#, token: admin))
            guard status == 200 else { throw BenchError("storing cards answered \(status)") }
        }
        progress("cards: 100000 score updates (1000 users x 100 cards)")
        var lines = ""
        lines.reserveCapacity(100_000 * 80)
        for user in 0..<1_000 {
            for card in 0..<100 {
                lines += #"{"user_id":"bench-user-\#(user)","card":"bench-card-\#((user + card * 7) % 1_000)","score":0.\#(card),"timestamp":1}"# + "\n"
            }
        }
        var upload = LoadDriver.post("\(server.url)/api/pool/scores", json: lines, token: admin)
        upload.headers.replaceOrAdd(name: "Content-Type", value: "application/x-ndjson")
        let started = ContinuousClock.now
        let (status, answer, _) = try await driver.call(upload)
        let took = (ContinuousClock.now - started).seconds
        guard status == 200, answer["applied"] as? Int == 100_000 else { throw BenchError("the score upload answered \(status) \(answer)") }
        report.add("cards: 100 000 score updates", took, unit: "s", target: "< 5 s", met: took < 5)

        progress("cards: a 1000-card pool")
        var pool = ""
        for card in 0..<1_000 { pool += #"{"user_id":"bench-pool-user","card":"bench-card-\#(card)","score":\#(Double(card) / 1_000),"timestamp":1}"# + "\n" }
        var poolUpload = LoadDriver.post("\(server.url)/api/pool/scores", json: pool, token: admin)
        poolUpload.headers.replaceOrAdd(name: "Content-Type", value: "application/x-ndjson")
        _ = try await driver.call(poolUpload)
        let actingHeaders = [("Authorization", "Bearer \(admin)"), ("X-User-ID", "bench-pool-user")]
        let url = "\(server.url)/api/pull?limit=1000"
        let full = await driver.run(count: 500, concurrency: 1, expect: 200) { _ in LoadDriver.get(url, headers: actingHeaders) }
        report.add(
            "cards: pull of a 1000-card pool p99", full.percentileMilliseconds(99), unit: "ms", target: "< 10 ms", met: full.percentileMilliseconds(99) < 10)
        let (_, _, headers) = try await driver.call(LoadDriver.get(url, headers: actingHeaders))
        let etag = headers.first(name: "ETag") ?? ""
        let unchanged = try await wrk.run(
            url, .get(headers: Dictionary(uniqueKeysWithValues: actingHeaders + [("If-None-Match", etag)]))
        )
        report.add(
            "cards: pull 304", unchanged.perSecond, unit: "/s", ratio: unchanged.perSecond / getCeiling, target: ">= 0.50 of GET ceiling",
            met: unchanged.perSecond >= 0.5 * getCeiling
        )
    }

    /// `users` users `<prefix>-user-N`, each with one FCM device `<prefix>-token-N`.
    func registerUsers(at server: ChildProcess, prefix: String, admin: String, driver: LoadDriver) async throws {
        let registered = await driver.run(count: users, concurrency: min(concurrency, 16), expect: 200) { index in
            var request = LoadDriver.post("\(server.url)/api/notifications/register", json: "{\"fcm_token\":\"\(prefix)-token-\(index)\"}", token: admin)
            request.headers.add(name: "X-User-ID", value: "\(prefix)-user-\(index)")
            return request
        }
        guard registered.errors == 0 else { throw BenchError("\(registered.errors) registrations failed") }
    }

    /// `wrk`'s accept load: each request a comment for one of the `users` users `<prefix>-user-N`.
    func acceptLoad(prefix: String, admin: String) -> Wrk.Request {
        .post(
            json: "{\"type\":\"comment\",\"title\":\"\(prefix) %d\",\"body\":\"b\",\"user_ids\":[\"\(prefix)-user-%d\"]}", arguments: ["n", "n % \(users)"],
            headers: ["Authorization": "Bearer \(admin)"])
    }

    /// Settings passed to every Herald the harness starts.
    var tuning: [String: String] {
        deliveryBatchSize.map { ["HERALD_DELIVERY_BATCH_SIZE": String($0)] } ?? [:]
    }

    /// `seconds` of CPU per request, in microseconds (0 when nothing was counted).
    static func microseconds(_ seconds: Double, per requests: Int) -> Double {
        requests > 0 ? seconds * 1e6 / Double(requests) : 0
    }

    /// Waits (two minutes at most) until the emulator has counted `count` pushes in all.
    func waitForPushes(from emulator: ChildProcess, atLeast count: Int, driver: LoadDriver) async throws {
        let queued = count - (try await driver.delivered(at: emulator))
        guard queued > 0 else { return }
        progress("Herald: waiting for the \(queued) pushes still queued")
        let pushed = try await driver.pushes(at: emulator, reaching: count, within: .seconds(120), every: .milliseconds(100))
        if pushed < count { progress("Herald: \(count - pushed) pushes still queued after two minutes; measuring anyway") }
    }

    /// A fresh database with one subject and `subscribers` subscriptions, written in one
    /// statement (subscribing through the API would take longer than the benchmark).
    func prepareTopic(database: String, subscribers: Int) async throws -> String {
        let sqlite = try SQLiteStore(path: database)
        try await sqlite.migrate()
        let store = SharedTopicStore(database: sqlite)
        let ids = ObjectIDGenerator()
        let channel = Channel(id: ids.next(), name: "bench", desc: "")
        let area = Area(id: ids.next(), name: "bench", desc: "")
        let subjectID = ids.next()
        let key = TopicKey(channelID: channel.id, areaID: area.id, subjectID: subjectID).description
        try await store.createChannel(channel)
        _ = try await store.createArea(area, channelID: channel.id)
        _ = try await store.createSubject(
            Subject(id: subjectID, name: "bench", desc: "", topicKey: key, opt: .init(level: .optIn, distribution: .alert)), channelID: channel.id,
            areaID: area.id
        )
        let queue = try DatabaseQueue(path: database)
        try await queue.write { db in
            try db.execute(
                sql: """
                    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
                    INSERT INTO subscriptions (user_id, topic_key, created_at) SELECT 'user-' || i, ?, 0 FROM n
                    """,
                arguments: [subscribers, key]
            )
        }
        return key
    }

    func progress(_ line: String) {
        StandardStream.error.write("herald-bench: \(line)\n")
    }
}
