import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldEmulatorSupport
import HeraldHistorySink
import HeraldStore
import HeraldTestSupport
import HeraldWebPushEmulator
import Logging
import NIOSSL
import Synchronization
import Testing

@testable import HeraldWebPushSink

/// The Web Push sink against the Web Push emulator over loopback: VAPID verified, every message
/// decrypted, outcomes per the push service's answer.
@Suite(.cleansUp) struct WebPushSinkTests {
    struct Fixture {
        let emulator: WebPushEmulator
        let running: Task<Void, any Error>
        let sink: WebPushSink
        let store: SQLiteStore
        let engine: DeliveryEngine
        let service: NotificationService
        let ids = ObjectIDGenerator()

        /// - Parameter ownClient: the sink makes its own HTTP client, as Herald does (closed
        ///   when the test ends), instead of the tests' shared one.
        /// - Parameter timeout: the sink's, for each send.
        /// - Parameter resolver: judges endpoint hosts as in production (private endpoints
        ///   refused), with `http` as the sink's client; without it private endpoints are allowed.
        static func start(
            ownClient: Bool = false, timeout: Duration = .seconds(15), clock: @escaping @Sendable () -> Date = { Date() },
            resolver: PushServiceResolver? = nil, http: HTTPClient? = nil, witnesses: Set<String>? = nil, faults: FaultModes = .init()
        ) async throws -> Fixture {
            var emulatorConfiguration = WebPushEmulator.Configuration()
            emulatorConfiguration.faults = faults
            let emulator = WebPushEmulator(configuration: emulatorConfiguration)
            let port = Mutex<Int?>(nil)
            let running = Task { try await emulator.run { bound in port.withLock { $0 = bound } } }
            for _ in 0..<200 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
            var sinkConfiguration = WebPushSink.Configuration(vapid: .generate(), subject: "mailto:ops@example.com")
            sinkConfiguration.allowsPrivateEndpoints = resolver == nil // the emulator is on loopback
            sinkConfiguration.timeout = timeout
            if let witnesses { sinkConfiguration.credentialWitnesses = witnesses }
            let sink =
                if let resolver {
                    // Sends go to the address a name was judged by: the public addresses the
                    // tests' resolvers answer stand for listeners on loopback.
                    WebPushSink(
                        name: "webpush", configuration: sinkConfiguration, http: http ?? Self.http, logger: Logger(label: "test"), clock: clock,
                        resolver: resolver, pinnedConfiguration: HTTPClient.Configuration(redirectConfiguration: .disallow),
                        connectAddress: { _ in "127.0.0.1" })
                } else {
                    WebPushSink(configuration: sinkConfiguration, http: ownClient ? nil : Self.http, clock: clock)
                }
            if ownClient { TestResources.register { await sink.shutdown() } }
            let store = try SQLiteStore(path: ":memory:")
            try await store.migrate()
            let sinks = try SinkRegistry([HistorySink(store: store), sink])
            var configuration = DeliveryEngineConfiguration()
            configuration.retry = RetryPolicy(maxAttempts: 5, baseDelay: .milliseconds(100), maxDelay: .seconds(2))
            let engine = DeliveryEngine(queue: store, sinks: sinks, configuration: configuration)
            let service = NotificationService(
                validator: NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://app.example")),
                router: try NotificationRouter(registry: sinks), sinks: sinks, store: store, ids: ObjectIDGenerator()
            )
            return Fixture(emulator: emulator, running: running, sink: sink, store: store, engine: engine, service: service)
        }

        /// One client for every fixture, alive for the whole test process.
        static let http = HTTPClient(eventLoopGroupProvider: .singleton)

        /// Registers a subscription of the emulator's, or one with its keys at `endpoint`.
        func register(_ user: String, _ name: String, endpoint: String? = nil) async throws {
            var object = emulator.subscribe(name)
            if let endpoint { object["endpoint"] = endpoint }
            let subscription = try JSONDecoder().decode(JSONValue.self, from: try JSONSerialization.data(withJSONObject: object))
            var registration = DeviceRegistration(address: DeviceAddress(provider: "webpush", value: subscription, key: ""), addressField: "web_push")
            try sink.prepare(&registration)
            _ = try await store.registerDevice(userID: user, registration: registration, newID: ids.next(), at: Date())
        }

        /// Sends one alert to each of `user`'s devices through the sink itself, for its outcomes.
        func sendDirectly(to user: String) async throws -> [DeliveryOutcome] {
            let notification = HeraldNotification(
                id: ids.next(), type: "generic", title: "t", body: "b", url: nil, timestamp: Date(), target: .users([user]))
            let deliveries = try await store.devices(userID: user).enumerated().map { index, device in
                Delivery(
                    id: Int64(index + 1), sink: "webpush", notification: notification, recipient: DeliveryRecipient(userID: user, device: device),
                    distribution: .alert, attempt: 1)
            }
            return await sink.deliver(deliveries)
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
            running.cancel()
            _ = await running.result
        }
    }

    @Test func deliversAnEncryptedSignedMessageTheBrowserCanRead() async throws {
        let f = try await Fixture.start()
        try await f.register("ana", "browser-ana")
        let submission = NotificationSubmission(
            type: "comment", title: "New comment", body: "Nice post", url: "/posts/9", priority: 1, collapseKey: "post 9", userIDs: ["ana"]
        )
        _ = try await f.service.send(submission)
        try await f.deliverAll()
        let received = try #require(f.emulator.received.first)
        #expect(received.status == 201, "\(received.error ?? "")")
        let message = try #require(try JSONSerialization.jsonObject(with: Data((received.plaintext ?? "").utf8)) as? [String: Any])
        #expect(message["title"] as? String == "New comment" && message["body"] as? String == "Nice post")
        #expect(message["url"] as? String == "https://app.example/posts/9" && message["type"] as? String == "comment")
        #expect(received.headers["urgency"] == "high" && received.headers["ttl"] == "86400")
        #expect(received.headers["topic"]?.count == 32, "a collapse key outside the Topic alphabet is hashed into one")
        #expect(received.headers["content-encoding"] == "aes128gcm")
        await f.stop()
    }

    /// A user's badge (docs/inbox.md) travels in the payload, for the service worker's
    /// `navigator.setAppBadge`; without one there is no `badge` key.
    @Test func theBadgeTravelsInThePayload() throws {
        let n = HeraldNotification(id: ObjectIDGenerator().next(), type: "comment", title: "T", body: "B", url: nil, timestamp: Date(), target: .users(["ana"]))
        let with = try JSONSerialization.jsonObject(with: WebPushSink.payload(for: n, distribution: .alert, badge: 4)) as? [String: Any]
        let without = try JSONSerialization.jsonObject(with: WebPushSink.payload(for: n, distribution: .alert)) as? [String: Any]
        #expect(with?["badge"] as? Int == 4)
        #expect(without?.keys.contains("badge") == false)
    }

    /// One VAPID token per push service for hours, not a signature per push: every message to
    /// one origin within the reuse window carries the same Authorization, which the push
    /// service verifies; past the window, a new one.
    @Test func vapidTokensAreReusedPerPushServiceAndRenewed() async throws {
        let now = Mutex(Date())
        let f = try await Fixture.start(clock: { now.withLock { $0 } })
        try await f.register("ana", "ana-1")
        try await f.register("ana", "ana-2")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "one", body: "b", userIDs: ["ana"]))
        try await f.deliverAll()
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "two", body: "b", userIDs: ["ana"]))
        try await f.deliverAll()
        let early = f.emulator.received
        #expect(early.count == 4 && early.allSatisfy { $0.status == 201 }, "\(early.map { $0.error ?? "" })")
        #expect(Set(early.map { $0.headers["authorization"] ?? "" }).count == 1, "one token for four pushes to one origin")
        now.withLock { $0 += 7 * 3600 } // past the sink's 6-hour reuse window
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "three", body: "b", userIDs: ["ana"]))
        try await f.deliverAll()
        let late = f.emulator.received.dropFirst(4)
        #expect(late.count == 2 && late.allSatisfy { $0.status == 201 }, "\(late.map { $0.error ?? "" })")
        #expect(Set(late.map { $0.headers["authorization"] ?? "" }).count == 1)
        #expect(late.first?.headers["authorization"] != early.first?.headers["authorization"], "renewed after the reuse window")
        await f.stop()
    }

    @Test func answersBecomeOutcomes() async throws {
        let f = try await Fixture.start()
        try await f.register("gil", "gone-1")
        try await f.register("gil", "keep-1")
        try await f.register("fay", "flaky-1")
        try await f.register("bo", "busy-1")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["gil", "fay", "bo"]))
        try await f.deliverAll()
        let devices = try await f.store.devices(userID: "gil")
        #expect(devices.count == 1 && devices.first?.address.key.hasSuffix("/push/keep-1") == true, "410 removes that subscription only")
        #expect(f.emulator.received.filter { $0.subscription == "flaky-1" }.map(\.status) == [503, 503, 201])
        #expect(f.emulator.received.filter { $0.subscription == "busy-1" }.map(\.status) == [429, 201])
        #expect(f.emulator.received.allSatisfy { $0.error == nil || $0.status == 404 })
        await f.stop()
    }

    /// Each subscription names its own push service, chosen by the user's browser (or by the
    /// user): one user's subscriptions failing says nothing of the sink. They opened the sink's
    /// circuit, so every other user's Web Push waited for its probe (30 s, doubling to 5 min).
    @Test func oneUsersFailingSubscriptionsDoNotHoldBackOthers() async throws {
        let f = try await Fixture.start()
        for index in 1...6 { try await f.register("mallory", "down-\(index)") }
        try await f.register("ana", "ana-1")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory"]))
        try await f.engine.processDue()
        #expect(f.emulator.received.filter { $0.subscription.hasPrefix("down-") }.count == 6)
        #expect(!f.engine.circuits.state(of: f.sink.name).isOpen, "six failing subscriptions of one user")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "for ana", body: "b", userIDs: ["ana"]))
        try await f.engine.processDue()
        #expect(f.emulator.received.filter { $0.subscription == "ana-1" }.map(\.status) == [201], "sent at once, not after a probe")
        await f.stop()
    }

    /// A push service that is down (every connection refused) opens a circuit of its own: its
    /// subscribers' pushes wait for its probes without spending attempts, and every other push
    /// service is sent to at once, as is the sink's circuit left closed.
    @Test func aPushServiceThatIsDownHoldsOnlyItsOwnSubscribers() async throws {
        let f = try await Fixture.start()
        let closed = try Loopback.freePort()
        let down = (1...20).map { "down-\($0)" }
        for user in down { try await f.register(user, user, endpoint: "http://127.0.0.1:\(closed)/push/\(user)") }
        try await f.register("ana", "ana-1")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "first", body: "b", userIDs: down + ["ana"]))
        try await f.engine.processDue()
        let open = f.engine.circuits.openEndpoints(of: f.sink.name)
        #expect(open.map(\.endpoint) == ["http://127.0.0.1:\(closed)"], "\(open.map(\.endpoint))")
        #expect(open.first?.state.reason?.contains("0 of its last 20 deliveries got through") == true)
        #expect(!f.engine.circuits.state(of: f.sink.name).isOpen, "the sink's own circuit stays closed")

        let second = try await f.service.send(NotificationSubmission(type: "generic", title: "second", body: "b", userIDs: down + ["ana"])).receipt
        try await f.engine.processDue()
        #expect(f.emulator.received.filter { $0.subscription == "ana-1" }.map(\.status) == [201, 201], "the working service is not held")
        let held = try #require(try await f.store.status(of: second.id)).deliveries.filter { $0.sink == f.sink.name && $0.userID != "ana" }
        #expect(held.count == 20)
        #expect(held.allSatisfy { $0.state == .pending && $0.attempts == 0 }, "held, no attempt spent: \(held.map(\.attempts))")
        #expect(held.allSatisfy { $0.lastError?.contains("the circuit for http://127.0.0.1:\(closed) is open") == true }, "\(held.first?.lastError ?? "")")
        await f.stop()
    }

    /// Anyone can register a subscription at a server that takes connections and never answers.
    /// Each send there held its share of the sink for the whole timeout, every time; after a
    /// few sends without an answer the origin is held: its sends are retried later without a
    /// connection, and other push services are sent to as usual. The hold ends.
    @Test func aPushServiceThatNeverAnswersIsHeld() async throws {
        let silent = try Loopback.silentListener()
        defer { close(silent.fd) }
        let now = Mutex(Date())
        // Long enough for the emulator to answer while the whole suite runs.
        let f = try await Fixture.start(timeout: .seconds(2), clock: { now.withLock { $0 } })
        for index in 1...SilentPushServices.strikes {
            try await f.register("mallory", "silent-\(index)", endpoint: "http://127.0.0.1:\(silent.port)/push/silent-\(index)")
        }
        try await f.register("ana", "ana-1")
        func lastErrors(_ id: ObjectID) async throws -> [String] {
            try #require(try await f.store.status(of: id)).deliveries.filter { $0.sink == f.sink.name && $0.userID == "mallory" }.map {
                $0.lastError ?? ""
            }
        }
        let first = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory"])).receipt.id
        try await f.engine.processDue()
        let unanswered = try await lastErrors(first)
        #expect(unanswered.count == SilentPushServices.strikes && unanswered.allSatisfy { $0.contains("did not answer within") }, "\(unanswered)")

        let second = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory", "ana"])).receipt.id
        try await f.engine.processDue()
        let held = try await lastErrors(second)
        #expect(held.count == SilentPushServices.strikes && held.allSatisfy { $0.contains("answered none of its last sends") }, "\(held)")
        #expect(f.emulator.received.filter { $0.subscription == "ana-1" }.map(\.status) == [201], "another push service is sent to as usual")
        let retries = try #require(try await f.store.status(of: second)).deliveries.filter { $0.sink == f.sink.name && $0.userID == "mallory" }
        #expect(retries.allSatisfy { $0.state == .pending && ($0.nextAttemptAt ?? .distantPast) > Date().addingTimeInterval(20) }, "retried after the hold")

        now.withLock { $0 += 31 }
        let third = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory"])).receipt.id
        try await f.engine.processDue()
        let again = try await lastErrors(third)
        #expect(again.count == SilentPushServices.strikes && again.allSatisfy { $0.contains("did not answer within") }, "tried again after 30 s: \(again)")
        #expect(f.sink.silentServices.heldUntil("http://127.0.0.1:\(silent.port)", now: now.withLock { $0 }) != nil, "and held again")
        await f.stop()
    }

    /// Names cost nothing: a wildcard DNS record gives one silent server as many as there are
    /// subscriptions, and an address as many origins as it has ports. Each new origin cost a
    /// send's whole timeout; now a send is counted against its host's public address too, and
    /// held while that is.
    @Test func namesAndPortsOfOneSilentServerAreHeldTogether() async throws {
        let silent = try Loopback.silentListener()
        let otherPort = try Loopback.silentListener()
        defer {
            close(silent.fd)
            close(otherPort.fd)
        }
        let names = ["a.silent.test", "b.silent.test", "c.silent.test"]
        // The resolver sees the one public address a wildcard record would give; the client
        // connects to the silent listeners on loopback.
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.dnsOverride = Dictionary(uniqueKeysWithValues: names.map { ($0, "127.0.0.1") })
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        TestResources.register { try? await http.shutdown() }
        let resolver = PushServiceResolver { name in name.hasSuffix(".silent.test") ? [[93, 184, 216, 34]] : [] }
        let f = try await Fixture.start(timeout: .seconds(2), resolver: resolver, http: http)
        func lastErrors(_ id: ObjectID) async throws -> [String: String] {
            let deliveries = try #require(try await f.store.status(of: id)).deliveries.filter { $0.sink == f.sink.name }
            return Dictionary(
                deliveries.compactMap { delivery in delivery.deviceID.map { ($0.hex, delivery.lastError ?? "") } }, uniquingKeysWith: { a, _ in a })
        }
        try await f.register("mallory", "a", endpoint: "https://a.silent.test:\(silent.port)/push/a")
        let first = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory"])).receipt.id
        try await f.engine.processDue()
        let unanswered = try await lastErrors(first)
        #expect(unanswered.count == 1 && unanswered.values.allSatisfy { $0.contains("did not answer within") }, "\(unanswered)")

        try await f.register("mallory", "b", endpoint: "https://b.silent.test:\(silent.port)/push/b")
        try await f.register("mallory", "c", endpoint: "https://c.silent.test:\(otherPort.port)/push/c")
        let second = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory"])).receipt.id
        try await f.engine.processDue()
        let held = try await lastErrors(second).values.sorted()
        #expect(held.count == 3, "\(held)")
        #expect(held.filter { $0.contains("https://a.silent.test:\(silent.port) answered none of its last sends") }.count == 1, "\(held)")
        #expect(held.filter { $0.contains("is at an address where sends went unanswered") }.count == 2, "new names and ports of it: \(held)")
        await f.stop()
    }

    /// A public address is one key whatever the port; on loopback or a private network, where one
    /// machine runs several services (allowed with `allow_private_endpoints`), the port is part of it.
    @Test func addressKeysKeepPortsOnlyForPrivateAddresses() {
        #expect(SilentPushServices.key(address: [93, 184, 216, 34], port: 443) == SilentPushServices.key(address: [93, 184, 216, 34], port: 8443))
        #expect(SilentPushServices.key(address: [127, 0, 0, 1], port: 80) != SilentPushServices.key(address: [127, 0, 0, 1], port: 81))
        let v6: [UInt8] = [0x2a, 0x00, 0x14, 0x50, 0x40, 0x01, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0x20, 0x0e]
        #expect(SilentPushServices.key(address: v6, port: 443) == "address 2a00:1450:4001:800:0:0:0:200e")
    }

    /// The sink reports outcomes as they come: in a batch with a send to a push service that
    /// never answers, the others are recorded within about a second, not after the timeout.
    @Test func sendsThatAreAnsweredAreRecordedWithoutWaitingForASilentOne() async throws {
        let silent = try Loopback.silentListener()
        defer { close(silent.fd) }
        let f = try await Fixture.start(timeout: .seconds(6))
        try await f.register("ana", "ana-1")
        try await f.register("ana", "silent-1", endpoint: "http://127.0.0.1:\(silent.port)/push/silent-1")
        let id = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["ana"])).receipt.id
        let done = Mutex(false)
        let working = Task {
            try await f.engine.processDue()
            done.withLock { $0 = true }
        }
        func pushes() async throws -> [DeliveryRecord] {
            try #require(try await f.store.status(of: id)).deliveries.filter { $0.sink == f.sink.name }
        }
        var recorded = false
        var sending = true
        for _ in 0..<1_000 where !recorded {
            sending = !done.withLock { $0 }
            recorded = try await pushes().contains { $0.state == .delivered }
            if !recorded { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(recorded && sending, "the answered send is recorded while the silent one still waits")
        _ = try? await working.value
        await f.stop()
    }

    /// A push service that has answered before is held after three silent sends in a row (a
    /// lost request to Google's must not hold everyone's pushes to it); a name never heard from
    /// at its first silence. Holds double while the origin stays silent, up to ten minutes.
    @Test func silentOriginsAreHeldSoonerWhenTheyNeverAnswered() {
        let services = SilentPushServices()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        services.answered("https://push.example")
        #expect(services.unanswered("https://push.example", now: now) == nil)
        #expect(services.unanswered("https://push.example", now: now) == nil)
        #expect(services.unanswered("https://push.example", now: now) == now.addingTimeInterval(30), "the third in a row")
        #expect(services.unanswered("https://new-host.example", now: now) == now.addingTimeInterval(30), "never answered: the first")
        #expect(services.unanswered("https://new-host.example", now: now.addingTimeInterval(10)) == nil, "a send that went out before the hold")
        #expect(services.unanswered("https://new-host.example", now: now.addingTimeInterval(31)) == now.addingTimeInterval(91), "then twice as long")
        var at = now.addingTimeInterval(100)
        var hold: TimeInterval = 0
        for _ in 0..<10 {
            let until = services.unanswered("https://new-host.example", now: at) ?? at
            hold = until.timeIntervalSince(at)
            at = until.addingTimeInterval(1)
        }
        #expect(hold == 600, "at most ten minutes")
        services.answered("https://new-host.example")
        #expect(services.heldUntil("https://new-host.example", now: at) == nil)
        #expect(services.unanswered("https://new-host.example", now: at) == nil, "having answered, it takes three again")
    }

    /// A server that answers each send's head at once and never finishes its body: the head is
    /// the answer, and the send does not wait out its timeout for the rest (it held its batch
    /// for the whole of it, looking like a push service that answers).
    @Test func aPushServiceThatNeverFinishesItsAnswersHoldsNothingBack() async throws {
        let server = try await RawAnswerServer.start("HTTP/1.1 201 Created\r\nContent-Length: 1000\r\n\r\n", closes: false)
        let f = try await Fixture.start(timeout: .seconds(30))
        try await f.register("mallory", "slow-body-1", endpoint: "\(server.url)push/slow-body-1")
        let id = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mallory"])).receipt.id
        let started = ContinuousClock.now
        try await f.engine.processDue()
        #expect(ContinuousClock.now - started < .seconds(15), "answered at the head, not after the 30 s timeout")
        let pushes = try #require(try await f.store.status(of: id)).deliveries.filter { $0.sink == f.sink.name }
        #expect(pushes.map(\.state) == [.delivered])
        await f.stop()
        try await server.stop()
    }

    /// `timeout` from the sink's settings: seconds, 0.1-300, 15 by default.
    @Test func theSendTimeoutIsASetting() async throws {
        func make(_ values: [String: String]) async throws -> WebPushSink {
            var values = values
            values["vapid_private_key"] = VAPIDKey.generate().privateKeyBase64URL
            values["subject"] = "mailto:ops@example.com"
            let context = SinkContext(
                name: "webpush", settings: SinkSettings(name: "webpush", values: values), store: try SQLiteStore(path: ":memory:"), feed: FeedSnapshot(),
                logger: Logger(label: "t"), metrics: HeraldMetrics())
            let sink = try #require(try await SinkFactory.webpush.makeSink(context) as? WebPushSink)
            TestResources.register { await sink.shutdown() }
            return sink
        }
        #expect(try await make([:]).configuration.timeout == .seconds(15))
        #expect(try await make(["timeout": "2.5"]).configuration.timeout == .milliseconds(2_500))
        for bad in ["0", "301", "soon", "nan"] {
            await #expect(throws: (any Error).self, "timeout \(bad)") { _ = try await make(["timeout": bad]) }
        }
    }

    /// A subscription's endpoint is outside input: a redirect from it is an answer (failed), never
    /// a reason to POST the message on to wherever it points, an internal address included.
    @Test func aPushServiceRedirectIsNotFollowed() async throws {
        let f = try await Fixture.start(ownClient: true)
        try await f.register("mo", "moved-1")
        try await f.register("kim", "keep-2")
        _ = try await f.service.send(NotificationSubmission(type: "generic", title: "t", body: "b", userIDs: ["mo", "kim"]))
        try await f.deliverAll()
        #expect(f.emulator.received.filter { $0.subscription == "moved-1" }.map(\.status) == [307], "answered once, not followed")
        #expect(f.emulator.received.allSatisfy { $0.error != "followed a redirect" })
        #expect(f.emulator.received.filter { $0.subscription == "keep-2" }.map(\.status) == [201], "the sink's own client delivers")
        #expect(try await f.store.devices(userID: "mo").count == 1, "a redirect does not remove the subscription")
        await f.stop()
    }

    /// A subscription is whatever the registering client sent: with `allow_private_endpoints`
    /// off (the default) an endpoint at a loopback, private or link-local address is refused at
    /// registration, naming the field, in every spelling the resolver would reach it by; one
    /// stored anyway (before the check, or under the other setting) is failed, never sent.
    @Test func endpointsInsideTheOperatorsNetworkAreRefused() async throws {
        let f = try await Fixture.start()
        // Names are not looked up here (no DNS from tests): only literals are judged.
        let production = WebPushSink(
            name: "webpush", configuration: .init(vapid: .generate(), subject: "mailto:ops@example.com"), http: Fixture.http,
            logger: Logger(label: "test"), clock: { Date() }, resolver: PushServiceResolver { _ in [] })
        let keys = try #require(f.emulator.subscribe("inside")["keys"] as? [String: String])
        func registration(_ endpoint: String) throws -> DeviceRegistration {
            let object: [String: Any] = ["endpoint": endpoint, "keys": keys]
            let value = try JSONDecoder().decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: object))
            return DeviceRegistration(address: DeviceAddress(provider: "webpush", value: value, key: ""), addressField: "web_push")
        }
        let inside = [
            f.emulator.subscribe("inside")["endpoint"] as? String ?? "", "https://127.0.0.1/push/x", "https://localhost:8443/push/x",
            "https://api.localhost/push/x", "https://10.1.2.3/push/x", "https://172.20.0.1/push/x", "https://192.168.1.1/push/x",
            "https://169.254.169.254/latest", "https://100.64.0.1/push/x", "https://0.0.0.0/push/x", "https://[::1]/push/x",
            "https://[fd00::1]/push/x", "https://[fe80::1]/push/x", "https://[::ffff:10.0.0.1]/push/x", "https://127.1/push/x",
            "https://2130706433/push/x", "https://0x7f000001/push/x", "https://[fe80::1%25eth0]/push/x", "https://LOCALHOST./push/x",
            "https://[64:ff9b::a00:1]/push/x", "https://[2002:7f00:1::]/push/x", "https://198.18.0.1/push/x", "https://192.0.0.8/push/x",
            "https://[2001:db8::1]/push/x",
        ]
        for endpoint in inside {
            var candidate = try registration(endpoint)
            do {
                try production.prepare(&candidate)
                try await production.admit(candidate)
                Issue.record("\(endpoint) was accepted")
            } catch let error as HeraldError {
                #expect(error.code == "invalid_field" && error.message.contains("web_push.endpoint"), "\(endpoint): \(error.message)")
                #expect(error.message.contains("allow_private_endpoints"), "\(error.message)")
            }
        }
        for endpoint in [
            "https://fcm.googleapis.com/fcm/send/abc", "https://updates.push.services.mozilla.com/wpush/v2/x", "https://8.8.8.8/p",
            "https://[64:ff9b::808:808]/p", "https://[2002:808:808::]/p", "https://[2a00:1450:4001:800::200e]/p", "https://198.20.0.1/p",
        ] {
            var candidate = try registration(endpoint)
            try production.prepare(&candidate)
            await #expect(throws: Never.self, "\(endpoint)") { try await production.admit(candidate) }
        }
        // `prepare` (which removing a device also runs) only reads the subscription, so one
        // stored before the check can still be removed.
        var stored = try registration("https://10.1.2.3/push/x")
        try production.prepare(&stored)
        #expect(stored.address.key == "https://10.1.2.3/push/x")
        // Stored while the emulator's sink allowed it, then sent by a sink that does not.
        try await f.register("ivy", "inside-2")
        let device = try #require(try await f.store.devices(userID: "ivy").first)
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, data: [:], timestamp: Date(), distribution: .alert,
            target: .users(["ivy"]))
        let delivery = Delivery(
            id: 1, sink: "webpush", notification: notification, recipient: .init(userID: "ivy", device: device), distribution: .alert, attempt: 1)
        guard case .failed(let reason, _) = (await production.deliver([delivery])).first else {
            Issue.record("a stored private endpoint was not failed")
            await f.stop()
            return
        }
        #expect(reason.contains("allow_private_endpoints"))
        #expect(f.emulator.received.isEmpty, "nothing was sent")
        await f.stop()
    }

    /// A host name is judged by what it resolves to before a send: a name in `/etc/hosts` or a
    /// public DNS name pointing at 127.0.0.1 reaches the operator's network as the literal does.
    /// A name that resolves to nothing is not sent to and not remembered: the client would look
    /// it up again, and a DNS server that failed the judging lookup could answer that one with
    /// a private address.
    @Test func anEndpointNameResolvingInsideTheOperatorsNetworkIsNotSentTo() async throws {
        let f = try await Fixture.start()
        let looked = Mutex<[String]>([])
        let resolver = PushServiceResolver { name in
            let times = looked.withLock { looked in
                looked.append(name)
                return looked.filter { $0 == name }.count
            }
            switch name {
            case "push.inside.example": return [[8, 8, 8, 8], [127, 0, 0, 1]]
            case "push.flaky.example": return times == 1 ? [] : [[127, 0, 0, 1]]
            default: return []
            }
        }
        let production = WebPushSink(
            name: "webpush", configuration: .init(vapid: .generate(), subject: "mailto:ops@example.com"), http: Fixture.http,
            logger: Logger(label: "test"), clock: { Date() }, resolver: resolver)
        let keys = try #require(f.emulator.subscribe("named")["keys"] as? [String: String])
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, data: [:], timestamp: Date(), distribution: .alert,
            target: .users(["ned"]))
        func delivery(to endpoint: String) throws -> Delivery {
            let object: [String: Any] = ["endpoint": endpoint, "keys": keys]
            var registration = DeviceRegistration(
                address: DeviceAddress(
                    provider: "webpush", value: try JSONDecoder().decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: object)), key: ""),
                addressField: "web_push")
            try production.prepare(&registration)
            let device = Device(id: ObjectIDGenerator().next(), userID: "ned", address: registration.address, createdAt: Date(), updatedAt: Date())
            return Delivery(
                id: 1, sink: "webpush", notification: notification, recipient: .init(userID: "ned", device: device), distribution: .alert, attempt: 1)
        }
        let inside = try delivery(to: "https://Push.Inside.Example:8443/push/named")
        for _ in 0..<2 {
            guard case .failed(let reason, _) = (await production.deliver([inside])).first else {
                Issue.record("an endpoint resolving to 127.0.0.1 was not failed")
                break
            }
            #expect(reason.contains("resolves to a loopback") && reason.contains("allow_private_endpoints"), "\(reason)")
        }
        #expect(looked.withLock { $0 } == ["push.inside.example"], "resolved once, then remembered")

        let flaky = try delivery(to: "https://push.flaky.example/push/named")
        let first = (await production.deliver([flaky])).first
        guard case .retry(let after, let reason, _) = first else {
            Issue.record("a name that did not resolve was not retried: \(String(describing: first))")
            await f.stop()
            return
        }
        #expect(after == nil && reason.contains("did not resolve"), "\(reason)")
        guard case .failed(let reason, _) = (await production.deliver([flaky])).first else {
            Issue.record("a name that resolved to 127.0.0.1 on its second lookup was not failed")
            await f.stop()
            return
        }
        #expect(reason.contains("resolves to a loopback"), "\(reason)")
        #expect(looked.withLock { $0.filter { $0 == "push.flaky.example" }.count } == 2, "a failed lookup is not remembered")
        #expect(f.emulator.received.isEmpty, "nothing was sent")
        await f.stop()
    }

    /// At registration a name is judged too, when the resolver answers within a second: a
    /// registration does not wait on a slow DNS server (each send judges the name again).
    @Test func registrationRefusesANameResolvingInsideTheOperatorsNetwork() async throws {
        let keys = try #require(WebPushEmulator().subscribe("named")["keys"] as? [String: String])
        func registration(_ host: String) throws -> DeviceRegistration {
            let object: [String: Any] = ["endpoint": "https://\(host)/push/named", "keys": keys]
            return DeviceRegistration(
                address: DeviceAddress(
                    provider: "webpush", value: try JSONDecoder().decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: object)), key: ""),
                addressField: "web_push")
        }
        // The refusals are judged with time to spare (a loaded machine schedules the lookup
        // late); the slow name with the production limit.
        func sink(allowingPrivate: Bool = false, waiting limit: Duration = .seconds(60)) -> WebPushSink {
            var configuration = WebPushSink.Configuration(vapid: .generate(), subject: "mailto:ops@example.com")
            configuration.allowsPrivateEndpoints = allowingPrivate
            let resolver = PushServiceResolver { name in
                switch name {
                case "inside.example": return [[10, 0, 0, 7]]
                case "slow.example":
                    try? await Task.sleep(for: .seconds(10))
                    return [[127, 0, 0, 1]]
                default: return [[93, 184, 216, 34]]
                }
            }
            return WebPushSink(
                name: "webpush", configuration: configuration, http: Fixture.http, logger: Logger(label: "test"), clock: { Date() }, resolver: resolver,
                admissionLookupLimit: limit)
        }
        var inside = try registration("inside.example")
        let production = sink()
        try production.prepare(&inside)
        do {
            try await production.admit(inside)
            Issue.record("a name resolving to 10.0.0.7 was admitted")
        } catch let error as HeraldError {
            #expect(error.code == "invalid_field" && error.message.contains("web_push.endpoint"), "\(error.message)")
            #expect(error.message.contains("allow_private_endpoints"), "\(error.message)")
        }
        try await sink(allowingPrivate: true).admit(inside)
        var outside = try registration("push.example")
        try production.prepare(&outside)
        try await production.admit(outside)
        var slow = try registration("slow.example")
        let impatient = sink(waiting: .seconds(1))
        try impatient.prepare(&slow)
        let started = ContinuousClock.now
        try await impatient.admit(slow)
        #expect(ContinuousClock.now - started < .seconds(8), "admitted without waiting for the lookup")
    }

    @Test func theResolverJudgesEveryAddressOfAName() async throws {
        let resolver = PushServiceResolver { name in
            switch name {
            case "public.example": [[93, 184, 216, 34], [0x2a, 0x00, 0x14, 0x50, 0x40, 0x01, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0x20, 0x0e]]
            case "v6-loopback.example": [[93, 184, 216, 34], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]
            case "mapped.example": [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 0, 1]]
            default: []
            }
        }
        #expect(await resolver.judgement(of: "public.example") == .publicHost)
        #expect(await resolver.judgement(of: "v6-loopback.example") == .privateHost)
        #expect(await resolver.judgement(of: "mapped.example") == .privateHost)
        #expect(await resolver.judgement(of: "unresolvable.example") == .unresolved)
        #expect(await resolver.judgement(of: "10.0.0.1") == .privateHost, "literals are judged as they are")
        #expect(await resolver.judgement(of: "8.8.8.8") == .publicHost)
        // The system's resolver reads /etc/hosts, where localhost always is.
        let local = await PushServiceResolver.systemResolve("localhost")
        #expect(!local.isEmpty && local.allSatisfy(PushServiceHost.isPrivate(address:)), "\(local)")
    }

    /// Sends to a host not yet judged wait for one lookup, and no more than
    /// `concurrentLookups` names are looked up at once: a slow name past that is undecided, so
    /// its send is retried later rather than queued behind every other lookup.
    @Test func theResolverLooksANameUpOnceAndBoundsItsLookups() async throws {
        let started = Mutex<[String]>([])
        // Slow names answer once released, not after a while: on a loaded machine 1.5 s had
        // passed before the checks that need them still in progress.
        let slowReleased = Mutex(false)
        defer { slowReleased.withLock { $0 = true } }
        let resolver = PushServiceResolver { name in
            started.withLock { $0.append(name) }
            if name.hasPrefix("slow") {
                while !slowReleased.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) }
            } else {
                try? await Task.sleep(for: .milliseconds(200))
            }
            return name.hasPrefix("inside") ? [[10, 0, 0, 9]] : [[93, 184, 216, 34]]
        }
        let answers = await withTaskGroup(of: HostJudgement.self) { group in
            for _ in 0..<40 { group.addTask { await resolver.judgement(of: "Inside.Example") } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 40 && answers.allSatisfy { $0 == .privateHost }, "\(answers)")
        #expect(started.withLock { $0 } == ["inside.example"], "one lookup for 40 sends")

        let limit = PushServiceResolver.concurrentLookups
        let slow = Task {
            await withTaskGroup(of: HostJudgement.self) { group in
                for index in 0..<limit { group.addTask { await resolver.judgement(of: "slow-\(index).example") } }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while started.withLock({ $0.count }) < limit + 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(await resolver.judgement(of: "inside-too.example") == .busy, "a name past the bound is undecided")
        #expect(await resolver.judgement(of: "inside-too.example", within: .seconds(1)) == .busy)
        #expect(await resolver.judgement(of: "inside.example") == .privateHost, "remembered verdicts are answered meanwhile")
        let production = WebPushSink(
            name: "webpush", configuration: .init(vapid: .generate(), subject: "mailto:ops@example.com"), http: Fixture.http,
            logger: Logger(label: "test"), clock: { Date() }, resolver: resolver)
        let endpoint = try #require(URL(string: "https://inside-too.example/push/x"))
        #expect(await production.verdict(on: endpoint) == .undecided)
        slowReleased.withLock { $0 = true }
        #expect(await slow.value.allSatisfy { $0 == .publicHost })
        #expect(await resolver.judgement(of: "inside-too.example") == .privateHost, "looked up once the others are done")
        guard case .refused = await production.verdict(on: endpoint) else {
            Issue.record("a name resolving to 10.0.0.9 was not refused")
            return
        }
    }

    /// Names whose DNS servers never answer (anyone who may register a subscription can name
    /// them) take every lookup slot. A known push service's verdict, past its minute, is still
    /// answered while no lookup can renew it, so pushes to it go on; and a send to a name not
    /// judged yet waits a bounded time, not the resolver's timeouts.
    @Test func namesThatNeverResolveHoldBackNoPushService() async throws {
        let started = Mutex<[String]>([])
        let resolver = PushServiceResolver(
            resolve: { name in
                started.withLock { $0.append(name) }
                if name.hasPrefix("silent") { try? await Task.sleep(for: .seconds(20)) }
                return [[93, 184, 216, 34]]
            }, lifetime: .milliseconds(100))
        #expect(await resolver.judgement(of: "push.example") == .publicHost)
        let limit = PushServiceResolver.concurrentLookups
        for index in 0..<limit { Task { _ = await resolver.judgement(of: "silent-\(index).example") } }
        let deadline = ContinuousClock.now + .seconds(10)
        while started.withLock({ $0.count }) < limit + 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(150))
        #expect(await resolver.judgement(of: "push.example") == .publicHost, "answered past its lifetime while no lookup can renew it")
        #expect(started.withLock { $0.filter { $0 == "push.example" } }.count == 1)

        // A lookup that starts and is never answered (its name would be refused if it were).
        let neverAnswers = PushServiceResolver(resolve: { _ in
            try? await Task.sleep(for: .seconds(20))
            return [[10, 0, 0, 9]]
        })
        let sink = WebPushSink(
            name: "webpush", configuration: .init(vapid: .generate(), subject: "mailto:ops@example.com"), http: Fixture.http,
            logger: Logger(label: "test"), clock: { Date() }, resolver: neverAnswers, sendLookupLimit: .milliseconds(200))
        let subscription = WebPushEmulator().subscribe("x")
        var object = try JSONDecoder().decode(JSONValue.self, from: try JSONSerialization.data(withJSONObject: subscription)).objectValue ?? [:]
        object["endpoint"] = .string("https://silent-new.example/push/x")
        let device = Device(
            id: ObjectIDGenerator().next(), userID: "u", address: DeviceAddress(provider: "webpush", value: .object(object), key: "k"), createdAt: Date(),
            updatedAt: Date())
        let n = HeraldNotification(id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, timestamp: Date(), target: .users(["u"]))
        let outcomes = await sink.deliver([
            Delivery(id: 1, sink: "webpush", notification: n, recipient: DeliveryRecipient(userID: "u", device: device), distribution: .alert, attempt: 1)
        ])
        guard case .retry(let after, let reason, _) = outcomes.first else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(after == WebPushSink.busyResolverDelay && reason.contains("could not be judged now"), "\(reason)")
    }

    @Test func registrationChecksTheSubscription() async throws {
        let f = try await Fixture.start()
        let good = f.emulator.subscribe("x")
        let keys = try #require(good["keys"] as? [String: String])
        let bad: [[String: Any]] = [
            ["endpoint": "http://push.example/send", "keys": keys],
            ["endpoint": good["endpoint"] ?? "", "keys": ["p256dh": "AAAA", "auth": keys["auth"] ?? ""]],
            ["endpoint": good["endpoint"] ?? "", "keys": ["p256dh": keys["p256dh"] ?? "", "auth": "AAAA"]],
            ["endpoint": good["endpoint"] ?? ""],
            // A port past 16 bits trapped the process when the push was made (below).
            ["endpoint": "https://93.184.216.34:99999/push/x", "keys": keys],
            ["endpoint": "https://93.184.216.34:0/push/x", "keys": keys],
        ]
        for object in bad {
            var registration = DeviceRegistration(
                address: DeviceAddress(
                    provider: "webpush", value: try JSONDecoder().decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: object)), key: ""),
                addressField: "web_push"
            )
            #expect(throws: HeraldError.self, "\(object)") { try f.sink.prepare(&registration) }
        }
        // Stored before registration checked the port: failed at the send, not a trap.
        let object: [String: Any] = ["endpoint": "https://93.184.216.34:99999/push/x", "keys": keys]
        let address = DeviceAddress(
            provider: "webpush", value: try JSONDecoder().decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: object)),
            key: "https://93.184.216.34:99999/push/x")
        let device = Device(id: ObjectIDGenerator().next(), userID: "pat", address: address, createdAt: Date(), updatedAt: Date())
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, data: [:], timestamp: Date(), distribution: .alert,
            target: .users(["pat"]))
        let delivery = Delivery(
            id: 1, sink: "webpush", notification: notification, recipient: .init(userID: "pat", device: device), distribution: .alert, attempt: 1)
        guard case .failed = (await f.sink.deliver([delivery])).first else {
            Issue.record("a stored endpoint with port 99999 was not failed")
            await f.stop()
            return
        }
        var tooLarge = NotificationSubmission(
            type: "generic", title: String(repeating: "t", count: 1_000), body: String(repeating: "b", count: 3_500), userIDs: ["u"])
        tooLarge.url = nil
        let big = try NotificationValidator(types: try NotificationTypes(), resources: try ResourceResolver(publicBaseURL: "https://app.example"))
            .validate(tooLarge, id: ObjectIDGenerator().next(), now: Date())
        #expect(throws: HeraldError.self) { try f.sink.validate(big) }
        await f.stop()
    }

    /// Anyone who may register a device chooses its endpoint: one that answers 401 or 403 is
    /// about that subscription, never the operator's VAPID key (docs/security.md).
    @Test func oneSubscriptionRefusingTheSignatureFailsOnlyThatDelivery() async throws {
        let f = try await Fixture.start()
        let hostile = try await RawAnswerServer.start("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        for n in 0..<5 { try await f.register("mallory", "m\(n)", endpoint: hostile.url + "push/m\(n)") }
        let outcomes = try await f.sendDirectly(to: "mallory")
        #expect(outcomes.count == 5)
        for outcome in outcomes {
            guard case .failed(let reason, let scope) = outcome else {
                Issue.record("\(outcome)")
                continue
            }
            #expect(scope == .recipient && reason.contains("401"), "\(reason)")
        }
        #expect(await f.sink.health() == .ok, "five refusals at a host nobody trusts to judge the key degraded the sink")
        try await f.register("ana", "browser-ana")
        #expect(try await f.sendDirectly(to: "ana") == [.delivered])
        try await hostile.stop()
        await f.stop()
    }

    /// A wrong key is refused at every subscription of a browser's push service: several
    /// refusals there with no send accepted between degrade the sink, and a send it accepts
    /// clears it.
    @Test func aPushServiceRefusingSeveralSubscriptionsProvesTheKeyWrong() async throws {
        let refusing = try await RawAnswerServer.start("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let f = try await Fixture.start(witnesses: ["127.0.0.1"])
        try await f.register("u", "s0", endpoint: refusing.url + "push/s0")
        try await f.register("u", "s1", endpoint: refusing.url + "push/s1")
        _ = try await f.sendDirectly(to: "u")
        #expect(await f.sink.health() == .ok, "two subscriptions prove nothing yet")
        try await f.register("u", "s2", endpoint: refusing.url + "push/s2")
        let outcomes = try await f.sendDirectly(to: "u")
        #expect(outcomes.contains { $0.scope == .credentials }, "\(outcomes)")
        guard case .degraded(let reason) = await f.sink.health() else {
            Issue.record("three refusals at a witness left the sink ok")
            await f.stop()
            return
        }
        #expect(reason.contains("VAPID key or subject") && reason.contains("3 distinct subscriptions"), "\(reason)")
        // The emulator, at the same host, accepts a send: the key works after all.
        try await f.register("ana", "browser-ana")
        _ = try await f.sendDirectly(to: "ana")
        #expect(await f.sink.health() == .ok)
        try await refusing.stop()
        await f.stop()
    }

    /// DNS rebinding: a name that resolves to a public address when the sink judges it, and to
    /// 127.0.0.1 when a connection is opened, must not reach 127.0.0.1. The sink connects to the
    /// address it judged (TLS still verifying the name's certificate); here a listener on
    /// 127.0.0.2 stands for that public address, and the client's own resolution of the name
    /// (what a rebinding DNS server would answer next) points at 127.0.0.1.
    @Test func aNameIsSentToTheAddressItWasJudgedByNotOneLookedUpLater() async throws {
        let name = "push.rebind.test"
        let certificate = try SelfSignedCertificate(commonName: name, dnsNames: [name])
        let directory = try TestResources.temporaryDirectory("herald-rebind")
        let caFile = directory.appendingPathComponent("ca.pem").path
        try certificate.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        let tls = try NIOSSLContext(
            configuration: .makeServerConfiguration(
                certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(certificate.certificatePEM.utf8), format: .pem))],
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem))))
        // The push service at the judged address, and the operator's service on one port.
        var pushService: RawAnswerServer?
        var inside: RawAnswerServer?
        for _ in 0..<20 where inside == nil {
            let candidate = try await RawAnswerServer.start("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", host: "127.0.0.2", tls: tls)
            if let listener = try? await RawAnswerServer.start("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", port: candidate.port) {
                (pushService, inside) = (candidate, listener)
            } else {
                try await candidate.stop()
            }
        }
        let service = try #require(pushService)
        let operators = try #require(inside)
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        var trust = TLSConfiguration.makeClientConfiguration()
        trust.additionalTrustRoots = [.file(caFile)]
        configuration.tlsConfiguration = trust
        configuration.dnsOverride = [name: "127.0.0.1"]
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        TestResources.register { try? await http.shutdown() }
        let judged: [UInt8] = [93, 184, 216, 34]
        let resolver = PushServiceResolver { $0 == name ? [judged] : [] }
        let sink = WebPushSink(
            name: "webpush", configuration: .init(vapid: .generate(), subject: "mailto:ops@example.com"), http: http, logger: Logger(label: "test"),
            clock: { Date() }, resolver: resolver, pinnedConfiguration: configuration,
            connectAddress: { $0 == judged ? "127.0.0.2" : "192.0.2.1" })
        TestResources.register { await sink.shutdown() }
        let keys = try #require(WebPushEmulator().subscribe("r")["keys"] as? [String: String])
        let object: [String: Any] = ["endpoint": "https://\(name):\(service.port)/push/r", "keys": keys]
        var registration = DeviceRegistration(
            address: DeviceAddress(
                provider: "webpush", value: try JSONDecoder().decode(JSONValue.self, from: JSONSerialization.data(withJSONObject: object)), key: ""),
            addressField: "web_push")
        try sink.prepare(&registration)
        try await sink.admit(registration)
        let device = Device(id: ObjectIDGenerator().next(), userID: "r", address: registration.address, createdAt: Date(), updatedAt: Date())
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, timestamp: Date(), target: .users(["r"]))
        let outcomes = await sink.deliver([
            Delivery(id: 1, sink: "webpush", notification: notification, recipient: .init(userID: "r", device: device), distribution: .alert, attempt: 1)
        ])
        #expect(outcomes == [.delivered], "\(outcomes)")
        #expect(operators.connections == 0, "the send reached the address the name rebound to")
        #expect(service.connections >= 1)
        try await service.stop()
        try await operators.stop()
    }

    /// Registrations may name any number of hosts, each looked up and remembered: a flood of
    /// made-up names must not push out the verdict of a push service that carries live
    /// subscriptions (its sends would wait on DNS again, or on a slow server's lookups).
    @Test func madeUpHostsCannotFlushAPushServicesVerdict() async {
        let resolver = PushServiceResolver { _ in [[93, 184, 216, 34]] }
        #expect(await resolver.judgement(of: "fcm.googleapis.com") == .publicHost)
        resolver.carriesSubscriptions("fcm.googleapis.com")
        #expect(await resolver.judgement(of: "idle.example") == .publicHost)
        for n in 0..<(PushServiceResolver.remembered + 50) { _ = await resolver.judgement(of: "made-up-\(n).example") }
        #expect(resolver.rememberedCount <= PushServiceResolver.remembered)
        #expect(resolver.remembers("fcm.googleapis.com"), "the push service's verdict was flushed")
        #expect(!resolver.remembers("idle.example"), "a host nobody sends to may go")
    }

    /// A push service failing part of the time (503s, 429s, dropped connections): every push
    /// ends delivered or dead with its reason, none twice, and the sink stays healthy.
    @Test func aPushServiceFailingPartOfTheTimeLosesNothing() async throws {
        var faults = FaultModes()
        (faults.failRate, faults.rateLimitRate, faults.resetRate) = (0.2, 0.1, 0.1)
        let f = try await Fixture.start(faults: faults)
        for n in 0..<10 { try await f.register("u\(n)", "s\(n)") }
        var ids: [ObjectID] = []
        for n in 0..<5 {
            ids.append(
                try await f.service.send(NotificationSubmission(type: "generic", title: "n\(n)", body: "b", userIDs: (0..<10).map { "u\($0)" })).receipt.id)
        }
        try await f.deliverAll()
        let states = try await DeliveryTally.states(of: ids, sink: f.sink.name, in: f.store)
        #expect(states[.pending, default: 0] == 0 && states.values.reduce(0, +) == 50, "\(states)")
        let accepted = f.emulator.received.filter { $0.status == 201 }.map { "\($0.subscription)|\($0.plaintext ?? "")" }
        #expect(DeliveryTally.repeated(accepted).isEmpty, "a push delivered twice")
        #expect(accepted.count == states[.delivered, default: 0])
        #expect(f.emulator.received.contains { $0.status != 201 }, "the faults happened")
        #expect(await f.sink.health() == .ok)
        await f.stop()
    }

    /// `credential_witnesses` lists host names: an empty list, or an entry that is a URL or has a
    /// space, is refused at start, naming the key; a good list is taken in lower case.
    @Test func credentialWitnessesMustBeHostNames() async throws {
        let store = try SQLiteStore(path: ":memory:")
        try await store.migrate()
        func make(_ witnesses: String) async throws -> any NotificationSink {
            let settings = SinkSettings(
                name: "webpush",
                values: ["vapid_private_key": VAPIDKey.generate().privateKeyBase64URL, "subject": "mailto:ops@example.com", "credential_witnesses": witnesses])
            return try await SinkFactory.webpush.makeSink(
                SinkContext(name: "webpush", settings: settings, store: store, feed: FeedSnapshot(), logger: Logger(label: "test"), metrics: HeraldMetrics()))
        }
        for bad in [",", "https://fcm.googleapis.com/", "two words"] {
            do {
                _ = try await make(bad)
                Issue.record("credential_witnesses '\(bad)' was taken")
            } catch let error as HeraldError {
                #expect(error.message.contains("credential_witnesses"), "\(error.message)")
            }
        }
        let sink = try #require(try await make("Push.Example, .notify.windows.com") as? WebPushSink)
        #expect(sink.configuration.credentialWitnesses == ["push.example", ".notify.windows.com"])
        await sink.shutdown()
    }
}
