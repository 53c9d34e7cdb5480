import ArgumentParser
import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldStore
import NIOHTTP1
import PostgresNIO

/// `herald-bench year`: the request paths on a seeded year (``Seed``) against the same paths on
/// an empty database, same run, same binary, on SQLite and (with `--postgres`) PostgreSQL
/// (docs/performance.md, "A seeded year").
struct Year: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Accepts, history pages, inbox counts, registrations, the feed's and the cards' 304 and RSS: a seeded year against an empty database.")

    @Option(help: "History rows of the seeded year (its users get one device each; see `herald-bench seed`).")
    var history = 10_000_000

    @Option(help: "Users of the seeded year.")
    var users = 1_000_000

    @Option(help: "Seconds each wrk load runs.")
    var seconds = 10

    @Option(help: "Concurrent connections for the accept load (the GET loads use the same).")
    var concurrency = 16

    @Option(
        help:
            "Measures of each database, in the order empty, seeded, seeded, empty, ... (each figure is their mean: a drift of the machine's speed through the run weighs on both alike)."
    )
    var rounds = 2

    @Option(help: "A PostgreSQL server (postgres://user@host:port/db) to run the same on; none runs SQLite alone.")
    var postgres: String?

    @Option(help: "A PostgreSQL database seeded already by `herald-bench seed` with these sizes, used instead of seeding one (it is not dropped).")
    var postgresSeeded: String?

    @Flag(inversion: .prefixedNo, help: "Measure SQLite (--no-sqlite: PostgreSQL alone).")
    var sqlite = true

    @Option(help: "Keep the seeded databases in this folder and reuse them when their sizes match (seeding 10 M rows takes minutes).")
    var keep: String?

    @Option(help: "The herald binary (default: beside this one, so the release build).")
    var herald: String?

    @Flag(inversion: .prefixedNo, help: "Then let the seeded year's oldest month expire under accepts (the seeded database is used up).")
    var retention = true

    @Flag(help: "Only the purge (with --marks, its baseline too), on the seeded database: no empty database, no request paths.")
    var purgeOnly = false

    @Option(
        help:
            "Connections marking ordinary users' inboxes all seen beside the purge's accepts (0: none). With marks, the purge's accept p99 is set against the same load on the same database without a purge."
    )
    var marks = 0

    @Option(help: "The purge's share of the database while it is behind (Herald's `retention.purge_share`; default Herald's own).")
    var purgeShare: Double?

    @Option(help: "Where the results go as JSON.")
    var output = "Benchmarks/results/year.json"

    func validate() throws {
        guard users >= Self.emptyUsers else {
            throw ValidationError("--users must be at least \(Self.emptyUsers): the empty database's users are the seed's first")
        }
        guard history >= 0, history <= 10_000_000_000 else { throw ValidationError("--history must be 0 to 10000000000") }
        guard seconds >= 1, seconds <= 3_600 else { throw ValidationError("--seconds must be 1 to 3600") }
        guard concurrency >= 1, concurrency <= 10_000 else { throw ValidationError("--concurrency must be 1 to 10000") }
        guard rounds >= 1, rounds <= 10 else { throw ValidationError("--rounds must be 1 to 10") }
        guard marks >= 0, marks <= 10_000 else { throw ValidationError("--marks must be 0 to 10000") }
        guard !purgeOnly || retention else { throw ValidationError("--purge-only needs the purge (not --no-retention)") }
        guard purgeShare.map({ $0 >= 0.05 && $0 <= 1 }) ?? true else { throw ValidationError("--purge-share must be 0.05 to 1") }
        guard postgresSeeded == nil || postgres != nil else {
            throw ValidationError("--postgres-seeded needs --postgres (the server the empty database goes to)")
        }
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-year-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let heraldPath = try ChildProcess.heraldPath(herald)
        let report = try await LoadDriver.with(concurrency: concurrency) { driver in
            var report = Report(concurrency: concurrency)
            let account = directory.appendingPathComponent("fcm.json").path
            let emulator = try await ChildProcess(
                heraldPath, ["fcm-emulator", "--port", "0", "--quiet", "--write-service-account", account], banner: "FCM emulator listening on")
            var engines: [(name: String, empty: String, seeded: String)] = []
            let kept = keep.map { URL(fileURLWithPath: $0) } ?? directory
            try FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
            let seededFile = kept.appendingPathComponent("year-\(users)-\(history).sqlite").path
            if sqlite {
                if !FileManager.default.fileExists(atPath: seededFile) {
                    try await seed("sqlite:" + seededFile + ".partial", users: users, history: history)
                    try FileManager.default.moveItem(atPath: seededFile + ".partial", toPath: seededFile)
                }
                let emptyFile = directory.appendingPathComponent("empty.sqlite").path
                try await seed("sqlite:" + emptyFile, users: Self.emptyUsers, history: 0)
                engines.append(("SQLite", "sqlite:" + emptyFile, "sqlite:" + seededFile))
            }
            // The databases this run creates, dropped at its end (a seeded year is gigabytes).
            var created: [String] = []
            if let postgres {
                let run = UUID().uuidString.prefix(8).lowercased()
                func create(_ name: String) async throws -> String {
                    created.append(name)
                    return try await PostgresStore.createDatabase(named: name, onServer: postgres)
                }
                let seeded: String
                if let postgresSeeded {
                    seeded = postgresSeeded
                } else {
                    seeded = try await create("herald_year_\(run)")
                    try await seed(seeded, users: users, history: history)
                }
                let empty = try await create("herald_empty_\(run)")
                try await seed(empty, users: Self.emptyUsers, history: 0)
                engines.append(("PostgreSQL", empty, seeded))
            }
            for engine in engines {
                var figures: (empty: [[String: Double]], seeded: [[String: Double]]) = ([], [])
                for round in purgeOnly ? [] : Array(0..<rounds) {
                    // Empty then seeded, then the other way round: a drift of the machine's speed
                    // (and a seed's file still settling in memory, which slowed the first measure
                    // after each 50 M-row seed) weighs on both databases alike.
                    let order = round.isMultiple(of: 2) ? [true, false] : [false, true]
                    for empty in order {
                        progress("\(engine.name): \(empty ? "empty" : "seeded") database, round \(round + 1) of \(rounds)")
                        let measured = try await measure(
                            empty ? engine.empty : engine.seeded, heraldPath: heraldPath, account: account, emulator: emulator, driver: driver,
                            directory: directory)
                        progress(
                            "\(engine.name) \(empty ? "empty" : "seeded"), round \(round + 1): "
                                + Self.figures.map { "\($0.0) \(Self.rounded(measured[$0.0] ?? 0))" }.joined(separator: ", "))
                        if empty { figures.empty.append(measured) } else { figures.seeded.append(measured) }
                    }
                }
                for (name, target) in Self.figures where !purgeOnly {
                    let (empty, seeded) = (Self.mean(name, of: figures.empty), Self.mean(name, of: figures.seeded))
                    let ratio = seeded / max(empty, 1e-9)
                    let (goal, met) =
                        switch target {
                        case .rate: (">= 0.80 of empty", ratio >= 0.8)
                        case .latency: ("<= 1.5x empty", ratio <= 1.5)
                        case .memory: ("<= 100 MiB", seeded <= 100)
                        }
                    report.add("\(engine.name) \(name): empty", empty, unit: Self.unit(name))
                    report.add("\(engine.name) \(name): seeded", seeded, unit: Self.unit(name), ratio: ratio, target: goal, met: met)
                }
                // Last, as it deletes the seeded year's oldest month.
                if retention {
                    progress("\(engine.name): the oldest month expiring under accepts")
                    try await measurePurge(
                        engine.name, engine.seeded, acceptP99: purgeOnly ? nil : Self.mean("accept p99", of: figures.seeded), heraldPath: heraldPath,
                        account: account,
                        emulator: emulator,
                        directory: directory, report: &report)
                    if engine.seeded == "sqlite:" + seededFile {
                        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: seededFile + suffix) }
                    }
                }
            }
            await emulator.stop()
            if let postgres, !created.isEmpty { try await Self.drop(created, on: postgres) }
            return report
        }
        print(report.table())
        try report.write(to: output)
        progress("wrote \(output)")
    }

    /// Users of the empty database: the heavy users and enough others to write to.
    static let emptyUsers = SeedPlan.heavyUsers + 100

    enum Target { case rate, latency, memory }

    static let figures: [(String, Target)] = [
        ("accepted with pushes", .rate), ("accept p99", .latency), ("history first page p99", .latency),
        ("history deep page p99", .latency), ("inbox counts", .rate), ("inbox counts p99", .latency),
        ("registrations", .rate), ("registration p99", .latency), ("feed 304", .rate), ("cards pull 304", .rate), ("peak RSS", .memory),
    ]

    /// A figure over the rounds: the mean, but the peak of peak RSS.
    static func mean(_ name: String, of rounds: [[String: Double]]) -> Double {
        let values = rounds.map { $0[name] ?? 0 }
        if name == "peak RSS" { return values.max() ?? 0 }
        return values.reduce(0, +) / Double(max(values.count, 1))
    }

    static func rounded(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : String(format: "%.2f", value)
    }

    static func unit(_ name: String) -> String {
        if name.hasSuffix("p99") { return "ms" }
        if name == "peak RSS" { return "MiB" }
        return "/s"
    }

    func seed(_ database: String, users: Int, history: Int) async throws {
        progress("seeding \(database.hasPrefix("sqlite:") ? "SQLite" : "PostgreSQL"): \(users) users, \(history) history rows")
        try await SeedPlan(users: users, history: history, events: history / 10, recipients: 5, days: 365, end: Date()).write(into: database)
    }

    /// Herald on `database` with the emulator for pushes, a fresh admin key and `environment`
    /// (retention settings).
    func serve(
        _ database: String, heraldPath: String, account: String, emulator: ChildProcess, environment: [String: String]
    ) async throws
        -> (server: ChildProcess, admin: String)
    {
        let admin = "hk_year_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let server = try await ChildProcess(
            heraldPath, ["serve", "--port", "0", "--database", database, "--log-level", "warning"], banner: "Herald listening on",
            environment: ["HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url].merging(
                environment
            ) { _, given in given })
        return (server, admin)
    }

    /// Retention long enough that nothing of the seeded year expires.
    static let longRetention = ["HERALD_RETENTION_DELIVERIES": "3650d", "HERALD_RETENTION_EVENTS": "3650d"]

    /// `wrk`'s accepts: a comment for one of the heavy users (each has a device, so a push each).
    static func acceptLoad(admin: String) -> Wrk.Request {
        .post(
            json: #"{"type":"comment","title":"Year %d","body":"b","user_ids":["seed-user-%d"]}"#, arguments: ["n", "n % \(SeedPlan.heavyUsers)"],
            headers: ["Authorization": "Bearer \(admin)"])
    }

    /// One Herald on `database`: every figure of ``figures``.
    func measure(
        _ database: String, heraldPath: String, account: String, emulator: ChildProcess, driver: LoadDriver, directory: URL
    ) async throws -> [String: Double] {
        // Retention long enough that nothing of the year is purged while it is measured: the
        // purge is measured on its own (docs/performance.md, "Retention under load").
        let (server, admin) = try await serve(database, heraldPath: heraldPath, account: account, emulator: emulator, environment: Self.longRetention)
        var figures: [String: Double] = [:]
        let wrk = Wrk(directory: directory, connections: concurrency, duration: .seconds(seconds))
        let heavy = "seed-user-0"
        let acting = [("Authorization", "Bearer \(admin)"), ("X-User-ID", heavy)]

        // Accepts with pushes, to the heavy users, after as many unmeasured (a file written long
        // before starts with a cold cache: a first run measured that, not the data's size); the
        // reads below wait for their pushes to drain.
        let acceptLoad = Self.acceptLoad(admin: admin)
        let pushedBefore = try await driver.delivered(at: emulator)
        let warm = try await wrk.run("\(server.url)/api/notifications", acceptLoad)
        let accepts = try await wrk.run("\(server.url)/api/notifications", acceptLoad)
        figures["accepted with pushes"] = accepts.perSecond
        figures["accept p99"] = accepts.p99Milliseconds
        let queued = pushedBefore + warm.requests - warm.errors + accepts.requests - accepts.errors
        _ = try await driver.pushes(at: emulator, reaching: queued, within: .seconds(180), every: .milliseconds(100))

        // History: the first page, then a page from the middle of everything written.
        let historyURL = "\(server.url)/api/notifications/history?limit=50"
        let (_, page, _) = try await driver.call(LoadDriver.get(historyURL, headers: acting))
        // The first page's cursor is about the newest row's sequence number: half of it is a
        // page from the middle of the table (the user's rows are spread through it).
        let newest = Int((page["next"] as? String) ?? "") ?? 2
        let first = await driver.run(count: 2_000, concurrency: 1, expect: 200) { _ in LoadDriver.get(historyURL, headers: acting) }
        figures["history first page p99"] = first.percentileMilliseconds(99)
        let deep = await driver.run(count: 2_000, concurrency: 1, expect: 200) { _ in
            LoadDriver.get("\(historyURL)&before=\(max(newest / 2, 1))", headers: acting)
        }
        figures["history deep page p99"] = deep.percentileMilliseconds(99)

        let counts = try await wrk.run("\(server.url)/api/inbox/counts", .get(headers: Dictionary(uniqueKeysWithValues: acting)))
        figures["inbox counts"] = counts.perSecond
        figures["inbox counts p99"] = counts.p99Milliseconds

        let registrations = await driver.run(count: 5_000, concurrency: concurrency, expect: 200) { index in
            var request = LoadDriver.post("\(server.url)/api/notifications/register", json: #"{"fcm_token":"year-token-\#(index)"}"#, token: admin)
            request.headers.add(name: "X-User-ID", value: "year-user-\(index)")
            return request
        }
        figures["registrations"] = registrations.perSecond
        figures["registration p99"] = registrations.percentileMilliseconds(99)

        // The feed's and the cards' 304: what an app polls most.
        let expires = Timestamp.format(Date().addingTimeInterval(86_400))
        for index in 0..<20 {
            _ = try await driver.call(
                LoadDriver.post(
                    "\(server.url)/api/feed/messages", json: #"{"title":"Year \#(index)","body":"b","expires_at":"\#(expires)","priority":1}"#,
                    token: admin))
        }
        let (_, _, feedHeaders) = try await driver.call(LoadDriver.get("\(server.url)/feed/index.json"))
        let feed = try await wrk.run("\(server.url)/feed/index.json", .get(headers: ["If-None-Match": feedHeaders.first(name: "ETag") ?? ""]))
        figures["feed 304"] = feed.perSecond
        let cards = (0..<100).map { #"{"id":"year-card-\#($0)","metadata":{"title":"Card \#($0)"},"posted_at":"2026-11-01T10:00:00Z"}"# }
        _ = try await driver.call(LoadDriver.post("\(server.url)/api/cards", json: #"{"cards":[\#(cards.joined(separator: ","))]}"#, token: admin))
        var scores = LoadDriver.post(
            "\(server.url)/api/pool/scores",
            json: (0..<100).map { #"{"user_id":"\#(heavy)","card":"year-card-\#($0)","score":0.\#($0),"timestamp":1}"# }.joined(separator: "\n"), token: admin)
        scores.headers.replaceOrAdd(name: "Content-Type", value: "application/x-ndjson")
        _ = try await driver.call(scores)
        let pull = "\(server.url)/api/pull?limit=100"
        let (_, _, pullHeaders) = try await driver.call(LoadDriver.get(pull, headers: acting))
        let conditional = acting + [("If-None-Match", pullHeaders.first(name: "ETag") ?? "")]
        let cardsPull = try await wrk.run(pull, .get(headers: Dictionary(uniqueKeysWithValues: conditional)))
        figures["cards pull 304"] = cardsPull.perSecond
        figures["peak RSS"] = server.peakRSS
        await server.stop()
        return figures
    }

    /// Drops the databases the run created: a seeded year takes gigabytes of the operator's server.
    static func drop(_ names: [String], on server: String) async throws {
        try await PostgresStore.using(server) { store in
            for name in names {
                try await store.withConnection { session in try await session.execute(PostgresQuery(unsafeSQL: "DROP DATABASE \"\(name)\" WITH (FORCE)")) }
            }
        }
    }

    func progress(_ line: String) {
        StandardStream.error.write("herald-bench year: \(line)\n")
    }
}
