import AsyncHTTPClient
import Foundation
import HeraldStore
import NIOHTTP1
import PostgresNIO

extension Year {
    /// Retention on the seeded year (docs/performance.md, "Retention under load"): Herald starts
    /// with every retention set so that the oldest month of the year has expired, and `wrk`
    /// posts notifications while it purges; then the purge is waited out, and the space it left
    /// is measured: SQLite's file and its free pages, PostgreSQL's tables against their live rows.
    func measurePurge(
        _ engine: String, _ database: String, acceptP99: Double?, heraldPath: String, account: String, emulator: ChildProcess, directory: URL,
        report: inout Report
    ) async throws {
        // About a month of the year expires (two to six weeks of its oldest rows, up to the first
        // of a month, so that PostgreSQL drops those months whole: docs/durability.md, "Month
        // partitions on PostgreSQL"). More would measure what a table that cannot drop months
        // (notifications) keeps: PostgreSQL reuses a deleted row's space, it does not return it,
        // so a table a sixth of whose rows were deleted is 1.2x its live rows until it refills.
        let kept = "\(Int(Date().timeIntervalSince(MonthPartitionedTable.monthStart(Date().addingTimeInterval(-351 * 86_400), offset: 1))))s"
        let sqlitePath = database.hasPrefix("sqlite:") ? String(database.dropFirst("sqlite:".count)) : nil
        let sizeBefore = sqlitePath.map(Self.fileSize) ?? 0
        let tablesBefore = sqlitePath == nil ? try await Self.tableSpace(database) : [:]
        // Beside marks (or without the request paths' accept p99), the purge is set against the
        // same load on the same database without one: a mark touches every month of its user's
        // history, as the purge's batches do.
        var baseline = acceptP99 ?? 0
        if marks > 0 || acceptP99 == nil {
            let (server, admin) = try await serve(database, heraldPath: heraldPath, account: account, emulator: emulator, environment: Self.longRetention)
            let (accepts, marked) = try await purgeLoad(server.url, admin: admin, directory: directory)
            await server.stop()
            baseline = accepts.p99Milliseconds
            report.add("\(engine) purge: accept p99, same load without a purge", baseline, unit: "ms")
            report.add("\(engine) purge: accepted, same load without a purge", accepts.perSecond, unit: "/s")
            if let marked { report.add("\(engine) purge: marks, same load without a purge", marked.perSecond, unit: "/s") }
        }
        let (server, admin) = try await serve(
            database, heraldPath: heraldPath, account: account, emulator: emulator,
            environment: ["HERALD_RETENTION_HISTORY": kept, "HERALD_RETENTION_DELIVERIES": kept, "HERALD_RETENTION_EVENTS": kept].merging(
                purgeShare.map { ["HERALD_RETENTION_PURGE_SHARE": "\($0)"] } ?? [:]
            ) { given, _ in given })
        let started = ContinuousClock.now
        let (accepts, marked) = try await purgeLoad(server.url, admin: admin, directory: directory)
        var purged: [String: Double] = [:]
        var finished: Double?
        while (ContinuousClock.now - started) < .seconds(1_800) {
            let metrics = try await Self.metrics(server.url, admin: admin)
            purged = metrics.filter { $0.key.hasPrefix("herald_retention_purged_total") }
            let behind = metrics.contains { $0.key.hasPrefix("herald_retention_behind") && $0.value > 0 }
            if !behind, (purged.first { $0.key.contains("\"history\"") }?.value ?? 0) > 0 {
                finished = (ContinuousClock.now - started).seconds
                break
            }
            try await Task.sleep(for: .seconds(1))
        }
        let rss = server.peakRSS
        await server.stop()
        report.add(
            "\(engine) purge: accept p99 while purging", accepts.p99Milliseconds, unit: "ms", ratio: accepts.p99Milliseconds / max(baseline, 1e-9),
            target: "<= 2x without a purge", met: accepts.p99Milliseconds <= 2 * baseline)
        report.add("\(engine) purge: accepted while purging", accepts.perSecond, unit: "/s")
        if let marked { report.add("\(engine) purge: marks while purging", marked.perSecond, unit: "/s") }
        for kind in ["history", "deliveries", "events"] {
            report.add("\(engine) purge: \(kind) rows purged", purged.first { $0.key.contains("\"\(kind)\"") }?.value ?? 0, unit: "")
        }
        report.add("\(engine) purge: finished after", finished ?? -1, unit: "s", target: "finishes", met: finished != nil)
        report.add("\(engine) purge: Herald peak RSS", rss, unit: "MiB", target: "<= 100 MiB", met: rss <= 100)
        if let sqlitePath {
            // The purge frees pages inside the file; the accepts beside it should reuse them, not grow it.
            report.add("\(engine) purge: file before", Double(sizeBefore) / 1_048_576, unit: "MiB")
            report.add("\(engine) purge: file after", Double(Self.fileSize(sqlitePath)) / 1_048_576, unit: "MiB")
        } else {
            for (table, after) in try await Self.tableSpace(database).sorted(by: { $0.key < $1.key }) {
                let before = tablesBefore[table]?.ratio ?? 0
                report.add("\(engine) purge: \(table) size / live rows before", before, unit: "x")
                report.add("\(engine) purge: \(table) size / live rows after", after.ratio, unit: "x", target: "<= 1.2x", met: after.ratio <= 1.2)
            }
        }
    }

    /// `wrk`'s accepts for `--seconds`, and beside them (with `--marks`) ordinary users' inboxes
    /// marked all seen, one user at random per request.
    func purgeLoad(_ url: String, admin: String, directory: URL) async throws -> (accepts: Wrk.Result, marks: Wrk.Result?) {
        let wrk = Wrk(directory: directory, connections: concurrency, duration: .seconds(seconds))
        guard marks > 0 else { return (try await wrk.run("\(url)/api/notifications", Self.acceptLoad(admin: admin)), nil) }
        var marking = Wrk(directory: directory, connections: marks, duration: .seconds(seconds))
        marking.threads = min(marking.threads, marks)
        var mark = Wrk.Request.post(json: #"{"all":true,"change":"seen"}"#, headers: ["Authorization": "Bearer \(admin)"])
        mark.varyingHeaders["X-User-ID"] = "'seed-user-' .. math.random(\(SeedPlan.heavyUsers), \(users - 1))"
        async let marked = marking.run("\(url)/api/inbox/mark", mark)
        let accepts = try await wrk.run("\(url)/api/notifications", Self.acceptLoad(admin: admin))
        return (accepts, try await marked)
    }

    static func fileSize(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    /// Each growing table's size against the bytes of its live rows (`pgstattuple`).
    static func tableSpace(_ url: String) async throws -> [String: (size: Double, ratio: Double)] {
        try await PostgresStore.using(url) { store in
            try await store.withConnection { session in
                try await session.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
                var space: [String: (size: Double, ratio: Double)] = [:]
                for table in ["history", "deliveries", "events", "notifications"] {
                    // A partitioned table (history, deliveries, events) is the sum of its partitions.
                    let row = try await session.row(
                        PostgresQuery(
                            unsafeSQL: """
                                SELECT COALESCE(SUM(s.table_len), 0)::bigint AS table_len, COALESCE(SUM(s.tuple_len), 0)::bigint AS tuple_len
                                FROM (SELECT '\(table)'::regclass AS r
                                      WHERE NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = '\(table)'::regclass)
                                      UNION ALL SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = '\(table)'::regclass) AS t,
                                LATERAL pgstattuple(t.r) AS s
                                """))
                    let (size, live) = (Double(try row?.integer("table_len") ?? 0), Double(try row?.integer("tuple_len") ?? 0))
                    space[table] = (size, size / max(live, 1))
                }
                return space
            }
        }
    }

    /// Herald's metrics, one value per series.
    static func metrics(_ url: String, admin: String) async throws -> [String: Double] {
        var request = HTTPClientRequest(url: "\(url)/metrics")
        request.headers.add(name: "Authorization", value: "Bearer \(admin)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let text = String(buffer: try await response.body.collect(upTo: 1 << 22))
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }
}
