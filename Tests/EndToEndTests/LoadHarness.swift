import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1

/// Where a test's Herald processes keep their data.
enum DatabaseKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case postgres

    /// SQLite always; PostgreSQL when the test server from `scripts/test` is up.
    static var available: [DatabaseKind] { PostgresTestDatabase.serverURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    var description: String { rawValue }

    /// A fresh, empty database for one test.
    func make(in directory: URL) async throws -> String {
        switch self {
        case .sqlite: "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        case .postgres: try await PostgresTestDatabase.create()
        }
    }
}

/// Drives and checks crash and multi-process runs against real `herald` processes and the FCM
/// emulator.
enum LoadHarness {
    static func request(_ method: HTTPMethod, _ url: String, key: String, user: String? = nil, body: String? = nil) async throws -> (Int, [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        if let user { request.headers.add(name: "X-User-ID", value: user) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let data = Data(try await response.body.collect(upTo: 1 << 24).readableBytesView)
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:])
    }

    /// A backend key created with `herald keys create` on `database`.
    static func backendKey(database: String, in directory: URL) async throws -> String {
        let result = try await runCommand(Binaries.path("herald"), ["keys", "create", "--role", "backend", "--database", database], in: directory)
        guard result.status == 0, let key = result.stdout.split(whereSeparator: \.isWhitespace).last.map(String.init) else {
            throw HarnessError("keys create failed: \(result.stderr)")
        }
        return key
    }

    /// The FCM emulator, and the service account file it wrote for Herald.
    static func startFCMEmulator(in directory: URL) async throws -> (RunningHerald, String) {
        let account = directory.appendingPathComponent("fcm.json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        return (emulator, account)
    }

    /// Herald's environment for pushing to `emulator`, with short leases and back-off so a
    /// killed process's work is taken over soon.
    static func fcmEnvironment(account: String, emulator: RunningHerald, lease: String = "1.5") -> [String: String] {
        ["HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url, "HERALD_DELIVERY_LEASE": lease, "HERALD_DELIVERY_BACKOFF": "0.2"]
    }

    static func registerUsers(_ users: [String], tokenPrefix: String = "tok-", at url: String, key: String) async throws {
        for user in users {
            let (status, _) = try await request(
                .POST, "\(url)/api/notifications/register", key: key, user: user, body: "{\"fcm_token\":\"\(tokenPrefix)\(user)\"}")
            guard status == 200 else { throw HarnessError("registering \(user) answered \(status)") }
        }
    }

    /// Sends `total` notifications, `concurrency` at a time, spread round-robin over `servers`
    /// and `users`. `afterAccept` sees the running count and may return false to stop sending.
    /// - Returns: the ids of the accepted (202) notifications.
    static func send(
        _ total: Int, to servers: [String], users: [String], key: String, concurrency: Int = 16,
        afterAccept: @escaping @Sendable (Int) -> Bool = { _ in true }
    ) async -> [String] {
        let accepted = Locked<[String]>([])
        let stopped = Locked(false)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var index = worker
                    // Once a server is dead every request to it would wait out its timeout.
                    while index < total, !stopped.withLock({ $0 }) {
                        let server = servers[index % servers.count]
                        let user = users[index % users.count]
                        let body = "{\"type\":\"comment\",\"title\":\"n\(index)\",\"user_ids\":[\"\(user)\"]}"
                        if let (status, reply) = try? await request(.POST, "\(server)/api/notifications", key: key, body: body),
                            status == 202, let id = reply["id"] as? String
                        {
                            let count = accepted.withLock { list in
                                list.append(id)
                                return list.count
                            }
                            if !afterAccept(count) { stopped.withLock { $0 = true } }
                        }
                        index += concurrency
                    }
                }
            }
        }
        return accepted.withLock { $0 }
    }

    /// A ``send(_:to:users:key:concurrency:afterAccept:)`` check that kills `herald` with
    /// SIGKILL once `count` notifications were accepted (setting `killed`), and stops the load.
    static func killing(_ herald: RunningHerald, after count: Int, _ killed: Locked<Bool>) -> @Sendable (Int) -> Bool {
        { accepted in
            guard accepted >= count else { return true }
            let first = killed.withLock { done in
                defer { done = true }
                return !done
            }
            if first { herald.process.signal(SIGKILL) }
            return false
        }
    }

    /// Every successful push the emulator received, by notification id (repeats kept).
    static func pushes(emulator: String) async throws -> [String] {
        let (_, body) = try await request(.GET, "\(emulator)/emulator/messages", key: "none")
        return (body["requests"] as? [[String: Any]] ?? []).compactMap { item -> String? in
            guard item["status"] as? Int == 200 else { return nil }
            return ((((item["request"] as? [String: Any])?["message"] as? [String: Any])?["data"]) as? [String: Any])?["id"] as? String
        }
    }

    /// Polls the emulator until every id in `expected` was pushed, or `timeout` passes.
    static func waitForPushes(of expected: Set<String>, emulator: String, timeout: Duration = .seconds(60)) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        var pushed: [String] = []
        while ContinuousClock.now < deadline {
            pushed = try await pushes(emulator: emulator)
            if expected.isSubset(of: Set(pushed)) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return pushed
    }

    /// Every notification id in the users' histories (repeats kept), read page by page.
    static func history(of users: [String], at url: String, key: String) async throws -> [String] {
        var ids: [String] = []
        for user in users {
            var cursor: String?
            repeat {
                let query = cursor.map { "&before=\($0)" } ?? ""
                let (_, page) = try await request(.GET, "\(url)/api/notifications/history?limit=200\(query)", key: key, user: user)
                ids += (page["history"] as? [[String: Any]] ?? []).compactMap { ($0["data"] as? [String: Any])?["id"] as? String }
                cursor = page["next"] as? String
            } while cursor != nil
        }
        return ids
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
