import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldEmulatorSupport
import HeraldFCMEmulator
import HeraldFCMSink
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

/// An FCM emulator on a free loopback port, an FCM sink pointed at it, and a delivery engine
/// on a real store: SQLite in memory, or with `postgres` a fresh PostgreSQL database.
final class EmulatorFixture: Sendable {
    let emulator: FCMEmulator
    let running: Task<Void, any Error>
    let sink: FCMSink
    let store: any ServerStorage
    let engine: DeliveryEngine
    let service: NotificationService
    let sinks: SinkRegistry

    /// One client for every fixture, alive for the whole test process: a sink that owned its
    /// client would need a shutdown that a failing test could skip.
    static let http = FCMSink.makeHTTPClient()

    /// `backoff` is short by default, for tests that wait for retries with ``deliverAll(timeout:)``.
    /// A test that looks at a retried delivery after ``DeliveryEngine/drain()`` needs a long
    /// one: `drain` also works retries that come due while it runs, and under the full suite's
    /// load recording an outcome has taken longer than 200 ms, so one drain spent all five
    /// attempts (and opened the sink's circuit).
    /// `requestTimeout` is generous by default: no test relies on it firing (those that do set
    /// their own), and 5 s was passed once by a send under the whole suite's load.
    /// - Parameter tls: the emulator serves HTTP/2 over TLS and the sink makes its own client
    ///   trusting the emulator's certificate (closed when the test ends), unless
    ///   `trustCertificate` is false.
    static func start(
        maxAttempts: Int = 5, backoff: Duration = .milliseconds(200), quotaRetryAfter: Int = 1, tokenLifetime: Int = 3600, tls: Bool = false,
        trustCertificate: Bool = true, maxConcurrency: Int = 8, connections: Int? = nil, requestTimeout: Duration = .seconds(30),
        slowLatency: Duration = .milliseconds(300), releaseSlowSendsAt: Int? = nil, batchSize: Int = 256, failFirst: Int = 0,
        faults: (FCMEmulator.Configuration) -> FCMEmulator.Configuration = { $0 }, circuit: CircuitConfiguration = .init(),
        postgres: Bool = false, clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> EmulatorFixture {
        var configuration = FCMEmulator.Configuration()
        configuration.failFirst = failFirst
        configuration.tls = tls
        configuration.quotaRetryAfter = quotaRetryAfter
        configuration.tokenLifetime = tokenLifetime
        configuration.slowLatency = slowLatency
        configuration.releaseSlowSendsAt = releaseSlowSendsAt
        let emulator = try FCMEmulator(configuration: faults(configuration))
        let port = Mutex<Int?>(nil)
        let running = Task { try await emulator.run { bound in port.withLock { $0 = bound } } }
        for _ in 0..<200 where port.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        guard port.withLock({ $0 }) != nil else { throw CancellationError() }
        let account = try JSONDecoder().decode(ServiceAccount.self, from: try emulator.serviceAccountJSON())
        var sinkConfiguration = FCMConfiguration(account: account, endpoint: emulator.baseURL, maxConcurrency: maxConcurrency, requestTimeout: requestTimeout)
        sinkConfiguration.iidEndpoint = emulator.baseURL
        sinkConfiguration.connections = connections
        let sink: FCMSink
        if let certificate = emulator.certificate {
            let caFile = try TestResources.temporaryDirectory("herald-fcm-ca").appendingPathComponent("ca.pem")
            try certificate.certificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
            if trustCertificate { sinkConfiguration.caFile = caFile.path }
            sink = try await FCMSink(configuration: sinkConfiguration, clock: clock)
            TestResources.register { await sink.shutdown() }
        } else {
            sink = try await FCMSink(configuration: sinkConfiguration, http: Self.http, clock: clock)
        }
        let store: any ServerStorage =
            postgres ? try PostgresStore(url: try await PostgresTestDatabase.create(), acquireTimeout: .seconds(60)) : try SQLiteStore(path: ":memory:")
        TestResources.register { await store.close() }
        try await store.migrate()
        let sinks = try SinkRegistry([HistorySink(store: store), sink])
        var engineConfiguration = DeliveryEngineConfiguration()
        engineConfiguration.retry = RetryPolicy(maxAttempts: maxAttempts, baseDelay: backoff, maxDelay: max(backoff, .seconds(5)))
        engineConfiguration.batchSize = batchSize
        engineConfiguration.circuit = circuit
        let engine = DeliveryEngine(queue: store, sinks: sinks, configuration: engineConfiguration)
        let service = NotificationService(
            validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://pong.example")),
            router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ObjectIDGenerator()
        )
        return EmulatorFixture(emulator: emulator, running: running, sink: sink, store: store, engine: engine, service: service, sinks: sinks)
    }

    private init(
        emulator: FCMEmulator, running: Task<Void, any Error>, sink: FCMSink, store: any ServerStorage, engine: DeliveryEngine, service: NotificationService,
        sinks: SinkRegistry
    ) {
        self.sinks = sinks
        self.emulator = emulator
        self.running = running
        self.sink = sink
        self.store = store
        self.engine = engine
        self.service = service
    }

    func stop() async {
        running.cancel()
        _ = await running.result
    }

    func register(_ user: String, _ token: String) async throws {
        _ = try await store.registerDevice(userID: user, registration: .token(token, provider: "fcm"), newID: ObjectIDGenerator().next(), at: Date())
    }

    func send(_ submission: NotificationSubmission) async throws -> ObjectID {
        try await service.send(submission).receipt.id
    }

    /// Works the queue until nothing is pending or `timeout` passes.
    /// The timeout is generous: it returns as soon as nothing is pending, and under the full
    /// suite's load a retry due in a second has been seen to take longer than ten.
    func deliverAll(timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            try await engine.drain()
            guard let due = try await store.nextDueDate() else { return }
            try await Task.sleep(for: .milliseconds(Int64(max(due.timeIntervalSinceNow, 0.01) * 1000)))
        }
    }

    /// Send requests the emulator saw for `token`, in order.
    func attempts(to token: String) -> [FCMEmulator.Received] {
        emulator.received.filter { item in
            let message = (try? JSONSerialization.jsonObject(with: item.body) as? [String: Any])?["message"] as? [String: Any]
            return message?["token"] as? String == token
        }
    }

    func messages(to token: String) -> [[String: Any]] {
        emulator.deliveredMessages.filter { $0["token"] as? String == token }
    }
}

/// A clock a test moves by hand, so token lifetimes pass without waiting.
final class ManualClock: Sendable {
    private let now = Mutex(Date())
    func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var date: Date { now.withLock { $0 } }
}
