import AsyncHTTPClient
import Foundation
import HeraldEmulatorSupport
import HeraldFCMEmulator
import HeraldFCMSink
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// The emulator's own answers to raw sends, as a client other than Herald's sink sees them.
@Suite struct FCMEmulatorTests {
    /// An emulator on a free port, printing into `lines`, and an access token it issued.
    struct Running {
        let emulator: FCMEmulator
        let task: Task<Void, any Error>
        let token: String

        func send(_ json: String) async throws -> (status: UInt, body: [String: Any]) {
            var request = HTTPClientRequest(url: "\(emulator.baseURL)/v1/projects/\(emulator.configuration.projectID)/messages:send")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
            let response = try await EmulatorFixture.http.execute(request, timeout: .seconds(10))
            let bytes = try await response.body.collect(upTo: 1 << 20)
            let body = try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any] ?? [:]
            return (response.status.code, body)
        }

        func stop() async {
            task.cancel()
            _ = await task.result
        }
    }

    static func start(print: RequestLog) async throws -> Running {
        var configuration = FCMEmulator.Configuration()
        configuration.port = 0
        let emulator = try FCMEmulator(configuration: configuration, print: print)
        let port = Mutex<Int?>(nil)
        let task = Task { try await emulator.run { bound in port.withLock { $0 = bound } } }
        for _ in 0..<200 where port.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        let account = try JSONDecoder().decode(ServiceAccount.self, from: try emulator.serviceAccountJSON())
        let token = try await FCMAccessTokenProvider(account: account, http: EmulatorFixture.http).token()
        return Running(emulator: emulator, task: task, token: token)
    }

    @Test func aSendIsAnsweredWithItsMessageNameAndCounted() async throws {
        let lines = Mutex<[String]>([])
        let running = try await Self.start(print: RequestLog { line in lines.withLock { $0.append(line) } })
        let answer = try await running.send(#"{"message":{"token":"t-1","notification":{"title":"a/b \"q\"","body":"é"},"data":{"k":"v"}}}"#)
        #expect(answer.status == 200)
        let name = answer.body["name"] as? String ?? ""
        #expect(name.hasPrefix("projects/herald-emulator/messages/") && UInt64(name.split(separator: "/").last ?? "") != nil, "\(answer.body)")
        #expect(running.emulator.deliveredMessages.count == 1)
        #expect(lines.withLock { $0 }.contains { $0.contains("message #1 to token t-1") })
        await running.stop()
    }

    /// The stats a benchmark polls: a message accepted again counts once more, with when it
    /// was first accepted; requests by HTTP version; a reset zeroes them.
    @Test func statsCountMessagesAcceptedAgainAndAResetZeroesThem() async throws {
        let running = try await Self.start(print: .quiet)
        let before = Date().timeIntervalSince1970
        for json in [
            #"{"message":{"token":"t","data":{"id":"n1"}}}"#, #"{"message":{"token":"t","data":{"id":"n1"}}}"#,
            #"{"message":{"token":"t","data":{"id":"n2"}}}"#,
        ] {
            #expect(try await running.send(json).status == 200)
        }
        func stats() async throws -> [String: Any] {
            let response = try await EmulatorFixture.http.execute(HTTPClientRequest(url: "\(running.emulator.baseURL)/emulator/stats"), timeout: .seconds(10))
            return try JSONSerialization.jsonObject(with: Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)) as? [String: Any] ?? [:]
        }
        let counted = try await stats()
        #expect(counted["delivered"] as? Int == 3)
        #expect(counted["accepted_twice"] as? Int == 1, "\(counted)")
        let firstAt = counted["accepted_twice_first_at"] as? [Double] ?? []
        #expect(firstAt.count == 1 && firstAt.allSatisfy { $0 >= before.rounded(.down) - 1 && $0 <= Date().timeIntervalSince1970 }, "\(firstAt)")
        #expect(counted["requests_by_http_version"] as? [String: Int] == ["1.1": 3])
        running.emulator.reset()
        let reset = try await stats()
        #expect(reset["accepted_twice"] as? Int == 0 && (reset["accepted_twice_first_at"] as? [Double])?.isEmpty == true, "\(reset)")
        #expect(reset["requests_by_http_version"] as? [String: Int] == [:])
        await running.stop()
    }

    /// FCM's limits: 4 096 bytes of payload (notification and data) for a token, 2 048 for a
    /// topic, counted on the payload's JSON, so escapes count as written.
    @Test func payloadsOverFCMsLimitAreRefusedWhateverTheirRequestsLength() async throws {
        let running = try await Self.start(print: .quiet)
        let plain = String(repeating: "x", count: 4_000)
        let underTopicLimit = String(repeating: "x", count: 1_900)
        // 700 control characters: 700 × 6 bytes of request (each sent escaped), 4 200 bytes of payload.
        let escaped = String(repeating: #"\u0001"#, count: 700)
        // 2 100 slashes: 2 100 bytes of request, 4 200 of payload (JSONSerialization writes `\/`).
        let slashes = String(repeating: "/", count: 2_100)
        let cases: [(String, UInt)] = [
            (#"{"message":{"token":"t","data":{"k":"\#(plain)"}}}"#, 200),
            (#"{"message":{"token":"t","data":{"k":"\#(plain)x\#(plain)"}}}"#, 400),
            (#"{"message":{"token":"t","notification":{"title":"t","body":"\#(escaped)"}}}"#, 400),
            (#"{"message":{"token":"t","data":{"k":"\#(slashes)"}}}"#, 400),
            (#"{"message":{"topic":"news","data":{"k":"\#(underTopicLimit)"}}}"#, 200),
            (#"{"message":{"topic":"news","data":{"k":"\#(underTopicLimit)\#(underTopicLimit)"}}}"#, 400),
        ]
        for (body, status) in cases {
            let answer = try await running.send(body)
            #expect(answer.status == status, "\(body.prefix(60))…: \(answer.body)")
            if status == 400 {
                let message = (answer.body["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("exceeds"), "\(message)")
            }
        }
        #expect(running.emulator.deliveredMessages.count == 2)
        await running.stop()
    }
}
