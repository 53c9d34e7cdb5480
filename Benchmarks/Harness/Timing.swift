import ArgumentParser
import Foundation
import HeraldCore

/// Scheduled sends at scale (docs/timing.md, docs/performance.md "Scheduled sends at scale"): a
/// million deliveries due at one instant, drained beside a light accept load, against the same
/// run's backlog push rate; and a `send_at_local` audience of a million users over 24 zones.
struct Timing: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timing",
        abstract: "Scheduled sends: deliveries due at one instant against the backlog push rate, and a send_at_local audience over 24 zones."
    )

    @Option(help: "Scheduled notifications, one push each, due at one instant.")
    var deliveries = 1_000_000

    @Option(help: "Users (one device each) the scheduled notifications go to.")
    var users = 1_000

    @Option(help: "Queued pushes drained first, for the same run's backlog push rate.")
    var backlog = 20_000

    @Option(help: "Users of the send_at_local audience, spread over 24 zones (0 skips it).")
    var audience = 1_000_000

    @Option(help: "Seconds of accepts measured idle, and again from the instant the scheduled deliveries fall due.")
    var seconds = 10

    @Option(help: "Connections of that accept load: few, so its p99 is an accept's latency and not a queue of 64 behind each other.")
    var connections = 4

    @Option(help: "The herald binary (default: beside this one, so the release build).")
    var herald: String?

    @Option(help: "Where the results go as JSON.")
    var output = "Benchmarks/results/timing.json"

    /// One zone per UTC offset from -11 to +12, so a local 09:00 is 24 different instants.
    static let zones = [
        "Pacific/Pago_Pago", "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Denver", "America/Chicago",
        "America/New_York", "America/Halifax", "America/Sao_Paulo", "Atlantic/South_Georgia", "Atlantic/Cape_Verde", "Europe/London",
        "Europe/Paris", "Europe/Athens", "Europe/Moscow", "Asia/Dubai", "Asia/Karachi", "Asia/Dhaka", "Asia/Bangkok", "Asia/Shanghai",
        "Asia/Tokyo", "Australia/Brisbane", "Pacific/Noumea", "Pacific/Auckland",
    ]

    func validate() throws {
        guard users >= 1 else { throw ValidationError("--users must be at least 1: every scheduled send goes to one of them") }
        guard deliveries >= 1, backlog >= 1, audience >= 0, seconds >= 1, connections >= 1 else {
            throw ValidationError("--deliveries, --backlog, --seconds and --connections must be at least 1, --audience at least 0")
        }
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-bench-timing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let heraldPath = try ChildProcess.heraldPath(herald)
        let report = try await LoadDriver.with(concurrency: 16) { driver in
            var report = Report(concurrency: connections)
            try await measure(report: &report, driver: driver, heraldPath: heraldPath, directory: directory)
            return report
        }
        print(report.table())
        try report.write(to: output)
        progress("wrote \(output)")
    }

    func measure(report: inout Report, driver: LoadDriver, heraldPath: String, directory: URL) async throws {
        let account = directory.appendingPathComponent("fcm.json").path
        let emulator = try await ChildProcess(
            heraldPath, ["fcm-emulator", "--port", "0", "--quiet", "--write-service-account", account], banner: "FCM emulator listening on"
        )
        let admin = "hk_bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let pushing = ["HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url]

        // 1. The yardstick: a queue of `backlog` pushes due now, drained through the emulator.
        progress("backlog: preparing \(backlog) queued pushes")
        let backlogDatabase = directory.appendingPathComponent("backlog.sqlite").path
        try await Backlog.prepare(database: backlogDatabase, notifications: backlog, users: users)
        let before = try await driver.delivered(at: emulator)
        let pusher = try await serve(heraldPath, database: backlogDatabase, environment: pushing)
        let drainStart = ContinuousClock.now
        let drainedBacklog = try await driver.pushes(at: emulator, reaching: before + backlog, within: .seconds(300), every: .milliseconds(20)) - before
        let backlogRate = Double(drainedBacklog) / (ContinuousClock.now - drainStart).seconds
        let backlogCPU = Run.microseconds(pusher.cpuSeconds, per: drainedBacklog)
        await pusher.stop()
        report.add("backlog push rate (queued pushes, no accepts)", backlogRate, unit: "/s")
        report.add("Herald CPU per queued push (start-up included)", backlogCPU, unit: "µs")

        // The accept load below beside a drain of plain queued pushes (enough to outlast it):
        // what any queue draining costs an accept, apart from anything scheduling adds.
        let wrk = Wrk(directory: directory, connections: connections, duration: .seconds(seconds))
        let longer = Int(backlogRate * Double(seconds) * 1.5)
        progress("backlog: accepts for \(seconds) s beside a drain of \(longer) queued pushes")
        let longerDatabase = directory.appendingPathComponent("backlog-accepts.sqlite").path
        try await Backlog.prepare(database: longerDatabase, notifications: longer, users: users)
        let drainer = try await serve(heraldPath, database: longerDatabase, environment: pushing)
        let besideBacklog = try await wrk.run("\(drainer.url)/api/notifications", acceptLoad(admin: admin))
        await drainer.stop()

        // 2. `deliveries` scheduled sends due at one instant, with accepts measured idle before it
        // and again from it (users without a device: the accepts add no pushes to the count).
        progress("scheduled: preparing \(deliveries) sends due at one instant (written through the store)")
        let scheduledDatabase = directory.appendingPathComponent("scheduled.sqlite").path
        try await Backlog.prepareScheduled(database: scheduledDatabase, notifications: deliveries, users: users) { written in
            progress("scheduled: \(written) written")
        }
        // Herald's start and the idle load come first; the instant is fixed before Herald reads it.
        let instant = Date().addingTimeInterval(Double(seconds) + 10)
        try await Backlog.reschedule(scheduledDatabase, at: instant)
        let server = try await serve(heraldPath, database: scheduledDatabase, environment: pushing)
        let pushedBefore = try await driver.delivered(at: emulator)
        progress("scheduled: idle accepts for \(seconds) s at \(connections) connections (after 2 s unmeasured)")
        // The start's own work (the first checkpoint of a freshly written database) is not idle.
        _ = try await Wrk(directory: directory, connections: connections, duration: .seconds(2)).run(
            "\(server.url)/api/notifications", acceptLoad(admin: admin))
        let idle = try await wrk.run("\(server.url)/api/notifications", acceptLoad(admin: admin))
        let earlyPushes = try await driver.delivered(at: emulator) - pushedBefore
        let rssIdle = server.peakRSS
        guard instant.timeIntervalSinceNow > 0 else { throw BenchError("the idle accepts ran past the instant; pass fewer --seconds") }
        try await Task.sleep(for: .seconds(instant.timeIntervalSinceNow))
        let cpuAtInstant = server.cpuSeconds
        progress("scheduled: the instant; accepts for \(seconds) s while \(deliveries) deliveries fire")
        let (load, url, request) = (wrk, "\(server.url)/api/notifications", acceptLoad(admin: admin))
        async let firing = load.run(url, request)
        var first: Double?
        var pushed = 0
        let limit = Double(deliveries) / 500 + 120
        while pushed < deliveries, -instant.timeIntervalSinceNow < limit {
            pushed = try await driver.delivered(at: emulator) - pushedBefore
            if first == nil, pushed > 0 { first = -instant.timeIntervalSinceNow }
            try await Task.sleep(for: first == nil ? .milliseconds(5) : .milliseconds(50))
        }
        let drained = -instant.timeIntervalSinceNow
        let firingCPU = server.cpuSeconds - cpuAtInstant
        let during = try await firing
        let rate = Double(pushed) / max(drained, 1e-9)
        report.add("scheduled deliveries due at one instant", Double(deliveries), unit: "")
        report.add("pushes before the instant", Double(earlyPushes), unit: "", target: "0", met: earlyPushes == 0)
        if let first {
            report.add("first push after the instant", first, unit: "s", target: "<= 1 s", met: first <= 1)
        }
        report.add(
            "scheduled drain rate", rate, unit: "/s", ratio: rate / backlogRate, target: ">= 0.80 of the backlog push rate", met: rate >= 0.8 * backlogRate)
        if pushed < deliveries { report.add("scheduled pushes missing", Double(deliveries - pushed), unit: "") }
        // Its accepts included (`seconds` of them at `connections`): a ceiling on the page's cost.
        report.add("Herald CPU per scheduled delivery (accepts beside it included)", Run.microseconds(firingCPU, per: pushed), unit: "µs")
        report.add("accept p99 idle (\(connections) connections)", idle.p99Milliseconds, unit: "ms")
        report.add(
            "accept p99 beside a backlog drain", besideBacklog.p99Milliseconds, unit: "ms",
            ratio: besideBacklog.p99Milliseconds / max(idle.p99Milliseconds, 1e-9))
        report.add(
            "accept p99 while they fire", during.p99Milliseconds, unit: "ms", ratio: during.p99Milliseconds / max(idle.p99Milliseconds, 1e-9),
            target: "<= 2x idle", met: during.p99Milliseconds <= 2 * idle.p99Milliseconds)
        report.add("accepts while they fire", during.perSecond, unit: "/s", ratio: during.perSecond / max(idle.perSecond, 1e-9))
        report.add("Herald RSS before the instant", rssIdle, unit: "MiB")
        report.add("Herald peak RSS", server.peakRSS, unit: "MiB", target: "<= 150 MiB", met: server.peakRSS <= 150)
        await server.stop()
        await emulator.stop()

        // 3. An audience of everyone, `audience` users over 24 zones, at 09:00 in each one's own.
        if audience > 0 {
            try await measureLocalAudience(report: &report, driver: driver, heraldPath: heraldPath, admin: admin, directory: directory)
        }
    }

    func measureLocalAudience(report: inout Report, driver: LoadDriver, heraldPath: String, admin: String, directory: URL) async throws {
        progress("send_at_local: preparing \(audience) users over \(Self.zones.count) zones")
        let database = directory.appendingPathComponent("zoned.sqlite").path
        try await Backlog.prepareZonedUsers(database: database, users: audience, zones: Self.zones)
        let server = try await serve(heraldPath, database: database, environment: ["HERALD_BOOTSTRAP_ADMIN_KEY": admin])
        let start = ContinuousClock.now
        let (status, answer, _) = try await driver.call(
            LoadDriver.post(
                "\(server.url)/api/notifications",
                json: #"{"type":"generic","title":"Your morning summary","body":"b","audience":{"all":true},"send_at_local":"09:00"}"#, token: admin)
        )
        let answered = (ContinuousClock.now - start).seconds
        guard status == 202, let id = answer["id"] as? String else { throw BenchError("the send_at_local audience was refused: \(status) \(answer)") }
        progress("send_at_local: 202 after \(String(format: "%.3f", answered)) s; waiting for the fan-out job's pages")
        var written = 0
        var state = ""
        var scheduled = 0
        while ContinuousClock.now - start < .seconds(900) {
            let (_, status, _) = try await driver.call(
                LoadDriver.get("\(server.url)/api/notifications/\(id)", headers: [("Authorization", "Bearer \(admin)")]))
            let fanOut = status["fan_out"] as? [String: Any]
            (written, state) = (fanOut?["written"] as? Int ?? 0, fanOut?["state"] as? String ?? "")
            scheduled = (status["counts"] as? [String: Any])?["scheduled"] as? Int ?? 0
            if state == "done" { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let paged = (ContinuousClock.now - start).seconds
        report.add("send_at_local audience (users over \(Self.zones.count) zones)", Double(audience), unit: "")
        report.add("send_at_local 202 after", answered * 1000, unit: "ms", target: "<= 100 ms", met: answered <= 0.1)
        report.add("send_at_local pages written (each recipient's instant) after", paged, unit: "s")
        report.add("send_at_local recipients written", Double(written), unit: "", target: "all", met: written == audience && state == "done")
        report.add("send_at_local recipients waiting for their instant", Double(scheduled), unit: "")
        report.add("send_at_local peak RSS", server.peakRSS, unit: "MiB", target: "<= 150 MiB", met: server.peakRSS <= 150)
        await server.stop()
    }

    func serve(_ heraldPath: String, database: String, environment: [String: String]) async throws -> ChildProcess {
        try await ChildProcess(
            heraldPath, ["serve", "--port", "0", "--database", "sqlite:" + database, "--log-level", "warning"], banner: "Herald listening on",
            environment: environment)
    }

    /// Accepts for users without a device (`idle-user-N`): a notification and a history row each.
    func acceptLoad(admin: String) -> Wrk.Request {
        .post(
            json: "{\"type\":\"comment\",\"title\":\"accept %d\",\"body\":\"b\",\"user_ids\":[\"idle-user-%d\"]}", arguments: ["n", "n % 1000"],
            headers: ["Authorization": "Bearer \(admin)"])
    }

    func progress(_ line: String) {
        StandardStream.error.write("herald-bench timing: \(line)\n")
    }
}
