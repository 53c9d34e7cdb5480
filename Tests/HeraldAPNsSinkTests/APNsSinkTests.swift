import AsyncHTTPClient
import Foundation
import HeraldAPNsEmulator
import HeraldAPNsSink
import HeraldCore
import HeraldEmulatorSupport
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization
import Testing

/// The APNs sink against the APNs emulator over HTTP/2 and TLS (its certificate trusted by its
/// PEM file, never by turning verification off).
@Suite(.serialized, .cleansUp) struct APNsSinkTests {
    final class Fixture: Sendable {
        let emulator: APNsEmulator
        let running: Task<Void, any Error>
        let sink: APNsSink
        let store: SQLiteStore
        let engine: DeliveryEngine
        let service: NotificationService
        let directory: URL

        init(
            emulator: APNsEmulator, running: Task<Void, any Error>, sink: APNsSink, store: SQLiteStore, engine: DeliveryEngine, service: NotificationService,
            directory: URL
        ) {
            self.emulator = emulator
            self.running = running
            self.sink = sink
            self.store = store
            self.engine = engine
            self.service = service
            self.directory = directory
        }

        /// - Parameter productionEndpoint: where production devices go (the emulator by default).
        /// - Parameter sandbox: another APNs emulator (another key) to stand for the sandbox.
        static func start(
            defaultEnvironment: APNsSink.Environment = .production, productionEndpoint: String? = nil, sandbox: APNsEmulator? = nil,
            faults: FaultModes = .init()
        ) async throws -> Fixture {
            var emulatorConfiguration = APNsEmulator.Configuration()
            emulatorConfiguration.faults = faults
            let emulator = try APNsEmulator(configuration: emulatorConfiguration)
            let port = Mutex<Int?>(nil)
            let running = Task { try await emulator.run { bound in port.withLock { $0 = bound } } }
            for _ in 0..<300 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
            let directory = try TestResources.temporaryDirectory("herald-apns")
            let ca = directory.appendingPathComponent("ca.pem").path
            try (emulator.certificate.certificatePEM + "\n" + (sandbox?.certificate.certificatePEM ?? "")).write(toFile: ca, atomically: true, encoding: .utf8)
            var configuration = APNsSink.Configuration(key: emulator.providerKey, keyID: "HERALDKEY1", teamID: "HERALDTEAM", topic: "com.example.herald")
            configuration.productionEndpoint = productionEndpoint ?? emulator.baseURL
            configuration.sandboxEndpoint = sandbox?.baseURL ?? emulator.baseURL
            configuration.caFile = ca
            configuration.defaultEnvironment = defaultEnvironment
            let sink = try await APNsSink(configuration: configuration)
            let store = try SQLiteStore(path: ":memory:")
            try await store.migrate()
            let sinks = try SinkRegistry([HistorySink(store: store), sink])
            var engineConfiguration = DeliveryEngineConfiguration()
            engineConfiguration.retry = RetryPolicy(maxAttempts: 5, baseDelay: .milliseconds(100), maxDelay: .seconds(2))
            engineConfiguration.maxRetryAfter = .seconds(1)
            let engine = DeliveryEngine(queue: store, sinks: sinks, configuration: engineConfiguration)
            let service = NotificationService(
                validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://app.example")),
                router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ObjectIDGenerator()
            )
            return Fixture(emulator: emulator, running: running, sink: sink, store: store, engine: engine, service: service, directory: directory)
        }

        func register(_ user: String, _ token: String, environment: String? = nil) async throws {
            var registration = DeviceRegistration(address: DeviceAddress(provider: "apns", token: token), addressField: "apns_token")
            if let environment { registration.options["environment"] = environment }
            try sink.prepare(&registration)
            _ = try await store.registerDevice(userID: user, registration: registration, newID: ObjectIDGenerator().next(), at: Date())
        }

        func deliverAll() async throws {
            // Generous: it returns as soon as nothing is pending, and a loaded suite is slow.
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                try await engine.drain()
                guard let due = try await store.nextDueDate() else { return }
                try await Task.sleep(for: .milliseconds(Int64(max(due.timeIntervalSinceNow, 0.01) * 1000)))
            }
        }

        func stop() async {
            await sink.shutdown()
            running.cancel()
            _ = await running.result
        }
    }

    @Test func alertsAndBackgroundPushesHaveApplesShape() async throws {
        let f = try await Fixture.start()
        try await f.register("ivy", "abc123", environment: "sandbox")
        _ = try await f.service.send(
            NotificationSubmission(type: "comment", title: "New comment", body: "Nice", url: "/posts/3", collapseKey: "post-3", userIDs: ["ivy"]))
        _ = try await f.service.send(NotificationSubmission(type: "hot", title: "Hot", body: "quiet", distribution: "information", userIDs: ["ivy"]))
        try await f.deliverAll()
        let received = f.emulator.received
        #expect(received.map(\.status) == [200, 200], "\(received.map { $0.reason ?? "" })")
        #expect(received.allSatisfy { $0.httpVersion == "2" }, "APNs is spoken over HTTP/2")
        let alert = try #require(received.first { $0.headers["apns-push-type"] == "alert" })
        #expect(alert.headers["apns-priority"] == "10" && alert.headers["apns-topic"] == "com.example.herald")
        #expect(alert.headers["apns-collapse-id"] == "post-3" && alert.headers["apns-expiration"] == "0")
        let payload = try #require(try JSONSerialization.jsonObject(with: alert.payload) as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: String]) == ["title": "New comment", "body": "Nice"] && aps["sound"] as? String == "default")
        #expect(payload["url"] as? String == "https://app.example/posts/3" && payload["type"] as? String == "comment" && payload["id"] is String)
        let background = try #require(received.first { $0.headers["apns-push-type"] == "background" })
        #expect(background.headers["apns-priority"] == "5")
        let quiet = try #require(try JSONSerialization.jsonObject(with: background.payload) as? [String: Any])
        #expect((quiet["aps"] as? [String: Int]) == ["content-available": 1] && quiet["title"] as? String == "Hot")
        #expect(await f.sink.tokensIssued == 1, "one provider token, reused")
        await f.stop()
    }

    /// A user's badge rides on an alert as `aps.badge`; a background push never carries one
    /// (Apple wants nothing but `content-available` there).
    @Test func aBadgeRidesOnAlertsOnly() async throws {
        let f = try await Fixture.start()
        try await f.register("ivy", "abc123", environment: "sandbox")
        let device = try #require(try await f.store.devices(userID: "ivy").first)
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "comment", title: "t", body: "b", url: nil, timestamp: Date(), distribution: .alert, target: .users(["ivy"]))
        for distribution in Distribution.allCases {
            let delivery = Delivery(
                id: 1, sink: f.sink.name, notification: notification, recipient: DeliveryRecipient(userID: "ivy", device: device),
                distribution: distribution, attempt: 1, badge: 4)
            #expect(await f.sink.deliver([delivery]) == [.delivered])
        }
        let payloads = try f.emulator.received.map { try #require(try JSONSerialization.jsonObject(with: $0.payload) as? [String: Any]) }
        let badges = payloads.map { ($0["aps"] as? [String: Any])?["badge"] as? Int }
        #expect(badges == [4, nil])
        await f.stop()
    }

    /// APNs refuses HTTP/1.1, and so does its emulator: a client that cannot speak HTTP/2 would
    /// pass against a lenient stand-in and fail against Apple.
    @Test func theEmulatorRefusesHTTP1() async throws {
        let f = try await Fixture.start()
        var configuration = HTTPClient.Configuration()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(f.directory.appendingPathComponent("ca.pem").path)]
        configuration.tlsConfiguration = tls
        configuration.httpVersion = .http1Only
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        TestResources.register { try? await client.shutdown() }
        var request = HTTPClientRequest(url: "\(f.emulator.baseURL)/3/device/tok-h1")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: #"{"aps":{"alert":"hi"}}"#))
        let response = try await client.execute(request, timeout: .seconds(30))
        #expect(response.version == .http1_1)
        #expect(response.status == .badRequest)
        let body = String(buffer: try await response.body.collect(upTo: 1 << 16))
        #expect(body.contains("UnsupportedHTTPVersion"), "\(body)")
        #expect(f.emulator.received.map(\.httpVersion) == ["1.1"])
        await f.stop()
    }

    @Test func answersBecomeOutcomes() async throws {
        let f = try await Fixture.start()
        try await f.register("a", "gone-1")
        try await f.register("a", "keep-1")
        try await f.register("b", "bad-known", environment: "production")
        try await f.register("c", "bad-default")
        try await f.register("d", "flaky-1")
        try await f.register("e", "busy-1")
        let sent = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["a", "b", "c", "d", "e"]))
        try await f.deliverAll()
        #expect(try await f.store.devices(userID: "a").compactMap(\.token) == ["keep-1"], "410 removes that token only")
        let deliveries = try #require(try await f.store.status(of: sent.receipt.id)?.deliveries)
        #expect(deliveries.contains { $0.lastError?.contains("410 Unregistered") == true }, "the reason beside a 410's timestamp is read")
        #expect(try await f.store.devices(userID: "b").isEmpty, "BadDeviceToken for a device whose environment is known removes it")
        #expect(try await f.store.devices(userID: "c").count == 1, "under a default environment it may be a configuration fault: kept")
        let flaky = f.emulator.received.filter { $0.token == "flaky-1" }
        #expect(flaky.map(\.status) == [503, 503, 200])
        #expect(Set(flaky.compactMap { $0.headers["apns-id"] }).count == 1, "a retry carries the same apns-id")
        #expect(f.emulator.received.filter { $0.token == "busy-1" }.map(\.status) == [429, 200])
        await f.stop()
    }

    @Test func anExpiredProviderTokenIsReplacedAtOnce() async throws {
        let f = try await Fixture.start()
        try await f.register("x", "expired-1")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["x"]))
        try await f.engine.drain()
        #expect(f.emulator.received.map(\.status) == [403, 200], "refreshed and sent again in the same attempt")
        #expect(await f.sink.tokensIssued == 2)
        await f.stop()
    }

    @Test func theAcceptChecksApplesLimits() async throws {
        let f = try await Fixture.start()
        let validator = NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://app.example"))
        let big = try validator.validate(
            NotificationSubmission(type: "generic", title: "t", body: String(repeating: "b", count: 4_100), userIDs: ["u"]), id: ObjectIDGenerator().next(),
            now: Date()
        )
        #expect(throws: HeraldError.self) { try f.sink.validate(big) }
        let longCollapse = try validator.validate(
            NotificationSubmission(type: "generic", title: "t", collapseKey: String(repeating: "c", count: 65), userIDs: ["u"]), id: ObjectIDGenerator().next(),
            now: Date()
        )
        #expect(throws: HeraldError.self) { try f.sink.validate(longCollapse) }
        var object = DeviceRegistration(address: DeviceAddress(provider: "apns", value: .object([:]), key: ""), addressField: "apns_token")
        #expect(throws: HeraldError.self) { try f.sink.prepare(&object) }
        var spaced = DeviceRegistration(address: DeviceAddress(provider: "apns", token: "has space"), addressField: "apns_token")
        #expect(throws: HeraldError.self) { try f.sink.prepare(&spaced) }
        var plain = DeviceRegistration(address: DeviceAddress(provider: "apns", token: "abc123"), addressField: "apns_token")
        try f.sink.prepare(&plain)
        #expect(plain.options == ["environment": "production", "environment_default": "true"], "a missing environment is the sink's default")
        await f.stop()
    }

    /// The device's environment picks the host: here production points nowhere, so only the
    /// sandbox device's push arrives.
    @Test func theDevicesEnvironmentPicksTheHost() async throws {
        let f = try await Fixture.start(productionEndpoint: "https://127.0.0.1:1")
        try await f.register("s", "sandbox-1", environment: "sandbox")
        try await f.register("p", "production-1", environment: "production")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["s", "p"]))
        try await f.engine.drain()
        #expect(f.emulator.received.map(\.token) == ["sandbox-1"])
        await f.stop()
    }

    /// A device names its environment at registration: a key refused in the one it chose, when
    /// that is not the sink's own, fails that device's push and never degrades the sink (anyone
    /// who may register a device could otherwise send operators after a key that works).
    @Test func aKeyRefusedInTheEnvironmentADeviceChoseIsThatDevicesFailure() async throws {
        var sandboxConfiguration = APNsEmulator.Configuration()
        sandboxConfiguration.certificateName = "Herald APNs emulator (sandbox)"
        let sandbox = try APNsEmulator(configuration: sandboxConfiguration)
        let sandboxPort = Mutex<Int?>(nil)
        let sandboxRunning = Task { try await sandbox.run { bound in sandboxPort.withLock { $0 = bound } } }
        for _ in 0..<300 where sandboxPort.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        defer { sandboxRunning.cancel() }
        let f = try await Fixture.start(defaultEnvironment: .production, sandbox: sandbox)
        try await f.register("mallory", "abcd01", environment: "sandbox")
        try await f.register("ana", "abcd02")
        let id = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory", "ana"])).receipt.id
        try await f.deliverAll()
        let errors = try await f.store.status(of: id)?.deliveries.compactMap(\.lastError) ?? []
        #expect(sandbox.received.map(\.status) == [403], "the sandbox refused the production key: \(errors)")
        #expect(f.emulator.received.map(\.status) == [200], "the production device got its push")
        #expect(await f.sink.health() == .ok, "one device's environment degraded the sink")
        await f.stop()
        sandboxRunning.cancel()
        _ = await sandboxRunning.result
    }

    /// APNs failing part of the time (503s, 429s for a device, dropped connections): every push
    /// ends delivered or dead with its reason, none twice, and the sink stays healthy.
    @Test func apnsFailingPartOfTheTimeLosesNothing() async throws {
        var faults = FaultModes()
        (faults.failRate, faults.rateLimitRate, faults.resetRate) = (0.2, 0.1, 0.1)
        let f = try await Fixture.start(faults: faults)
        for n in 0..<10 { try await f.register("u\(n)", "abcdef0\(n)") }
        var ids: [ObjectID] = []
        for n in 0..<5 {
            ids.append(
                try await f.service.send(NotificationSubmission(type: "generic", title: "n\(n)", body: "b", userIDs: (0..<10).map { "u\($0)" })).receipt.id)
        }
        try await f.deliverAll()
        let states = try await DeliveryTally.states(of: ids, sink: f.sink.name, in: f.store)
        #expect(states[.pending, default: 0] == 0 && states.values.reduce(0, +) == 50, "\(states)")
        let accepted = f.emulator.received.filter { $0.status == 200 }.map { "\($0.token)|\($0.headers["apns-id"] ?? "")" }
        #expect(DeliveryTally.repeated(accepted).isEmpty, "a push delivered twice")
        #expect(accepted.count == states[.delivered, default: 0])
        #expect(f.emulator.received.contains { $0.status != 200 }, "the faults happened")
        #expect(await f.sink.health() == .ok)
        await f.stop()
    }
}
