import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// `GET /api/stream` read with `curl -N`, as a developer tries it: notifications sent through one
/// Herald process reach a stream held by another (PostgreSQL LISTEN/NOTIFY; with SQLite, one
/// process plays both parts).
@Suite(.cleansUp) struct LiveStreamTests {
    @Test func aStreamOnOneProcessHearsWhatAnotherDelivers() async throws {
        let directory = try TestResources.temporaryDirectory("herald-stream")
        let shared = PostgresTestDatabase.serverURL != nil
        let database = shared ? try await PostgresTestDatabase.create() : "sqlite:stream.sqlite"
        let admin = "hk_" + String(repeating: "s", count: 40)
        let environment = [
            "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_USER_TOKEN_SECRET": "live-stream-user-token-secret-0123456789", "HERALD_DATABASE": database,
            // No heartbeat within the test: only a change notification can bring the events.
            "HERALD_STREAM_HEARTBEAT": "300",
        ]
        let reader = try await RunningHerald(arguments: [], environment: environment, in: directory)
        defer { reader.process.signal(SIGKILL) }
        let writer = shared ? try await RunningHerald(arguments: [], environment: environment, in: directory) : reader
        defer { writer.process.signal(SIGKILL) }

        let token = try await runCommand(Binaries.path("herald"), ["user-token", "--user", "grace"], environment: environment, in: directory)
        #expect(token.status == 0, "\(token.stderr)")
        let curlOutput = try OutputCollector()
        let curl = makeProcess(
            "/usr/bin/curl",
            ["-N", "-s", "-H", "Authorization: Bearer \(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))", reader.url + "/api/stream"],
            environment: [:], in: directory, collecting: curlOutput
        )
        try curl.run()
        defer { curl.terminate() }
        func waitFor(_ text: String) async throws -> Bool {
            for _ in 0..<200 {
                if curlOutput.stdout.contains(text) { return true }
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }
        #expect(try await waitFor("event: feed\n"), "connected: \(curlOutput.stdout) \(curlOutput.stderr)")

        func post(_ path: String, _ json: Any?) async throws -> UInt {
            var request = HTTPClientRequest(url: writer.url + path)
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(admin)")
            if let json {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
            }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 1 << 20)
            return response.status.code
        }
        #expect(try await post("/api/notifications", ["type": "message", "title": "Lunch?", "user_ids": ["grace"]]) == 202)
        #expect(try await waitFor("\"title\":\"Lunch?\""), "\(curlOutput.stdout)")
        #expect(curlOutput.stdout.contains("id: 1\nevent: notification\ndata: {"), "\(curlOutput.stdout)")

        var put = HTTPClientRequest(url: writer.url + "/api/content/pending")
        put.method = .PUT
        put.headers.add(name: "Authorization", value: "Bearer \(admin)")
        put.headers.add(name: "Content-Type", value: "application/json")
        put.body = .bytes(ByteBuffer(string: #"{"items": [{"type": "banner", "title": "Hi", "visibility": {"all": true}}]}"#))
        #expect(try await HTTPClient.shared.execute(put, timeout: .seconds(10)).status.code == 200)
        #expect(try await post("/api/content/publish", nil) == 200)
        let contentEvents = { curlOutput.stdout.components(separatedBy: "event: content\n").count - 1 }
        for _ in 0..<200 where contentEvents() < 2 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(contentEvents() == 2, "the version at connect, then the published one: \(curlOutput.stdout)")

        curl.terminate()
        await reader.expectCleanStop()
        if shared { await writer.expectCleanStop() }
    }
}
