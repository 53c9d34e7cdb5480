import ArgumentParser
import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import NIOHTTP1

/// `herald-bench faults`: Herald against an FCM emulator that fails as a provider under load
/// does, one row per fault, each against the healthy run of the same invocation
/// (docs/durability.md, "A provider that fails part of the time"). On SQLite, and with
/// `--postgres` also on two processes on PostgreSQL with one killed mid-run.
struct Faults: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the fault matrix and print what Herald delivered through each fault.")

    @Option(help: "Notifications per row, each to one user's device.")
    var notifications = 2_000

    @Option(help: "Users (one device each).")
    var users = 200

    @Option(help: "Concurrent connections sending the notifications.")
    var concurrency = 32

    @Option(help: "Seconds of the full outage row.")
    var outage = 60

    @Option(help: "Seconds each row may take to drain before what is left counts as lost.")
    var patience = 600

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

    var rows: [Row] {
        [
            Row(name: "healthy", flags: []),
            Row(name: "10 % failures", flags: ["--fail-rate", "0.1"]),
            Row(name: "50 % failures", flags: ["--fail-rate", "0.5"]),
            Row(name: "67 % failures", flags: ["--fail-rate", "0.67"]),
            Row(name: "every message failing twice", flags: ["--fail-first", "2"]),
            Row(name: "2 s latency", flags: ["--latency", "2"]),
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
        var deliveredPerSecond = 0.0
        var drainSeconds = 0.0
        /// Seconds from the fault's end until the queue drained.
        var drainAfterFault = 0.0
        var ratio = 0.0
        var deadReasons: [String: Int] = [:]
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-faults-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let heraldPath = herald ?? bench.deletingLastPathComponent().appendingPathComponent("herald").path
        guard FileManager.default.isExecutableFile(atPath: heraldPath) else { throw BenchError("no herald binary at \(heraldPath)") }
        let driver = LoadDriver(concurrency: concurrency)
        var outcomes: [Outcome] = []
        do {
            for engine in ["SQLite"] + (postgres == nil ? [] : ["PostgreSQL, 2 processes, one killed"]) {
                var healthy: Double?
                for row in rows {
                    var outcome = try await measure(row, engine: engine, heraldPath: heraldPath, directory: directory, driver: driver)
                    if row.name == "healthy" { healthy = outcome.deliveredPerSecond }
                    outcome.ratio = healthy.map { $0 > 0 ? outcome.deliveredPerSecond / $0 : 0 } ?? 0
                    progress(
                        "\(engine), \(row.name): \(outcome.delivered) delivered, \(outcome.dead) dead, \(outcome.lost) lost, \(outcome.duplicates) twice, "
                            + "\(String(format: "%.0f", outcome.deliveredPerSecond))/s (\(String(format: "%.2f", outcome.ratio)) of healthy), drained \(String(format: "%.1f", outcome.drainAfterFault)) s after the fault"
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

        progress("\(engine), \(row.name): sending \(notifications) notifications")
        let sendStarted = ContinuousClock.now
        let ids = try await send(to: servers, admin: admin, driver: driver)
        outcome.accepted = ids.count
        if processes > 1 {
            // One process dies with its share of the work leased: the survivor takes it over
            // once the leases run out.
            servers[1].process.signal(SIGKILL)
        }
        let alive = servers[0]
        var pending = Int.max
        while pending > 0, ContinuousClock.now - sendStarted < .seconds(patience) {
            try await Task.sleep(for: .milliseconds(250))
            pending = try await scrapePending(alive, driver)
        }
        let drained = ContinuousClock.now - sendStarted
        outcome.drainSeconds = drained.seconds
        outcome.drainAfterFault = max(0, drained.seconds - row.faultSeconds)

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
        outcome.duplicates = try await duplicates(at: emulator, driver: driver)
        outcome.deliveredPerSecond = Double(outcome.delivered) / max(drained.seconds, 1e-9)
        return outcome
    }

    /// Sends the notifications, spread over the processes; the ids of those accepted.
    func send(to servers: [ChildProcess], admin: String, driver: LoadDriver) async throws -> [String] {
        try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var ids: [String] = []
                    for index in stride(from: worker, to: notifications, by: concurrency) {
                        let server = servers[index % servers.count]
                        let json = "{\"type\":\"comment\",\"title\":\"fault \(index)\",\"body\":\"b\",\"user_ids\":[\"fault-user-\(index % users)\"]}"
                        let (status, body, _) = try await driver.call(LoadDriver.post("\(server.url)/api/notifications", json: json, token: admin))
                        if status == 202, let id = body["id"] as? String { ids.append(id) }
                    }
                    return ids
                }
            }
            return try await group.reduce(into: [String]()) { $0 += $1 }
        }
    }

    func scrapePending(_ server: ChildProcess, _ driver: LoadDriver) async throws -> Int {
        let text = try await driver.text(LoadDriver.get("\(server.url)/metrics"))
        for line in text.split(separator: "\n") where line.hasPrefix("herald_queue_pending_deliveries") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }), value.isFinite, value >= 0, value < 1e12 { return Int(value) }
        }
        return Int.max
    }

    /// Messages the emulator accepted more than once (by token and notification id).
    func duplicates(at emulator: ChildProcess, driver: LoadDriver) async throws -> Int {
        let (_, body, _) = try await driver.call(LoadDriver.get("\(emulator.url)/emulator/messages"))
        var seen: [String: Int] = [:]
        for request in body["requests"] as? [[String: Any]] ?? [] where request["status"] as? Int == 200 {
            let message = (request["request"] as? [String: Any])?["message"] as? [String: Any]
            let key = "\(message?["token"] as? String ?? "")|\((message?["data"] as? [String: Any])?["id"] as? String ?? "")"
            seen[key, default: 0] += 1
        }
        return seen.values.reduce(0) { $0 + max(0, $1 - 1) }
    }

    static func table(_ outcomes: [Outcome]) -> String {
        var lines = [
            "| engine | fault | delivered | dead | lost | twice | delivered/s | of healthy | drained after the fault |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for o in outcomes {
            lines.append(
                "| \(o.engine) | \(o.row) | \(o.delivered) | \(o.dead) | \(o.lost) | \(o.duplicates) | \(String(format: "%.0f", o.deliveredPerSecond)) | \(String(format: "%.2f", o.ratio)) | \(String(format: "%.1f", o.drainAfterFault)) s |"
            )
        }
        return lines.joined(separator: "\n")
    }

    func progress(_ line: String) {
        StandardStream.error.write("herald-bench faults: \(line)\n")
    }
}
