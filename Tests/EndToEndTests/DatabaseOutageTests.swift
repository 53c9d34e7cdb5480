import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// PostgreSQL going away under load: nothing accepted is lost, requests during the outage are
/// answered 503 with Retry-After at once (never a 500, never a hang), and accepts flow again
/// once it is back.
@Suite(.serialized, .cleansUp) struct DatabaseOutageTests {
    static var proxyScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("outage_proxy.py").path
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aPostgresOutageIsAnswered503AndRecoveredFrom() async throws {
        let database = try #require(URLComponents(string: try await PostgresTestDatabase.create()))
        let directory = try TestResources.temporaryDirectory("herald-outage")
        // The proxy stands between Herald and PostgreSQL, and plays the outage.
        let proxyOutput = try OutputCollector()
        let proxy = makeProcess(
            "/usr/bin/env", ["python3", Self.proxyScript, database.host ?? "127.0.0.1", String(database.port ?? 5432)], environment: [:], in: directory,
            collecting: proxyOutput
        )
        try proxy.run()
        defer { proxy.terminate() }
        var proxyPort: Int?
        for _ in 0..<100 where proxyPort == nil {
            proxyPort = proxyOutput.stdout.firstMatch(of: /proxy listening on (\d+)/).flatMap { Int($0.1) }
            try await Task.sleep(for: .milliseconds(50))
        }
        var viaProxy = database
        viaProxy.port = try #require(proxyPort, "\(proxyOutput.stderr)")
        let admin = "hk_" + String(repeating: "o", count: 40)
        let herald = try await RunningHerald(
            arguments: ["--database", try #require(viaProxy.string)], environment: ["HERALD_BOOTSTRAP_ADMIN_KEY": admin], in: directory
        )
        let url = herald.url

        typealias Answer = (status: Int, seconds: Double, id: String?, failure: String?)
        /// One accept: its status (0 for none: `failure` says why), how long it took, its id.
        /// A hang is what the client's bound catches. Every wait inside Herald is bounded by the
        /// pool's acquire timeout (2 s), and a full suite on two cores has stretched an answer
        /// to 3 s; 10 s tells a hang from a loaded machine.
        @Sendable func accept(_ index: Int) async -> Answer {
            let started = ContinuousClock.now
            var request = HTTPClientRequest(url: "\(url)/api/notifications")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(admin)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: #"{"type":"generic","title":"t\#(index)","body":"b","user_ids":["u"]}"#))
            let elapsed = {
                let d = ContinuousClock.now - started
                return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
            }
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 1 << 16)
                let id = (try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any])?["id"] as? String
                if response.status == .serviceUnavailable && response.headers.first(name: "Retry-After") == nil { return (-503, elapsed(), nil, nil) }
                return (Int(response.status.code), elapsed(), id, nil)
            } catch {
                return (0, elapsed(), nil, String(describing: error))
            }
        }

        #expect(await accept(0).status == 202)
        proxy.signal(SIGUSR1)
        try await Task.sleep(for: .milliseconds(300))
        var during: [Answer] = []
        let outageEnds = ContinuousClock.now + .seconds(5)
        var index = 1
        while ContinuousClock.now < outageEnds {
            during.append(await accept(index))
            index += 1
        }
        proxy.signal(SIGUSR2)
        let back = ContinuousClock.now
        var recovered: Duration?
        while recovered == nil && ContinuousClock.now - back < .seconds(15) {
            if await accept(index).status == 202 {
                recovered = ContinuousClock.now - back
            } else {
                // Not a busy loop of 503s on the two cores the probe needs.
                try await Task.sleep(for: .milliseconds(20))
            }
            index += 1
        }
        #expect(
            during.allSatisfy { $0.status == 503 },
            """
            every answer during the outage is a 503 with Retry-After: \(during.map(\.status)) \
            in \(during.map(\.seconds)) s; \(during.compactMap(\.failure)); \(herald.output.stderr.suffix(4000))
            """
        )
        // Every answer came within the client's 10 s (a 0 above otherwise). Answered at once, not
        // after an acquire timeout (2 s) each: the median says which. A single answer's time
        // says little on a loaded machine (one took 3.0 s in a full local run, beside 0.15–0.68).
        let times = during.map(\.seconds).sorted()
        #expect(!times.isEmpty && times[times.count / 2] < 1.0, "and most come at once: \(during.map(\.seconds))")
        // Accepts flow again. How soon is not judged here: a probe every 200 ms, then a fresh
        // pool, took under 1.5 s run alone and 1.59, 2.26 and 3.19 s in clean-clone CI runs with
        // the rest of the suite on the same two cores (a fresh connection's TCP and SCRAM
        // handshakes through the proxy), which no bound tells apart from the pool's own backoff
        // (about a quarter of the outage). PostgresPoolTests shows what matters by what the pool
        // did: a fresh pool replaces the backed-off one once the database answers.
        _ = try #require(recovered, "accepts flow again")
        #expect(herald.process.isRunning)
        // Shutdown is not what this test is about, and a loaded machine slows it: 30 s, the default shutdown_timeout.
        let exit = await herald.stop(timeout: .seconds(35))
        #expect(exit == 0, "SIGTERM drains and exits: \(herald.output.stdout.suffix(3000))\(herald.output.stderr.suffix(3000))")
    }
}

extension Data {
    init(buffer: ByteBuffer) { self.init(buffer.readableBytesView) }
}
