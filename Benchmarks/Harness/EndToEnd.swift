import AsyncHTTPClient
import Foundation
import HeraldStore
import HeraldTestSupport
import NIOHTTP1

/// Accepts and pushes together, against a stand-in for FCM that answers at once: nginx with a
/// canned token and a canned send answer, so the figure is Herald's and not an emulator's.
extension Run {
    /// The target run against nginx over HTTP/1.1 (so the figure is Herald's, not a stand-in's),
    /// then HTTP/1.1 against HTTP/2 with Herald's own FCM emulator on both sides (plain, then
    /// TLS): nginx 1.22 answers AsyncHTTPClient's HTTP/2 streams hundreds of milliseconds late,
    /// a stand-in artefact Google's servers do not have.
    func measureEndToEnd(report: inout Report, driver: LoadDriver, wrk: Wrk, heraldPath: String, account: String, admin: String, directory: URL) async throws {
        guard let nginxPath = ["/usr/sbin/nginx", "/usr/bin/nginx"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BenchError("nginx is not installed: ./scripts/bench installs it from Debian's packages")
        }
        progress("end to end: nginx stand-in for FCM")
        let standIn = try NginxStandIn(nginx: nginxPath, directory: directory.appendingPathComponent("nginx"))
        defer { standIn.stop() }
        let ceiling = try await wrk.run(
            "\(standIn.url)/v1/projects/herald-emulator/messages:send", .post(json: "{\"message\":{\"token\":\"ceiling-%d\"}}", arguments: ["n"]))
        report.add("stand-in ceiling (nginx, wrk)", ceiling.perSecond, unit: "/s")
        // The emulator's key signs the token request; the stand-in takes any assertion.
        let standInAccount = directory.appendingPathComponent("standin-account.json").path
        var fields = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: account))) as? [String: Any] ?? [:]
        fields["token_uri"] = "\(standIn.url)/token"
        try JSONSerialization.data(withJSONObject: fields).write(to: URL(fileURLWithPath: standInAccount))
        let nginxTarget = EndToEndTarget(url: standIn.url, account: standInAccount, caFile: nil)
        _ = try await measureEndToEnd(
            "nginx, HTTP/1.1", target: nginxTarget, ceiling: ceiling.perSecond, report: &report, driver: driver, wrk: wrk, heraldPath: heraldPath,
            admin: admin, directory: directory.appendingPathComponent("e2e-nginx"))
        if let postgres {
            for processes in [1, 2] {
                try await measurePostgres(
                    server: postgres, processes: processes, target: nginxTarget, ceiling: ceiling.perSecond, report: &report, driver: driver, wrk: wrk,
                    heraldPath: heraldPath, admin: admin)
            }
        }

        var http1 = 0.0
        for tls in [false, true] {
            let label = tls ? "emulator, HTTP/2" : "emulator, HTTP/1.1"
            let folder = directory.appendingPathComponent(tls ? "e2e-h2" : "e2e-h1")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let emulatorAccount = folder.appendingPathComponent("account.json").path
            let ca = folder.appendingPathComponent("ca.pem").path
            let emulator = try await ChildProcess(
                heraldPath,
                ["fcm-emulator", "--port", "0", "--quiet", "--write-service-account", emulatorAccount] + (tls ? ["--tls", "--write-ca", ca] : []),
                banner: "FCM emulator listening on")
            let url = "\(tls ? "https" : "http")://127.0.0.1:\(emulator.port)"
            let pushes = try await measureEndToEnd(
                label, target: EndToEndTarget(url: url, account: emulatorAccount, caFile: tls ? ca : nil), ceiling: nil, http1Pushes: http1,
                report: &report, driver: driver, wrk: wrk, heraldPath: heraldPath, admin: admin, directory: folder)
            await emulator.stop()
            if !tls { http1 = pushes }
        }
    }

    /// Accepts and pushes together for `endToEndSeconds` against `target`, with a fresh database.
    /// - Parameters:
    ///   - ceiling: the target's own ceiling, for the ratio.
    ///   - http1Pushes: for an HTTP/2 run, the HTTP/1.1 run's pushes, for the ratio instead.
    /// - Returns: pushes/s while accepts ran.
    private func measureEndToEnd(
        _ label: String, target: EndToEndTarget, ceiling: Double?, http1Pushes: Double = 0, report: inout Report, driver: LoadDriver, wrk: Wrk,
        heraldPath: String, admin: String, directory: URL
    ) async throws -> Double {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let server = try await ChildProcess(
            heraldPath,
            ["serve", "--port", "0", "--database", "sqlite:" + directory.appendingPathComponent("e2e.sqlite").path, "--log-level", "warning"],
            banner: "Herald listening on", environment: environment(pushingTo: target, admin: admin)
        )
        defer { Task { await server.stop() } }
        try await registerUsers(at: server, prefix: "e2e", admin: admin, driver: driver)

        progress("end to end (\(label)): accepts and pushes together for \(endToEndSeconds) s")
        let before = try await scrape(server, driver)
        let started = ContinuousClock.now
        var load = wrk
        load.duration = .seconds(endToEndSeconds)
        let accepts = try await load.run("\(server.url)/api/notifications", acceptLoad(prefix: "e2e", admin: admin))
        let after = try await scrape(server, driver)
        let elapsed = (ContinuousClock.now - started).seconds
        let pushes = Double(after.pushed - before.pushed) / elapsed
        report.add("e2e accepted (\(label))", accepts.perSecond, unit: "/s")
        if let ceiling {
            report.add("e2e pushes (\(label), accepts running)", pushes, unit: "/s", ratio: pushes / ceiling, target: ">= 10000/s", met: pushes >= 10_000)
        } else {
            // An HTTP/2 run's ratio is to the HTTP/1.1 run's pushes against the same emulator.
            report.add("e2e pushes (\(label), accepts running)", pushes, unit: "/s", ratio: http1Pushes > 0 ? pushes / http1Pushes : nil)
        }
        // The targets are the nginx run's; the emulator runs compare protocols on the same machine.
        let targeted = ceiling != nil
        report.add(
            "e2e pending deliveries at the end (\(label))", Double(after.pending), unit: "", target: targeted ? "not growing (<= 1 s of pushes)" : nil,
            met: targeted ? Double(after.pending) <= max(pushes, 1) : nil)
        report.add(
            "e2e Herald peak RSS (\(label))", server.peakRSS, unit: "MiB", target: targeted ? "<= 80 MiB" : nil, met: targeted ? server.peakRSS <= 80 : nil)
        await server.stop()
        return pushes
    }

    /// The scale-out mode: `processes` Herald processes on one fresh PostgreSQL database, each
    /// under its share of the accept load, pushing to nginx.
    private func measurePostgres(
        server: String, processes: Int, target: EndToEndTarget, ceiling: Double, report: inout Report, driver: LoadDriver, wrk: Wrk, heraldPath: String,
        admin: String
    ) async throws {
        let label = "PostgreSQL, \(processes) process\(processes == 1 ? "" : "es")"
        progress("end to end (\(label)): a fresh database")
        let database = try await PostgresStore.createDatabase(
            named: "herald_bench_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())", onServer: server)
        var servers: [ChildProcess] = []
        for _ in 0..<processes {
            servers.append(
                try await ChildProcess(
                    heraldPath, ["serve", "--port", "0", "--database", database, "--log-level", "warning"], banner: "Herald listening on",
                    environment: environment(pushingTo: target, admin: admin)))
        }
        defer { for server in servers { Task { await server.stop() } } }
        try await registerUsers(at: servers[0], prefix: "pg", admin: admin, driver: driver)

        progress("end to end (\(label)): accepts and pushes together for \(endToEndSeconds) s")
        var before = 0
        for server in servers { before += try await scrape(server, driver).pushed }
        let started = ContinuousClock.now
        var load = wrk
        load.duration = .seconds(endToEndSeconds)
        load.connections = max(concurrency / processes, 1)
        let (share, request) = (load, acceptLoad(prefix: "pg", admin: admin))
        let results = try await withThrowingTaskGroup(of: Wrk.Result.self) { group in
            for server in servers {
                let url = "\(server.url)/api/notifications"
                group.addTask { try await share.run(url, request) }
            }
            return try await group.reduce(into: [Wrk.Result]()) { $0.append($1) }
        }
        var after = 0
        var pending = 0
        for server in servers {
            let scraped = try await scrape(server, driver)
            after += scraped.pushed
            pending = scraped.pending
        }
        let elapsed = (ContinuousClock.now - started).seconds
        let pushes = Double(after - before) / elapsed
        let accepted = results.reduce(0) { $0 + $1.perSecond }
        let p99 = results.map(\.p99Milliseconds).max() ?? 0
        let targeted = processes == 1
        report.add("e2e accepted (\(label))", accepted, unit: "/s")
        report.add(
            "e2e pushes (\(label), accepts running)", pushes, unit: "/s", ratio: pushes / ceiling, target: targeted ? ">= 2500/s" : nil,
            met: targeted ? pushes >= 2_500 : nil)
        report.add("e2e accept p99 (\(label))", p99, unit: "ms", target: targeted ? "<= 25 ms" : nil, met: targeted ? p99 <= 25 : nil)
        report.add("e2e pending deliveries at the end (\(label))", Double(pending), unit: "")
        for server in servers { await server.stop() }
    }

    /// The environment of a Herald pushing to `target`, its metrics public for ``scrape(_:_:)``.
    func environment(pushingTo target: EndToEndTarget, admin: String) -> [String: String] {
        var environment = [
            "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_FCM_CREDENTIALS": target.account, "HERALD_FCM_ENDPOINT": target.url, "HERALD_METRICS_PUBLIC": "true",
        ]
        if let ca = target.caFile { environment["HERALD_FCM_CA_FILE"] = ca }
        return tuning.merging(environment) { _, new in new }
    }

    /// FCM deliveries made so far and deliveries pending, from Herald's `/metrics`.
    func scrape(_ server: ChildProcess, _ driver: LoadDriver) async throws -> (pushed: Int, pending: Int) {
        let text = try await driver.text(LoadDriver.get("\(server.url)/metrics"))
        var pushed = 0
        var pending = 0
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1]) else { continue }
            if line.hasPrefix("herald_deliveries_total{"), line.contains("sink=\"fcm\""), line.contains("outcome=\"delivered\"") {
                pushed += Int(value)
            } else if line.hasPrefix("herald_queue_pending_deliveries") {
                pending = Int(value)
            }
        }
        return (pushed, pending)
    }
}

/// Where an end-to-end run's Herald sends: the FCM endpoint, the service account for it, and the
/// certificate to trust over TLS.
struct EndToEndTarget {
    var url: String
    var account: String
    var caFile: String?
}

/// nginx on a free loopback port answering FCM's token and send endpoints with canned 200s.
final class NginxStandIn: Sendable {
    let process: SpawnedProcess
    let port: Int

    init(nginx: String, directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let port = try Loopback.freePort()
        let root = directory.path
        let configuration = """
            worker_processes 1;
            daemon off;
            pid \(root)/nginx.pid;
            error_log \(root)/error.log warn;
            events { worker_connections 4096; }
            http {
                access_log off;
                client_body_temp_path \(root)/body;
                proxy_temp_path \(root)/proxy;
                fastcgi_temp_path \(root)/fastcgi;
                uwsgi_temp_path \(root)/uwsgi;
                scgi_temp_path \(root)/scgi;
                keepalive_requests 10000000;
                server {
                    listen 127.0.0.1:\(port);
                    default_type application/json;
                    location = /token { return 200 '{"access_token":"stand-in","expires_in":3600,"token_type":"Bearer"}'; }
                    location ~ /messages:send$ { return 200 '{"name":"projects/herald-emulator/messages/0"}'; }
                }
            }
            """
        let file = directory.appendingPathComponent("nginx.conf")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let (process, output) = try ChildProcess.start(nginx, ["-c", file.path, "-p", root, "-e", "\(root)/error.log"])
        // Ready once it accepts a connection.
        var ready = false
        for _ in 0..<100 where process.isRunning {
            if Loopback.accepts(port: port) {
                ready = true
                break
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        guard ready else {
            process.terminate()
            throw BenchError(
                "nginx did not start:\n\(output.stdout)\(output.stderr)\n\((try? String(contentsOfFile: "\(root)/error.log", encoding: .utf8)) ?? "")")
        }
        self.process = process
        self.port = port
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Stops nginx and reaps it (no zombie left for the rest of the run).
    func stop() {
        process.terminate()
        for _ in 0..<100 where process.isRunning { Thread.sleep(forTimeInterval: 0.02) }
    }
}
