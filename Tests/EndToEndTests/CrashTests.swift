import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// SPEC §5 on the real binary: a kill -9 under load loses no accepted notification, and history
/// stays exactly-once.
@Suite(.serialized) struct CrashTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    static func request(_ method: HTTPMethod, _ url: String, key: String, user: String? = nil, body: String? = nil) async throws -> (Int, [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        if let user { request.headers.add(name: "X-User-ID", value: user) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(3))
        let data = Data(try await response.body.collect(upTo: 1 << 22).readableBytesView)
        return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:])
    }

    @Test func killDashNineUnderLoadLosesNothingAccepted() async throws {
        let database = "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        let account = directory.appendingPathComponent("fcm.json").path
        let emulator = try await RunningHerald(command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let keyResult = try await runCommand(Binaries.path("herald"), ["keys", "create", "--role", "backend", "--database", database], in: directory)
        let key = try #require(keyResult.stdout.split(whereSeparator: \.isWhitespace).last.map(String.init))
        let environment = [
            "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url,
            "HERALD_DELIVERY_LEASE": "1.5", "HERALD_DELIVERY_BACKOFF": "0.2",
        ]
        let first = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let users = (0..<20).map { "crash-user-\($0)" }
        for user in users {
            #expect(try await Self.request(.POST, "\(first.url)/api/notifications/register", key: key, user: user, body: "{\"fcm_token\":\"tok-\(user)\"}").0 == 200)
        }

        // Load: 4000 notifications at 16 in flight; kill -9 once 1500 were accepted.
        let accepted = Locked<[String]>([])
        let killed = Locked(false)
        let pid = first.process.processIdentifier
        let url = first.url
        let total = 4_000
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    var index = worker
                    // Once the server is dead every request would wait out its connect timeout.
                    while index < total, !killed.withLock({ $0 }) {
                        let user = users[index % users.count]
                        if let (status, body) = try? await Self.request(.POST, "\(url)/api/notifications", key: key, body: "{\"type\":\"comment\",\"title\":\"n\(index)\",\"user_ids\":[\"\(user)\"]}"),
                            status == 202, let id = body["id"] as? String
                        {
                            let count = accepted.withLock { list in
                                list.append(id)
                                return list.count
                            }
                            if count >= 1_500, killed.withLock({ done in defer { done = true }; return !done }) {
                                kill(pid, SIGKILL)
                            }
                        }
                        index += 16
                    }
                }
            }
        }
        #expect(killed.withLock { $0 }, "the server was killed mid-load")
        _ = await first.stop()
        let acceptedList = accepted.withLock { $0 }
        #expect(acceptedList.count >= 1_500 && acceptedList.count < total)

        // Restart on the same database: the survivor picks up pending and leased work.
        let second = try await RunningHerald(arguments: ["--database", database], environment: environment, in: directory)
        let acceptedIDs = Set(acceptedList)
        var pushed = Set<String>()
        for _ in 0..<300 {
            let (_, body) = try await Self.request(.GET, "\(emulator.url)/emulator/messages", key: "none")
            pushed = Set((body["requests"] as? [[String: Any]] ?? []).compactMap { item -> String? in
                guard item["status"] as? Int == 200 else { return nil }
                return ((((item["request"] as? [String: Any])?["message"] as? [String: Any])?["data"]) as? [String: Any])?["id"] as? String
            })
            if acceptedIDs.isSubset(of: pushed) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(acceptedIDs.subtracting(pushed).isEmpty, "\(acceptedIDs.subtracting(pushed).count) accepted notifications were never pushed")

        // History: every accepted notification exactly once.
        var history: [String] = []
        for user in users {
            var cursor: String?
            repeat {
                let query = cursor.map { "&before=\($0)" } ?? ""
                let (_, page) = try await Self.request(.GET, "\(second.url)/api/notifications/history?limit=200\(query)", key: key, user: user)
                history += (page["history"] as? [[String: Any]] ?? []).compactMap { ($0["data"] as? [String: Any])?["id"] as? String }
                cursor = page["next"] as? String
            } while cursor != nil
        }
        #expect(history.count == Set(history).count, "no notification twice in a history")
        #expect(acceptedIDs.isSubset(of: Set(history)), "\(acceptedIDs.subtracting(history).count) accepted notifications missing from history")
        #expect(await second.stop() == 0)
        _ = await emulator.stop()
    }
}

/// A value behind a lock that escaping, concurrent closures can share.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
