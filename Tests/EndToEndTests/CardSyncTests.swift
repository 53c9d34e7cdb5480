import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// Two devices of one user, one of them offline for a while, converge to the same pool and
/// history through pull: the real binary, over HTTP, on PostgreSQL when the test server runs
/// (SQLite otherwise).
@Suite(.cleansUp) struct CardSyncTests {
    struct Client {
        let base: String
        let token: String

        func call(
            _ method: HTTPMethod, _ path: String, json: Any? = nil, contentType: String = "application/json", raw: String? = nil
        ) async throws -> (Int, [String: Any]) {
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            if !token.isEmpty { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let json {
                request.headers.add(name: "Content-Type", value: contentType)
                request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
            } else if let raw {
                request.headers.add(name: "Content-Type", value: contentType)
                request.body = .bytes(ByteBuffer(string: raw))
            }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 22)
            let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
            return (Int(response.status.code), object)
        }
    }

    /// What a device keeps: applies full answers and changes exactly as docs/cards.md says.
    struct Device {
        let client: Client
        var cacheKey: String?
        var pool: [String: Double] = [:]
        var history: [String: String] = [:]
        var cards: Set<String> = []

        mutating func pull() async throws {
            let query = cacheKey.map { "?cache_key=\($0)" } ?? ""
            let (status, answer) = try await client.call(.GET, "/api/pull\(query)")
            #expect(status == 200)
            if answer["full"] as? Bool == true {
                pool = [:]
                history = [:]
                cards = []
            }
            for (card, score) in answer["pool"] as? [String: Double] ?? [:] { pool[card] = score }
            for card in answer["pool_removed"] as? [String] ?? [] { pool[card] = nil }
            for entry in answer["history"] as? [[String: String]] ?? [] { history[entry["index"] ?? ""] = entry["card"] }
            cards.formUnion((answer["cards"] as? [String: Any] ?? [:]).keys)
            cards.subtract(answer["cards_removed"] as? [String] ?? [])
            cacheKey = answer["cache_key"] as? String
        }
    }

    @Test func twoDevicesOneOfflineConvergeThroughPull() async throws {
        let directory = try TestResources.temporaryDirectory("herald-cards")
        let database = PostgresTestDatabase.serverURL == nil ? "sqlite:cards.sqlite" : try await PostgresTestDatabase.create()
        let admin = "hk_" + String(repeating: "c", count: 40)
        let secret = "card-sync-user-token-secret-0123456789"
        let environment = ["HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_USER_TOKEN_SECRET": secret, "HERALD_DATABASE": database]
        let herald = try await RunningHerald(arguments: [], environment: environment, in: directory)
        defer { herald.process.signal(SIGKILL) }
        let backend = Client(base: herald.url, token: admin)

        // The backend proves who the user is; each device signs in with that proof.
        let proof = try await runCommand(Binaries.path("herald"), ["user-token", "--user", "alice"], environment: environment, in: directory)
        #expect(proof.status == 0, "\(proof.stderr)")
        var devices: [Device] = []
        for id in ["phone", "tablet"] {
            let (status, answer) = try await Client(base: herald.url, token: "").call(
                .POST, "/api/auth/device", json: ["device_id": id, "platform": "ios", "proof": proof.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]
            )
            #expect(status == 200 && answer["user_id"] as? String == "alice", "\(answer)")
            devices.append(Device(client: Client(base: herald.url, token: answer["token"] as? String ?? "")))
        }

        let cards = (0..<30).map { ["id": "card\($0)", "metadata": ["title": "Card \($0)"], "posted_at": "2026-11-20T10:\(10 + $0):00Z"] as [String: Any] }
        #expect(try await backend.call(.POST, "/api/cards", json: ["cards": cards]).0 == 200)
        var lines = ""
        for index in 0..<30 { lines += #"{"user_id":"alice","card":"card\#(index)","score":\#(Double(index) / 30),"timestamp":1}"# + "\n" }
        #expect(try await backend.call(.POST, "/api/pool/scores", contentType: "application/x-ndjson", raw: lines).0 == 200)

        for index in devices.indices { try await devices[index].pull() }
        #expect(devices[0].pool.count == 30 && devices[1].pool == devices[0].pool)

        // The tablet goes offline and swipes through cards; the phone keeps working online.
        let offlineSeen = (20..<25).map { ["card": "card\($0)", "at": "2026-11-21T08:0\($0 - 20):00Z"] }
        let (promoteStatus, promoted) = try await devices[0].client.call(.POST, "/api/pool/promote")
        #expect(promoteStatus == 200 && promoted["card"] as? String == "card29")
        _ = try await devices[0].client.call(.POST, "/api/pool/seen", json: ["seen": [["card": "card3", "at": "2026-11-21T09:00:00Z"]]])
        try await devices[0].pull()
        // New scores arrive meanwhile, one of them for a card the tablet saw offline.
        _ = try await backend.call(.POST, "/api/pool/scores", json: ["timestamp": 2, "users": ["alice": ["card0": 0.99, "card21": 0.98]]])
        _ = try await backend.call(.DELETE, "/api/cards/card10")

        // Back online, the tablet reports late and out of order, twice (a retry).
        for _ in 0..<2 {
            let (status, _) = try await devices[1].client.call(.POST, "/api/pool/seen", json: ["seen": Array(offlineSeen.reversed())])
            #expect(status == 200)
        }
        // A score for a card already seen, arriving even later, changes nothing.
        _ = try await backend.call(.POST, "/api/pool/scores", json: ["timestamp": 3, "users": ["alice": ["card22": 1.0]]])
        for index in devices.indices { try await devices[index].pull() }

        #expect(devices[0].pool == devices[1].pool, "both devices hold the same pool")
        #expect(devices[0].history == devices[1].history, "and the same history")
        #expect(devices[0].history.count == 7)
        #expect(devices[0].history["0"] == "card29" && devices[0].history["1"] == "card3", "indexes never move")
        #expect(Set(devices[0].history.values).isSuperset(of: (20..<25).map { "card\($0)" }))
        #expect(devices[0].pool["card21"] == nil && devices[0].pool["card22"] == nil, "seen cards never return")
        #expect(devices[0].pool["card10"] == nil && !devices[0].cards.contains("card10"), "a deleted card leaves")
        #expect(devices[0].pool["card0"] == 0.99)

        // A fresh install with no cache key gets the same state in one full answer.
        var fresh = Device(client: devices[0].client)
        try await fresh.pull()
        #expect(fresh.pool == devices[0].pool && fresh.history == devices[0].history)
        await herald.expectCleanStop()
    }
}
