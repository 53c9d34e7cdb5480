import Foundation
import HTTPTypes
import HeraldEmulatorSupport
import Hummingbird
import NIOCore
import Synchronization

/// A webhook receiver on a free loopback port that records requests and answers scripted statuses.
public final class Receiver: Sendable {
    public struct Hit: Sendable {
        public var headers: [String: String]
        public var body: Data
        public var at: Date
    }

    private let hits = Mutex<[Hit]>([])
    private let script = Mutex<[(Int, [String: String], String)]>([])
    public let port = Mutex<Int?>(nil)
    private let task = Mutex<Task<Void, any Error>?>(nil)

    public init() {}

    public var url: String { "http://127.0.0.1:\(port.withLock { $0 } ?? 0)/hook" }
    public var received: [Hit] { hits.withLock { $0 } }

    public func answer(_ status: Int, headers: [String: String] = [:], body: String = "") { script.withLock { $0.append((status, headers, body)) } }

    public func start() async throws {
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            var request = request
            let body = Data(try await request.collectBody(upTo: 1 << 20).readableBytesView)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
            self.hits.withLock { $0.append(Hit(headers: headers, body: body, at: Date())) }
            let (status, extra, text) = self.script.withLock { $0.isEmpty ? (204, [:], "") : $0.removeFirst() }
            var response = Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: text)))
            for (name, value) in extra { response.headers[HTTPField.Name(name)!] = value }
            return response
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                self.port.withLock { $0 = channel.localAddress?.port }
            })
        task.withLock { $0 = Task { try await runUntilCancelled(app, logger: app.logger) } }
        for _ in 0..<200 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
    }

    public func stop() async {
        let running = task.withLock { $0 }
        running?.cancel()
        _ = await running?.result
    }
}
