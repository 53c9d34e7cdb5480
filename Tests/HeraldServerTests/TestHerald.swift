import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldStore
import HeraldTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ServiceLifecycle
import Testing

/// A Herald server on a fresh SQLite file, with one key per role and user tokens enabled.
/// Delivery workers do not run in the background: tests call `deliver()` so every assertion
/// about deliveries and history is deterministic.
struct TestHerald {
    static let userTokenSecret = "test-user-token-secret-0123456789"

    let server: HeraldServer
    let admin: String
    let backend: String
    let communicator: String
    let push: RecordingSink

    /// - Parameter extraSinks: sinks beside the recording FCM stand-in (`push`).
    /// - Parameter factories: the sink types the server knows (an outside provider's among them).
    /// - Parameter routingPolicies: modules' routing policies, after the user's settings.
    static func make(
        extraSinks: [any NotificationSink] = [], factories: [SinkFactory] = SinkFactory.builtIn, routingPolicies: [any RoutingPolicy] = [],
        dueHooks: [any DueHook] = [], badgeCounts: (any BadgeCounts)? = nil, storageModules: [StorageModule] = [],
        _ configure: (inout HeraldConfiguration) -> Void = { _ in }
    ) async throws -> TestHerald {
        let directory = try TestResources.temporaryDirectory("herald-api")
        var configuration = HeraldConfiguration()
        configuration.database = "sqlite:" + directory.appendingPathComponent("herald.sqlite").path
        configuration.publicBaseURL = "https://pong.example"
        configuration.userTokenSecret = userTokenSecret
        configuration.bootstrapAdminKey = APIKeySecret.generate()
        // A line per request and per delivery would bury the test output.
        configuration.logLevel = "warning"
        // A live test's client connects before the test body runs, and tests that talk raw
        // HTTP first send its first request only after their own exchanges: on a loaded
        // machine those took longer than the default 10 s for a first request head, and the
        // server rightly closed the idle connection ("I/O on closed channel"). Tests of the
        // deadline set their own.
        configuration.requestHeadTimeout = .seconds(120)
        configure(&configuration)
        // Stands in for the FCM sink: FCM devices, and Message Hub messages as topic sends.
        let push = RecordingSink(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"]))
        let server = try await HeraldServer.start(
            configuration, factories: factories, extraSinks: [push] + extraSinks, routingPolicies: routingPolicies, dueHooks: dueHooks,
            badgeCounts: badgeCounts, storageModules: storageModules)
        TestResources.register { await server.close() }
        func key(_ role: Role) async throws -> String {
            let secret = APIKeySecret.generate()
            try await server.store.createKey(
                APIKeyRecord(id: ObjectIDGenerator().next(), name: "\(role.rawValue)-test", role: role, createdAt: Date()),
                secretHash: APIKeySecret.hash(secret))
            return secret
        }
        return TestHerald(
            server: server, admin: configuration.bootstrapAdminKey ?? "", backend: try await key(.backend),
            communicator: try await key(.communicator), push: push
        )
    }

    func test<Value>(_ body: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        try await server.application(deliveryWorkers: false).test(.router, body)
    }

    /// Counts held deliveries and releases due digests, then delivers everything due.
    func deliver() async throws {
        try await server.digests.drain()
        try await server.engine.drain()
    }

    func userToken(_ userID: String, expires: Date = Date().addingTimeInterval(3600), secret: String = userTokenSecret) async throws -> String {
        try await UserTokenVerifier(secret: secret).sign(userID: userID, expires: expires)
    }
}

/// Builds request headers: a bearer token, optionally acting for a user, JSON body type.
func headers(_ token: String? = nil, user: String? = nil, contentType: String? = "application/json") -> HTTPFields {
    var fields = HTTPFields()
    if let token { fields[.authorization] = "Bearer \(token)" }
    if let user { fields[HTTPField.Name("X-User-ID")!] = user }
    if let contentType { fields[.contentType] = contentType }
    return fields
}

extension TestClientProtocol {
    /// Sends `json` (a JSON-serialisable value, or a raw string sent as-is).
    func call(_ method: HTTPRequest.Method, _ uri: String, _ headers: HTTPFields = [:], json: Any? = nil) async throws -> TestResponse {
        var body: ByteBuffer?
        if let text = json as? String {
            body = ByteBuffer(string: text)
        } else if let json {
            body = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json))
        }
        return try await execute(uri: uri, method: method, headers: headers, body: body)
    }
}

/// Serialises a JSON value up front, so request tables stay `Sendable`.
func js(_ value: Any) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]) else { return "" }
    return String(decoding: data, as: UTF8.self)
}

extension TestResponse {
    var json: Any? { try? JSONSerialization.jsonObject(with: Data(buffer: body)) }
    var object: [String: Any] { json as? [String: Any] ?? [:] }
    var errorCode: String? { (object["error"] as? [String: Any])?["code"] as? String }
    var errorMessage: String { (object["error"] as? [String: Any])?["message"] as? String ?? "" }
}

extension Data {
    init(buffer: ByteBuffer) { self.init(buffer.readableBytesView) }
}

extension TestHerald {
    /// Runs the whole server (HTTP on a free loopback port, delivery workers, live updates)
    /// around `body`, then shuts it down gracefully. - Returns: `body`'s result and how long
    /// the shutdown took.
    func serve<Value: Sendable>(_ body: @Sendable (_ baseURL: String) async throws -> Value) async throws -> (Value, shutdown: Duration) {
        let (ports, port) = AsyncStream.makeStream(of: Int.self)
        let group = ServiceGroup(
            configuration: .init(
                services: [server.application(onServerRunning: { port.yield($0) })], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        )
        let running = Task { try await group.run() }
        var first = ports.makeAsyncIterator()
        guard let bound = await first.next() else { throw CancellationError() }
        let result: Value
        do {
            result = try await body("http://127.0.0.1:\(bound)")
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await running.value
            throw error
        }
        let clock = ContinuousClock()
        let started = clock.now
        await group.triggerGracefulShutdown()
        try await running.value
        return (result, clock.now - started)
    }
}
