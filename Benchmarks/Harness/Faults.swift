import ArgumentParser
import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import NIOHTTP1
import Synchronization

/// `herald-bench faults`: Herald against an FCM emulator that fails as a provider under load
/// does, one row per fault, each against the healthy run of the same invocation
/// (docs/durability.md, "A provider that fails part of the time"). On SQLite, and with
/// `--postgres` also on two processes on PostgreSQL with one killed mid-run.
struct Faults: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the fault matrix and print what Herald delivered through each fault.")

    @Option(help: "Seconds each row sends for, as fast as Herald accepts (the sustained load).")
    var seconds = 20

    @Option(help: "Users (one device each).")
    var users = 200

    @Option(help: "Concurrent connections sending the notifications.")
    var concurrency = 32

    @Option(help: "Seconds of the full outage row.")
    var outage = 60

    @Option(help: "Seconds each row may take to drain before what is left counts as lost.")
    var patience = 600

    @Option(help: "Only the rows whose names contain one of these (comma-separated); the healthy row always runs.")
    var rows: String?

    @Flag(name: .customLong("sqlite"), inversion: .prefixedNo, help: "Whether the rows run on SQLite (--no-sqlite: only on PostgreSQL).")
    var sqliteRows = true

    @Option(help: "A PostgreSQL server (postgres://user@host:port/db) for the two-process rows; none skips them.")
    var postgres: String?

    @Option(help: "The herald binary (default: beside this one).")
    var herald: String?

    @Option(help: "Where the results go as JSON.")
    var output = "Benchmarks/results/faults.json"

    struct Row {
        var name: String
        var flags: [String]
        /// Seconds from the first send until the fault is over (the outage's length).
        var faultSeconds = 0.0
    }

    var matrix: [Row] {
        let wanted = rows?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty } ?? []
        return allRows.filter { row in row.name == "healthy" || wanted.isEmpty || wanted.contains { row.name.lowercased().contains($0) } }
    }

    var allRows: [Row] {
        [
            Row(name: "healthy", flags: []),
            Row(name: "10 % failures", flags: ["--fail-rate", "0.1"]),
            Row(name: "50 % failures", flags: ["--fail-rate", "0.5"]),
            Row(name: "67 % failures", flags: ["--fail-rate", "0.67"]),
            Row(name: "every message failing twice", flags: ["--fail-first", "2"]),
            Row(name: "2 s latency spikes (10 % of answers)", flags: ["--latency", "2", "--latency-rate", "0.1"]),
            Row(name: "30 % connection resets", flags: ["--reset-rate", "0.3"]),
            Row(name: "429 storm (50 %, Retry-After 2)", flags: ["--rate-limit-rate", "0.5"]),
            Row(name: "\(outage) s outage, then recovery", flags: ["--outage-for", String(outage)], faultSeconds: Double(outage)),
        ]
    }

    struct Outcome: Codable {
        var row: String
        var engine: String
        var accepted = 0
        var delivered = 0
        var dead = 0
        var lost = 0
        var duplicates = 0
        /// Of those, the pushes the killed process had sent and not yet recorded when it died.
        var inFlightAtKill = 0
        /// For each push accepted twice, how long before the kill it was first accepted (negative:
        /// after it), in seconds, so a duplicate the kill does not explain stands out.
        var twiceFirstAcceptedBeforeKill: [Double] = []
        /// Pushes the provider accepted per second while the sends went on (their last three
        /// quarters, past the start's warm-up): what a fault leaves of Herald's throughput.
        var deliveredPerSecond = 0.0
        var drainSeconds = 0.0
        /// Seconds from the last send until the queue drained.
        var drainAfterSends = 0.0
        /// Seconds from the fault's end until the queue drained.
        var drainAfterFault = 0.0
        /// For an outage: seconds from its end to the first push the provider accepted, and
        /// pushes accepted per second from then until the queue drained.
        var recoveryStartSeconds: Double?
        var recoveryPerSecond: Double?
        /// Of the healthy row's delivered/s: this row's, or for an outage its recovery's.
        var ratio = 0.0
        /// Whether the row met its target (docs/durability.md, "The fault bench"), and which.
        var target = ""
        var met = true
        var deadReasons: [String: Int] = [:]
    }

    /// Whether the second process has been killed yet.
    final class KillSwitch: Sendable {
        private let killed = Mutex<Date?>(nil)
        var isOn: Bool { at != nil }
        /// When the second process was killed.
        var at: Date? { killed.withLock { $0 } }
        func flip() { killed.withLock { $0 = Date() } }
    }

    /// The pushes the emulator accepted, sampled four times a second from the first send.
    final class DeliveredSamples: Sendable {
        private let samples = Mutex<[(seconds: Double, delivered: Int)]>([])
        func add(_ seconds: Double, _ delivered: Int) { samples.withLock { $0.append((seconds, delivered)) } }
        /// The count at the last sample taken at or before `seconds` (0 before any).
        func delivered(at seconds: Double) -> Int { samples.withLock { $0.last { $0.seconds <= seconds }?.delivered ?? 0 } }
        /// When the count first rose past `seconds`, and what it was just before.
        func firstRise(after seconds: Double) -> (seconds: Double, before: Int)? {
            samples.withLock { samples in
                let before = samples.last { $0.seconds <= seconds }?.delivered ?? 0
                return samples.first { $0.seconds > seconds && $0.delivered > before }.map { ($0.seconds, before) }
            }
        }
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-faults-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let heraldPath = try ChildProcess.heraldPath(herald)
        let driver = LoadDriver(concurrency: concurrency)
        var outcomes: [Outcome] = []
        do {
            let engines = (sqliteRows ? ["SQLite"] : []) + (postgres == nil ? [] : ["PostgreSQL, 2 processes, one killed"])
            for engine in engines {
                var healthy: Outcome?
                for row in matrix {
                    var outcome = try await measure(row, engine: engine, heraldPath: heraldPath, directory: directory, driver: driver)
                    if row.name == "healthy" { healthy = outcome }
                    if let healthy { judge(&outcome, against: healthy) }
                    progress(
                        "\(engine), \(row.name): \(outcome.delivered) delivered, \(outcome.dead) dead, \(outcome.lost) lost, \(outcome.duplicates) twice (\(outcome.inFlightAtKill) in flight at the kill), "
                            + "\(String(format: "%.0f", outcome.deliveredPerSecond))/s (\(String(format: "%.2f", outcome.ratio)) of healthy), "
                            + "drained \(String(format: "%.1f", outcome.drainAfterFault)) s after the fault; \(outcome.target): \(outcome.met ? "met" : "MISSED")"
                    )
                    outcomes.append(outcome)
                }
            }
        } catch {
            try? await driver.shutdown()
            throw error
        }
        try await driver.shutdown()
        print(Self.table(outcomes))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try FileManager.default.createDirectory(at: URL(fileURLWithPath: output).deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(outcomes).write(to: URL(fileURLWithPath: output))
        progress("wrote \(output)")
    }

    func measure(_ row: Row, engine: String, heraldPath: String, directory: URL, driver: LoadDriver) async throws -> Outcome {
        var outcome = Outcome(row: row.name, engine: engine)
        let account = directory.appendingPathComponent("fcm-\(UUID().uuidString).json").path
        let emulator = try await ChildProcess(
            heraldPath, ["fcm-emulator", "--port", "0", "--quiet", "--write-service-account", account] + row.flags, banner: "FCM emulator listening on")
        defer { Task { await emulator.stop() } }
        let admin = "hk_faults_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let environment = [
            "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url, "HERALD_METRICS_PUBLIC": "true",
        ]
        let database: String
        let processes: Int
        if let postgres, engine != "SQLite" {
            database = try await PostgresStore.createDatabase(
                named: "herald_faults_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())", onServer: postgres)
            processes = 2
        } else {
            database = "sqlite:" + directory.appendingPathComponent("faults-\(UUID().uuidString).sqlite").path
            processes = 1
        }
        var started: [ChildProcess] = []
        for _ in 0..<processes {
            started.append(
                try await ChildProcess(
                    heraldPath, ["serve", "--port", "0", "--database", database, "--log-level", "error"], banner: "Herald listening on",
                    environment: environment))
        }
        let servers = started
        defer { for server in servers { Task { await server.stop() } } }
        progress("\(engine), \(row.name): registering \(users) users")
        let first = servers[0].url
        let registered = await driver.run(count: users, concurrency: 16, expect: 200) { index in
            var request = LoadDriver.post("\(first)/api/notifications/register", json: "{\"fcm_token\":\"fault-token-\(index)\"}", token: admin)
            request.headers.add(name: "X-User-ID", value: "fault-user-\(index)")
            return request
        }
        guard registered.errors == 0 else { throw BenchError("\(registered.errors) registrations failed") }

        progress("\(engine), \(row.name): sending for \(seconds) s")
        let sendStarted = ContinuousClock.now
        let samples = DeliveredSamples()
        let sampler = Task {
            while !Task.isCancelled {
                if let (_, body, _) = try? await driver.call(LoadDriver.get("\(emulator.url)/emulator/stats")), let delivered = body["delivered"] as? Int {
                    samples.add((ContinuousClock.now - sendStarted).seconds, delivered)
                }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        defer { sampler.cancel() }
        // With two processes, one dies halfway through the sends with its share of the work
        // leased: the survivor takes it over once the leases run out.
        let killed = KillSwitch()
        let ids = try await send(to: servers, admin: admin, driver: driver, killingSecondAt: processes > 1 ? Double(seconds) / 2 : nil, killed: killed)
        let sent = (ContinuousClock.now - sendStarted).seconds
        outcome.accepted = ids.count
        let alive = servers[0]
        var pending = Int.max
        while pending > 0, ContinuousClock.now - sendStarted < .seconds(patience) {
            try await Task.sleep(for: .milliseconds(250))
            pending = try await scrapePending(alive, driver)
        }
        let drained = (ContinuousClock.now - sendStarted).seconds
        // One more sample, so the last count is taken after the queue drained.
        try await Task.sleep(for: .milliseconds(300))
        sampler.cancel()
        outcome.drainSeconds = drained
        outcome.drainAfterSends = max(0, drained - sent)
        outcome.drainAfterFault = max(0, drained - max(row.faultSeconds, sent))
        let warmUp = sent / 4
        outcome.deliveredPerSecond = Double(samples.delivered(at: sent) - samples.delivered(at: warmUp)) / max(sent - warmUp, 1e-9)
        if row.faultSeconds > 0, let rise = samples.firstRise(after: row.faultSeconds) {
            outcome.recoveryStartSeconds = rise.seconds - row.faultSeconds
            outcome.recoveryPerSecond = Double(samples.delivered(at: drained + 1) - rise.before) / max(drained - rise.seconds, 0.25)
        }

        // What became of each notification, from Herald's own records.
        for chunk in stride(from: 0, to: ids.count, by: 32) {
            let states = try await withThrowingTaskGroup(of: [(String, String?)].self) { group in
                for id in ids[chunk..<min(chunk + 32, ids.count)] {
                    group.addTask {
                        let (_, body, _) = try await driver.call(
                            LoadDriver.get("\(alive.url)/api/notifications/\(id)", headers: [("Authorization", "Bearer \(admin)")]))
                        return (body["deliveries"] as? [[String: Any]] ?? []).filter { $0["sink"] as? String == "fcm" }.map {
                            ($0["state"] as? String ?? "", $0["last_error"] as? String)
                        }
                    }
                }
                return try await group.reduce(into: [(String, String?)]()) { $0 += $1 }
            }
            for (state, error) in states {
                switch state {
                case "delivered": outcome.delivered += 1
                case "dead", "failed":
                    outcome.dead += 1
                    outcome.deadReasons[String((error ?? "no reason").prefix(80)), default: 0] += 1
                default: outcome.lost += 1
                }
            }
        }
        outcome.lost += max(0, ids.count - outcome.delivered - outcome.dead - outcome.lost)
        (outcome.duplicates, outcome.inFlightAtKill, outcome.twiceFirstAcceptedBeforeKill) = try await duplicates(
            at: emulator, driver: driver, killedAt: killed.at)
        return outcome
    }

    /// Sends notifications for `seconds`, spread over the processes, each worker as fast as
    /// they are accepted; the ids of those accepted. With `killingSecondAt`, the second process
    /// is killed then and the rest go to the first (a send it was answering is not counted).
    func send(to servers: [ChildProcess], admin: String, driver: LoadDriver, killingSecondAt: Double?, killed: KillSwitch) async throws -> [String] {
        let (started, seconds, users) = (ContinuousClock.now, self.seconds, self.users)
        let killer = Task {
            guard let killingSecondAt, servers.count > 1 else { return }
            try await Task.sleep(for: .seconds(killingSecondAt))
            killed.flip()
            servers[1].process.signal(SIGKILL)
        }
        defer { killer.cancel() }
        let concurrency = self.concurrency
        return try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var ids: [String] = []
                    var index = worker
                    while ContinuousClock.now - started < .seconds(seconds) {
                        let server = killed.isOn ? servers[0] : servers[index % servers.count]
                        let json = "{\"type\":\"comment\",\"title\":\"fault \(index)\",\"body\":\"b\",\"user_ids\":[\"fault-user-\(index % users)\"]}"
                        do {
                            let (status, body, _) = try await driver.call(LoadDriver.post("\(server.url)/api/notifications", json: json, token: admin))
                            if status == 202, let id = body["id"] as? String { ids.append(id) }
                        } catch  where server !== servers[0] && killed.isOn {
                            // The killed process's last answer.
                        }
                        index += concurrency
                    }
                    return ids
                }
            }
            return try await group.reduce(into: [String]()) { $0 += $1 }
        }
    }

    /// Holds the row to its target (docs/durability.md, "The fault bench"), as a ratio to the
    /// healthy row of the same invocation; every row loses nothing and delivers nothing twice.
    func judge(_ outcome: inout Outcome, against healthy: Outcome) {
        let rate = healthy.deliveredPerSecond
        outcome.ratio = rate > 0 ? (outcome.recoveryPerSecond ?? outcome.deliveredPerSecond) / rate : 0
        var targets = [outcome.inFlightAtKill > 0 ? "nothing lost, nothing twice but what the killed process had in flight" : "nothing lost or twice"]
        var met = outcome.lost == 0 && outcome.duplicates == outcome.inFlightAtKill
        switch outcome.row {
        case "10 % failures":
            targets.append("none dead")
            met = met && outcome.dead == 0
        case "50 % failures":
            targets.append("≥ 0.4 of healthy")
            met = met && outcome.ratio >= 0.4
        case "every message failing twice":
            // Two backoffs: the default's 2 s and 4 s (jitter only shortens them).
            let limit = 3 * healthy.drainAfterSends + 6
            targets.append("none dead, drained within \(String(format: "%.1f", limit)) s of the last send")
            met = met && outcome.dead == 0 && outcome.drainAfterSends <= limit
        case let name where name.contains("outage"):
            targets.append("recovery within 10 s at ≥ 0.8 of healthy")
            met = met && (outcome.recoveryStartSeconds ?? .infinity) <= 10 && outcome.ratio >= 0.8
        default: break
        }
        outcome.target = targets.joined(separator: "; ")
        outcome.met = met
    }

    func scrapePending(_ server: ChildProcess, _ driver: LoadDriver) async throws -> Int {
        let text = try await driver.text(LoadDriver.get("\(server.url)/metrics"))
        for line in text.split(separator: "\n") where line.hasPrefix("herald_queue_pending_deliveries") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }), value.isFinite, value >= 0, value < 1e12 { return Int(value) }
        }
        return Int.max
    }

    /// Messages the emulator accepted more than once (by token and notification id), and of
    /// those how many it first accepted from two seconds before `killedAt` to three after: sent by
    /// the process that was killed before it could record the provider's answer (or before the
    /// answer came: a send in flight at the kill is accepted when the provider answers it, up to
    /// its latency later), and so sent again by the survivor once their leases ran out
    /// (at-least-once; docs/durability.md).
    func duplicates(at emulator: ChildProcess, driver: LoadDriver, killedAt: Date?) async throws -> (all: Int, inFlightAtKill: Int, offsets: [Double]) {
        let (_, body, _) = try await driver.call(LoadDriver.get("\(emulator.url)/emulator/stats"))
        guard let twice = body["accepted_twice"] as? Int else { throw BenchError("the FCM emulator's stats say nothing of messages accepted twice") }
        guard let killedAt else { return (twice, 0, []) }
        let firsts = body["accepted_twice_first_at"] as? [Double] ?? []
        let window = (killedAt.timeIntervalSince1970 - 2)...(killedAt.timeIntervalSince1970 + 3)
        return (twice, firsts.filter { window.contains($0) }.count, firsts.map { killedAt.timeIntervalSince1970 - $0 }.sorted())
    }

    static func table(_ outcomes: [Outcome]) -> String {
        var lines = [
            "| engine | fault | delivered | dead | lost | twice (in flight at the kill) | delivered/s | of healthy | drained after the fault | target |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for o in outcomes {
            lines.append(
                "| \(o.engine) | \(o.row) | \(o.delivered) | \(o.dead) | \(o.lost) | \(o.duplicates) (\(o.inFlightAtKill)) | \(String(format: "%.0f", o.deliveredPerSecond)) | \(String(format: "%.2f", o.ratio)) | \(String(format: "%.1f", o.drainAfterFault)) s | \(o.met ? "met" : "MISSED"): \(o.target) |"
            )
        }
        return lines.joined(separator: "\n")
    }

    func progress(_ line: String) {
        StandardStream.error.write("herald-bench faults: \(line)\n")
    }
}
