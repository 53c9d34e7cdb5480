import Foundation
import HeraldCore
import HeraldEmulatorSupport
import HeraldFCMEmulator
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import Testing

@testable import HeraldFCMSink

/// The FCM sink against the local emulator, over real HTTP on loopback.
@Suite(.cleansUp) struct FCMSinkTests {
    @Test func alertReachesEveryDeviceWithTheDocumentedMapping() async throws {
        let f = try await EmulatorFixture.start()
        try await f.register("alice", "phone-1")
        try await f.register("alice", "tablet-1")
        let id = try await f.send(
            NotificationSubmission(
                type: "upvote", title: "Your post got an upvote", body: "Nice", url: "/posts/DKJW", data: ["thread": "9"], collapseKey: "votes",
                userIDs: ["alice"]
            ))
        try await f.deliverAll()
        for token in ["phone-1", "tablet-1"] {
            let message = try #require(f.messages(to: token).first, "\(token) got the alert")
            let notification = try #require(message["notification"] as? [String: String])
            #expect(notification == ["title": "Your post got an upvote", "body": "Nice"])
            let data = try #require(message["data"] as? [String: Any])
            #expect(data.values.allSatisfy { $0 is String }, "every data value is a string")
            #expect(data["id"] as? String == id.hex)
            #expect(data["type"] as? String == "upvote")
            #expect(data["url"] as? String == "https://pong.example/posts/DKJW")
            #expect(data["thread"] as? String == "9")
            let timestamp = try #require(data["timestamp"] as? String)
            #expect(timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$"#, options: .regularExpression) != nil, "Pong's form: \(timestamp)")
            let android = try #require(message["android"] as? [String: Any])
            #expect(android["priority"] as? String == "high")
            #expect(android["collapse_key"] as? String == "votes")
            let apns = try #require(message["apns"] as? [String: Any])
            let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
            #expect(aps["sound"] as? String == "default")
            #expect((aps["alert"] as? [String: String])?["title"] == "Your post got an upvote")
        }
        #expect(try await f.store.status(of: id)?.deliveries.allSatisfy { $0.state == .delivered } == true)
        await f.stop()
    }

    /// A user's badge (``Delivery/badge``, from the module that keeps it) reaches both
    /// platforms' icons on an alert: Android's `notification_count`, iOS's `aps.badge`; a
    /// delivery without one leaves both out.
    @Test func aBadgeIsCarriedToBothPlatforms() async throws {
        let f = try await EmulatorFixture.start()
        let device = Device(
            id: ObjectIDGenerator().next(), userID: "bea", address: DeviceAddress(provider: "fcm", token: "badge-1"), createdAt: Date(), updatedAt: Date())
        let notification = HeraldNotification(
            id: ObjectIDGenerator().next(), type: "comment", title: "t", body: "b", url: nil, timestamp: Date(), distribution: .alert, target: .users(["bea"]))
        for badge in [7, nil] {
            let delivery = Delivery(
                id: 1, sink: f.sink.name, notification: notification, recipient: DeliveryRecipient(userID: "bea", device: device), distribution: .alert,
                attempt: 1, badge: badge)
            #expect(await f.sink.deliver([delivery]) == [.delivered])
        }
        let messages = f.messages(to: "badge-1")
        #expect(messages.count == 2)
        let counts = messages.map { (($0["android"] as? [String: Any])?["notification"] as? [String: Any])?["notification_count"] as? Int }
        let badges = messages.map { ((($0["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["badge"] as? Int }
        #expect(counts == [7, nil] && badges == [7, nil])
        await f.stop()
    }

    @Test func informationIsSilentData() async throws {
        let f = try await EmulatorFixture.start()
        try await f.register("bob", "phone-2")
        let id = try await f.send(
            NotificationSubmission(type: "hot", title: "Trending", body: "quietly", url: nil, distribution: "information", userIDs: ["bob"]))
        try await f.deliverAll()
        let message = try #require(f.messages(to: "phone-2").first)
        #expect(message["notification"] == nil, "no notification block")
        let data = try #require(message["data"] as? [String: String])
        #expect(data["id"] == id.hex)
        #expect(data["url"] == nil, "a null url is left out")
        #expect(data["title"] == "Trending")
        let apns = try #require(message["apns"] as? [String: Any])
        #expect((apns["headers"] as? [String: String]) == ["apns-push-type": "background", "apns-priority": "5"])
        let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["content-available"] as? Int == 1)
        #expect(aps["alert"] == nil)
        #expect((message["android"] as? [String: Any])?["priority"] as? String == "high")
        await f.stop()
    }

    @Test func deadTokenIsTriedExactlyOnceEver() async throws {
        let f = try await EmulatorFixture.start()
        try await f.register("carol", "dead-1")
        try await f.register("carol", "alive-1")
        let first = try await f.send(NotificationSubmission(type: "comment", title: "one", userIDs: ["carol"]))
        try await f.deliverAll()
        _ = try await f.send(NotificationSubmission(type: "comment", title: "two", userIDs: ["carol"]))
        try await f.deliverAll()
        #expect(f.attempts(to: "dead-1").count == 1)
        #expect(f.messages(to: "alive-1").count == 2)
        #expect(try await f.store.devices(userID: "carol").map(\.token) == ["alive-1"], "the dead token is gone from the device list")
        let failed = try #require(try await f.store.status(of: first)?.deliveries.first { $0.state == .failed })
        #expect(failed.lastError?.contains("UNREGISTERED") == true)
        await f.stop()
    }

    @Test func invalidTokenIsRemovedButPayloadFaultsKeepTheDevice() async throws {
        let f = try await EmulatorFixture.start()
        try await f.register("dave", "invalid-1")
        try await f.register("dave", "good-1")
        _ = try await f.send(NotificationSubmission(type: "comment", title: "hi", userIDs: ["dave"]))
        try await f.deliverAll()
        #expect(try await f.store.devices(userID: "dave").map(\.token) == ["good-1"])
        await f.stop()
    }

    @Test func flakyTokenIsDeliveredOnTheThirdAttemptWithGrowingBackoff() async throws {
        let f = try await EmulatorFixture.start(backoff: .milliseconds(200))
        try await f.register("erin", "flaky-1")
        let id = try await f.send(NotificationSubmission(type: "reply", title: "hi", userIDs: ["erin"]))
        try await f.deliverAll()
        let attempts = f.attempts(to: "flaky-1")
        #expect(attempts.map(\.status) == [503, 503, 200])
        let firstGap = attempts[1].at.timeIntervalSince(attempts[0].at)
        let secondGap = attempts[2].at.timeIntervalSince(attempts[1].at)
        #expect(firstGap >= 0.1, "backoff after the first failure: \(firstGap)")
        #expect(secondGap >= 0.2, "backoff doubles after the second: \(secondGap)")
        let push = try #require(try await f.store.status(of: id)?.deliveries.first { $0.sink == "fcm" })
        #expect(push.state == .delivered && push.attempts == 3)
        await f.stop()
    }

    @Test func quotaIsRetriedNoSoonerThanRetryAfter() async throws {
        let f = try await EmulatorFixture.start(backoff: .milliseconds(50), quotaRetryAfter: 1)
        try await f.register("fay", "quota-1")
        _ = try await f.send(NotificationSubmission(type: "hot", title: "hi", userIDs: ["fay"]))
        try await f.deliverAll()
        let attempts = f.attempts(to: "quota-1")
        #expect(attempts.map(\.status) == [429, 200])
        #expect(attempts[1].at.timeIntervalSince(attempts[0].at) >= 1.0, "Retry-After: 1 is honoured")
        await f.stop()
    }

    @Test func thirtySendsCostOneTokenRequest() async throws {
        let f = try await EmulatorFixture.start()
        for i in 0..<30 { try await f.register("u\(i)", "tok-\(i)") }
        _ = try await f.send(NotificationSubmission(type: "generic", title: "all", userIDs: (0..<30).map { "u\($0)" }))
        try await f.deliverAll()
        #expect(f.emulator.deliveredMessages.count == 30)
        #expect(f.emulator.tokenRequests == 1)
        #expect(await f.sink.tokenRequests == 1)
        #expect(f.emulator.received.allSatisfy { $0.httpVersion == "1.1" }, "a plain http endpoint is spoken to over HTTP/1.1")
        await f.stop()
    }

    /// Over `https` the sink speaks HTTP/2, as Google's own clients do: concurrent sends are
    /// streams of one TLS connection, and FCM's answers are classified as over HTTP/1.1.
    @Test func anHTTPSEndpointGetsConcurrentSendsAsHTTP2StreamsOfOneConnection() async throws {
        // TLS on both ends with the full suite beside it: a token request or a send can take
        // seconds, which is not what this test is about.
        let f = try await EmulatorFixture.start(tls: true, maxConcurrency: 64, requestTimeout: .seconds(30))
        #expect(f.emulator.baseURL.hasPrefix("https://"))
        for i in 0..<200 { try await f.register("h\(i)", "h2-\(i)") }
        try await f.register("h0", "dead-h2")
        _ = try await f.send(NotificationSubmission(type: "generic", title: "multiplexed", userIDs: (0..<200).map { "h\($0)" }))
        try await f.deliverAll()
        #expect(f.emulator.deliveredMessages.count == 200)
        #expect(f.emulator.received.count == 201)
        #expect(f.emulator.received.allSatisfy { $0.httpVersion == "2" }, "every send came over HTTP/2")
        #expect(f.emulator.sendConnections == 1, "one connection carried them all")
        #expect(f.emulator.tokenRequests == 1)
        #expect(try await f.store.devices(userID: "h0").map(\.token) == ["h2-0"], "an UNREGISTERED answer over HTTP/2 still removes the token")
        await f.stop()
    }

    /// FCM allows 100 concurrent streams per HTTP/2 connection (so does the emulator): on one
    /// connection a `max_concurrency` of 120 would keep at most 100 sends in flight. By default
    /// the sink opens one connection per 100 of it, and the sends really are concurrent: the
    /// emulator holds every send until 101 are in flight at once (30 s at most, when they never
    /// are), so the test does not depend on how fast a loaded machine sends.
    @Test func aConcurrencyAboveOneConnectionsStreamLimitGetsMoreConnections() async throws {
        let f = try await EmulatorFixture.start(
            tls: true, maxConcurrency: 120, requestTimeout: .seconds(60), slowLatency: .seconds(30), releaseSlowSendsAt: 101, batchSize: 1_000)
        for i in 0..<120 { try await f.register("s\(i)", "slow-\(i)") }
        _ = try await f.send(NotificationSubmission(type: "generic", title: "wide", userIDs: (0..<120).map { "s\($0)" }))
        // Slow answers, and the full suite's load beside them: time enough for every send. One
        // engine batch holds all 120 pushes (and their history), so the sink has them at once.
        try await f.deliverAll(timeout: .seconds(90))
        #expect(f.emulator.deliveredMessages.count == 120)
        #expect(f.emulator.received.allSatisfy { $0.httpVersion == "2" })
        #expect(f.emulator.sendConnections == 2, "one connection per 100 of max_concurrency")
        #expect(f.emulator.peakSendsInFlight > 100, "more sends in flight than one connection's streams: \(f.emulator.peakSendsInFlight)")
        #expect(f.emulator.tokenRequests == 1, "the connections share one access token")
        await f.stop()
    }

    /// `connections: 1` is one connection, and the stream limit is why the default is more: held
    /// as above, never more than 100 sends are in flight (each then waits its 5 s).
    @Test func oneConnectionHoldsSendsToTheServersStreamLimit() async throws {
        let f = try await EmulatorFixture.start(
            tls: true, maxConcurrency: 120, connections: 1, requestTimeout: .seconds(60), slowLatency: .seconds(5), releaseSlowSendsAt: 101, batchSize: 1_000)
        for i in 0..<120 { try await f.register("s\(i)", "slow-\(i)") }
        _ = try await f.send(NotificationSubmission(type: "generic", title: "narrow", userIDs: (0..<120).map { "s\($0)" }))
        try await f.deliverAll(timeout: .seconds(90))
        #expect(f.emulator.deliveredMessages.count == 120)
        #expect(f.emulator.sendConnections == 1)
        #expect(f.emulator.peakSendsInFlight <= 100, "\(f.emulator.peakSendsInFlight)")
        #expect(f.emulator.peakSendsInFlight > 50, "still many streams at once: \(f.emulator.peakSendsInFlight)")
        await f.stop()
    }

    /// Trusting the emulator's certificate is explicit: without `caFile` the TLS handshake fails,
    /// nothing reaches it (not even the token request) and the delivery stays pending.
    @Test func anUntrustedCertificateIsRefused() async throws {
        // The client retries a failed handshake until the request's deadline, and reports the
        // handshake's error only if one failed before it: under the full suite's load a 500 ms
        // deadline sometimes passed first, and the error was a bare timeout.
        let f = try await EmulatorFixture.start(backoff: .seconds(60), tls: true, trustCertificate: false, requestTimeout: .seconds(2))
        try await f.register("ivy", "tok-i")
        let id = try await f.send(NotificationSubmission(type: "comment", title: "no trust", userIDs: ["ivy"]))
        try await f.engine.drain()
        #expect(f.emulator.received.isEmpty)
        #expect(f.emulator.tokenRequests == 0)
        let delivery = try #require(try await f.store.status(of: id)?.deliveries.first { $0.sink == "fcm" })
        #expect(delivery.state == .pending, "a TLS failure is retried, not a verdict on the token")
        #expect(delivery.lastError?.contains("CERTIFICATE_VERIFY_FAILED") == true, "\(delivery.lastError ?? "")")
        await f.stop()
    }

    @Test func anExpiredAccessTokenIsRefreshed() async throws {
        // Tokens that live 2 s are refreshed halfway through; the sink's clock moves by hand.
        let clock = ManualClock()
        let f = try await EmulatorFixture.start(tokenLifetime: 2, clock: { clock.date })
        try await f.register("gus", "tok-g")
        _ = try await f.send(NotificationSubmission(type: "generic", title: "one", userIDs: ["gus"]))
        try await f.deliverAll()
        clock.advance(0.9)
        _ = try await f.send(NotificationSubmission(type: "generic", title: "two", userIDs: ["gus"]))
        try await f.deliverAll()
        #expect(f.emulator.tokenRequests == 1, "before the halfway mark the cached token serves")
        clock.advance(0.2)
        _ = try await f.send(NotificationSubmission(type: "generic", title: "three", userIDs: ["gus"]))
        try await f.deliverAll()
        #expect(f.messages(to: "tok-g").count == 3)
        #expect(f.emulator.tokenRequests == 2)
        await f.stop()
    }

    @Test func aFailedEarlyRefreshKeepsUsingTheStillValidToken() async throws {
        // Refreshed after 5 s, expires after 10 s; the sink's clock moves by hand.
        let clock = ManualClock()
        let f = try await EmulatorFixture.start(tokenLifetime: 10, clock: { clock.date })
        try await f.register("kim", "tok-k")
        _ = try await f.send(NotificationSubmission(type: "generic", title: "one", userIDs: ["kim"]))
        try await f.deliverAll()
        clock.advance(5.1)
        f.emulator.setTokenEndpointDown(true)
        _ = try await f.send(NotificationSubmission(type: "generic", title: "two", userIDs: ["kim"]))
        try await f.engine.drain()
        #expect(f.messages(to: "tok-k").count == 2, "sent with the old, still valid token")
        #expect(f.emulator.tokenRequests == 2, "the refresh was attempted")
        clock.advance(5)
        _ = try await f.send(NotificationSubmission(type: "generic", title: "three", userIDs: ["kim"]))
        try await f.engine.drain()
        #expect(f.messages(to: "tok-k").count == 2, "past its expiry the old token is not used")
        await f.stop()
    }

    @Test func senderMismatchOnEveryTokenKeepsTheDevices() async throws {
        let f = try await EmulatorFixture.start(backoff: .seconds(60))
        try await f.register("hal", "mismatch-1")
        try await f.register("hal", "mismatch-2")
        let id = try await f.send(NotificationSubmission(type: "generic", title: "x", userIDs: ["hal"]))
        try await f.engine.drain()
        #expect(try await f.store.devices(userID: "hal").count == 2, "wrong credentials do not wipe the device table")
        let pushes = try #require(try await f.store.status(of: id)?.deliveries.filter { $0.sink == "fcm" })
        #expect(pushes.allSatisfy { $0.state == .pending && $0.lastError?.contains("check the credentials of sink 'fcm'") == true })
        #expect(await f.sink.health().reason?.contains("SENDER_ID_MISMATCH") == true, "the sink reports itself degraded")
        await f.stop()
    }

    /// With light traffic every batch holds one delivery: a mismatch must not delete a device
    /// until the same credentials have delivered to another token.
    @Test func aLoneMismatchKeepsTheDeviceUntilTheCredentialsAreProven() async throws {
        let f = try await EmulatorFixture.start(backoff: .seconds(60))
        try await f.register("ivy", "mismatch-solo")
        let first = try await f.send(NotificationSubmission(type: "generic", title: "x", userIDs: ["ivy"]))
        try await f.engine.drain()
        #expect(try await f.store.devices(userID: "ivy").count == 1, "unproven credentials: the device stays")
        #expect(try await f.store.status(of: first)?.deliveries.first { $0.sink == "fcm" }?.state == .pending)
        #expect(await f.sink.health() != .ok)
        // The same credentials deliver to another token: now a mismatch is the token's fault.
        try await f.register("joe", "good-joe")
        _ = try await f.send(NotificationSubmission(type: "generic", title: "y", userIDs: ["joe"]))
        try await f.engine.drain()
        #expect(await f.sink.health() == .ok, "a success clears the degraded state")
        _ = try await f.send(NotificationSubmission(type: "generic", title: "z", userIDs: ["ivy"]))
        try await f.engine.drain()
        #expect(try await f.store.devices(userID: "ivy").isEmpty, "proven credentials: the mismatched token is removed")
        await f.stop()
    }

    @Test func settingsAreRespected() async throws {
        let f = try await EmulatorFixture.start()
        try await f.register("muted", "tok-muted")
        try await f.register("picky", "tok-picky")
        _ = try await f.store.updateSettings(userID: "muted") { $0.enabled = false }
        _ = try await f.store.updateSettings(userID: "picky") { $0.types["hot"] = false }
        _ = try await f.send(NotificationSubmission(type: "hot", title: "hot", userIDs: ["muted", "picky"]))
        _ = try await f.send(NotificationSubmission(type: "comment", title: "comment", userIDs: ["muted", "picky"]))
        try await f.deliverAll()
        #expect(f.messages(to: "tok-muted").isEmpty, "push disabled")
        #expect(f.messages(to: "tok-picky").compactMap { ($0["data"] as? [String: String])?["type"] } == ["comment"], "hot opted out")
        #expect(try await f.store.history(userID: "muted", limit: 10, before: nil).items.count == 2, "history is never suppressed")
        await f.stop()
    }

    /// The sink writes its request bodies by hand; FCM reads them as JSON. Any message, every
    /// optional part present or absent and any text in it, decodes back to itself.
    @Test func handWrittenRequestBodiesDecodeToTheMessageSent() throws {
        let alphabet: [String] = ["a", "\u{0}", "\u{1f}", "\"", "\\", "/", "é", "🙂", "\n", " ", "<", "\u{2028}"]
        var generator = SystemRandomNumberGenerator()
        func text() -> String { (0..<Int.random(in: 0...20, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" }.joined() }
        func maybe<T>(_ make: () -> T) -> T? { Bool.random(using: &generator) ? make() : nil }
        func map() -> [String: String] {
            var map: [String: String] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &generator) { map[text()] = text() }
            return map
        }
        for _ in 0..<300 {
            let content = maybe { FCMMessage.Notification(title: text(), body: text()) }
            let message = FCMMessage(
                token: maybe(text), topic: maybe(text), notification: content, data: maybe(map),
                android: maybe {
                    FCMMessage.Android(
                        priority: text(), collapseKey: maybe(text),
                        notification: maybe { .init(sound: maybe(text), notificationCount: maybe { Int.random(in: 0...Int.max) }) })
                },
                apns: maybe {
                    FCMMessage.APNs(
                        headers: maybe(map),
                        payload: .init(
                            aps: .init(
                                alert: maybe { .init(title: text(), body: text()) }, sound: maybe(text), contentAvailable: maybe { Int.random(in: 0...1) },
                                badge: maybe { Int.random(in: 0...Int.max) })))
                }
            )
            let request = FCMSendRequest(message: message, validateOnly: maybe { Bool.random() })
            #expect(try JSONDecoder().decode(FCMSendRequest.self, from: request.json) == request, "\(String(decoding: request.json, as: UTF8.self))")
        }
    }

    /// The size check skips encoding only when a bound from the lengths allows it: the bound is
    /// never below the encoded size, whatever the text (escaped controls, quotes, slashes,
    /// non-ASCII), and a payload just over the limit is still refused with its exact size.
    @Test func theCheapSizeBoundIsNeverBelowTheEncodedSize() throws {
        let alphabet: [String] = ["a", "\u{0}", "\u{1f}", "\"", "\\", "/", "é", "🙂", "\n", " ", "<", "\u{2028}"]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<300 {
            func text() -> String { (0..<Int.random(in: 0...40, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" }.joined() }
            var data: [String: String] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &generator) { data[text()] = text() }
            let message = FCMMessage(
                token: "t", notification: round.isMultiple(of: 3) ? nil : .init(title: text(), body: text()), data: data.isEmpty ? nil : data
            )
            #expect(FCMMessageBuilder.payloadUpperBound(message) >= FCMMessageBuilder.payloadSize(message), "\(message)")
        }
        let edge = FCMMessage(token: "t", notification: .init(title: "t", body: String(repeating: "\u{1}", count: 700)), data: nil)
        let size = FCMMessageBuilder.payloadSize(edge)
        #expect(size > FCMMessageBuilder.tokenPayloadLimit, "700 control characters escape to 4200 bytes")
        #expect(FCMMessageBuilder.payloadSize(edge, ifOver: FCMMessageBuilder.tokenPayloadLimit) == size)
        let small = FCMMessage(token: "t", notification: .init(title: "t", body: "b"), data: ["k": "v"])
        #expect(FCMMessageBuilder.payloadSize(small, ifOver: FCMMessageBuilder.tokenPayloadLimit) == nil)
    }

    @Test func payloadOverTheLimitIsRefusedBeforeAnythingIsStored() async throws {
        let f = try await EmulatorFixture.start()
        let big = String(repeating: "x", count: 4000)
        await #expect {
            _ = try await f.send(NotificationSubmission(type: "generic", title: "t", body: big, userIDs: ["ivy"]))
        } throws: { ($0 as? HeraldError)?.code == "payload_too_large_for_fcm" }
        await #expect {
            _ = try await f.send(NotificationSubmission(type: "generic", title: "t", data: ["google.sent_time": "1"], userIDs: ["ivy"]))
        } throws: { ($0 as? HeraldError)?.message.contains("reserved") == true }
        await #expect {
            _ = try await f.send(NotificationSubmission(type: "generic", title: "t", data: ["id": "mine"], userIDs: ["ivy"]))
        } throws: { ($0 as? HeraldError)?.message.contains("data.id") == true }
        #expect(try await f.store.history(userID: "ivy", limit: 10, before: nil).items.isEmpty)
        await f.stop()
    }

    @Test func topicSendsHaveTwoComponentsForAlertsAndOneForInformation() async throws {
        let f = try await EmulatorFixture.start()
        let alert = FCMTopicMessage(
            msiKey: "m1", topicKey: "c-a-s", distribution: .alert, title: "Storm", desc: "Stay in", message: "Details", timestamp: 1_700_000_000_000)
        #expect(await f.sink.sendToTopic(alert) == [.delivered, .delivered])
        let info = FCMTopicMessage(
            msiKey: "m2", topicKey: "c-a-s", distribution: .information, title: "FYI", desc: "", message: "More", timestamp: 1_700_000_000_001)
        #expect(await f.sink.sendToTopic(info) == [.delivered])
        let sent = f.emulator.deliveredMessages.filter { $0["topic"] as? String == "c-a-s" }
        #expect(sent.count == 3)
        #expect((sent[0]["notification"] as? [String: String]) == ["title": "Storm", "body": "Stay in"])
        #expect((sent[0]["data"] as? [String: String]) == ["msi_key": "m1"])
        // The alert alerts: high priority and the default sound on Android and on iOS.
        let android = sent[0]["android"] as? [String: Any]
        #expect(android?["priority"] as? String == "HIGH")
        #expect((android?["notification"] as? [String: String]) == ["sound": "default"])
        let visibleAPNs = sent[0]["apns"] as? [String: Any]
        #expect((visibleAPNs?["headers"] as? [String: String])?["apns-priority"] == "10")
        let visibleAPS = (visibleAPNs?["payload"] as? [String: Any])?["aps"] as? [String: Any]
        #expect(visibleAPS?["sound"] as? String == "default")
        #expect((visibleAPS?["alert"] as? [String: String]) == ["title": "Storm", "body": "Stay in"])
        #expect(sent[1]["notification"] == nil)
        #expect((sent[1]["android"] as? [String: Any])?["priority"] as? String == "high", "the data component stays high priority")
        #expect(
            (sent[1]["data"] as? [String: String]) == [
                "msi_key": "m1", "topic_key": "c-a-s", "dist": "Alert", "title": "Storm", "desc": "Stay in", "message": "Details", "timestamp": "1700000000000",
            ])
        #expect((sent[2]["data"] as? [String: String])?["dist"] == "Information")
        let aps = ((sent[2]["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any]
        #expect(aps?["content-available"] as? Int == 1)
        #expect(throws: HeraldError.self) {
            try FCMMessageBuilder.validate(
                FCMTopicMessage(
                    msiKey: "m", topicKey: "c-a-s", distribution: .alert, title: "t", desc: "d", message: String(repeating: "m", count: 2100), timestamp: 0))
        }
        await f.stop()
    }
}

@Suite(.cleansUp) struct MessageHubThroughFCMTests {
    @Test func alertIsTwoTopicMessagesInformationOneAndSubscribersGetHistory() async throws {
        let f = try await EmulatorFixture.start()
        let ids = ObjectIDGenerator()
        let channel = Channel(id: ids.next(), name: "Campus", desc: "")
        let area = Area(id: ids.next(), name: "Safety", desc: "")
        try await SharedTopicStore(database: f.store).createChannel(channel)
        _ = try await SharedTopicStore(database: f.store).createArea(area, channelID: channel.id)
        func subject(_ name: String, _ distribution: TopicDistribution) async throws -> String {
            let id = ids.next()
            let key = TopicKey(channelID: channel.id, areaID: area.id, subjectID: id).description
            _ = try await SharedTopicStore(database: f.store).createSubject(
                Subject(id: id, name: name, desc: "", topicKey: key, opt: .init(level: .optIn, distribution: distribution)), channelID: channel.id,
                areaID: area.id)
            return key
        }
        let alerts = try await subject("Alerts", .alert)
        let infos = try await subject("Infos", .information)
        try await f.store.subscribe(userID: "sub", topicKey: alerts, at: Date())

        let alert = try await f.service.postMessage(
            MessageSubmission(title: "Storm", desc: "Stay inside", message: "Until 18:00", topicKey: alerts, distribution: "Alert"), sender: "comms"
        )
        _ = try await f.service.postMessage(
            MessageSubmission(title: "FYI", desc: "", message: "Library open", topicKey: infos, distribution: "Information"), sender: "comms")
        try await f.deliverAll()

        let toAlerts = f.emulator.deliveredMessages.filter { $0["topic"] as? String == alerts }
        #expect(toAlerts.count == 2)
        let visible = try #require(toAlerts.first { $0["notification"] != nil })
        #expect((visible["notification"] as? [String: String]) == ["title": "Storm", "body": "Stay inside"])
        #expect((visible["data"] as? [String: String]) == ["msi_key": alert.msiKey])
        let data = try #require(toAlerts.first { $0["notification"] == nil })
        #expect(
            (data["data"] as? [String: String]) == [
                "msi_key": alert.msiKey, "topic_key": alerts, "dist": "Alert", "title": "Storm", "desc": "Stay inside",
                "message": "Until 18:00", "timestamp": String(alert.timestamp),
            ])
        let toInfos = f.emulator.deliveredMessages.filter { $0["topic"] as? String == infos }
        #expect(toInfos.count == 1)
        #expect(toInfos.first?["notification"] == nil)
        #expect((toInfos.first?["data"] as? [String: String])?["dist"] == "Information")

        let history = try await f.store.history(userID: "sub", limit: 10, before: nil)
        #expect(history.items.map(\.title) == ["Storm"])
        #expect(history.items.first?.notificationID.hex == alert.msiKey)
        await f.stop()
    }
}

@Suite(.cleansUp) struct FCMResultTests {
    func body(_ status: String, _ errorCode: String?, badRequest: Bool = false) -> Data {
        var details: [[String: Any]] = []
        if let errorCode { details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]) }
        if badRequest { details.append(["@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [["field": "message.data"]]]) }
        return try! JSONSerialization.data(withJSONObject: ["error": ["code": 400, "message": "m", "status": status, "details": details]])
    }

    @Test func classifiesByStatusAndErrorCode() {
        #expect(FCMResult.classify(status: 200, body: Data(), retryAfter: nil) == .sent)
        guard case .unregistered = FCMResult.classify(status: 404, body: body("NOT_FOUND", "UNREGISTERED"), retryAfter: nil) else {
            Issue.record("404 UNREGISTERED")
            return
        }
        // The status can read NOT_FOUND or INVALID_ARGUMENT while the errorCode says UNREGISTERED.
        guard case .unregistered = FCMResult.classify(status: 400, body: body("INVALID_ARGUMENT", "UNREGISTERED"), retryAfter: nil) else {
            Issue.record("400 UNREGISTERED")
            return
        }
        guard case .senderMismatch = FCMResult.classify(status: 403, body: body("PERMISSION_DENIED", "SENDER_ID_MISMATCH"), retryAfter: nil) else {
            Issue.record("403")
            return
        }
        guard case .unregistered = FCMResult.classify(status: 400, body: body("INVALID_ARGUMENT", "INVALID_ARGUMENT"), retryAfter: nil) else {
            Issue.record("bad token")
            return
        }
        guard case .payloadFault = FCMResult.classify(status: 400, body: body("INVALID_ARGUMENT", "INVALID_ARGUMENT", badRequest: true), retryAfter: nil) else {
            Issue.record("payload")
            return
        }
        guard case .transient(let after, _) = FCMResult.classify(status: 429, body: body("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), retryAfter: "7") else {
            Issue.record("429")
            return
        }
        #expect(after == .seconds(7))
        guard case .transient(nil, _) = FCMResult.classify(status: 503, body: body("UNAVAILABLE", "UNAVAILABLE"), retryAfter: nil) else {
            Issue.record("503")
            return
        }
        guard case .transient = FCMResult.classify(status: 500, body: Data("oops".utf8), retryAfter: nil) else {
            Issue.record("500")
            return
        }
        guard case .unauthorized = FCMResult.classify(status: 401, body: body("UNAUTHENTICATED", nil), retryAfter: nil) else {
            Issue.record("401")
            return
        }
        guard case .refused(let text) = FCMResult.classify(status: 404, body: body("NOT_FOUND", nil), retryAfter: nil) else {
            Issue.record("other 4xx")
            return
        }
        #expect(text.contains("FCM 404"))
    }

    @Test func retryAfterInSecondsOrAsAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 1_445_412_470) // Wed, 21 Oct 2015 07:27:50 GMT
        #expect(RetryAfter.parse("120", now: now) == .seconds(120))
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:28:00 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:00:00 GMT", now: now) == .zero, "a date in the past means now")
        #expect(RetryAfter.parse("soon", now: now) == nil)
        // The obsolete forms a recipient must accept (RFC 9110 §5.6.7), and a two-digit year.
        #expect(RetryAfter.parse("Wednesday, 21-Oct-15 07:28:00 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.parse("Wed Oct 21 07:28:00 2015", now: now) == .seconds(10))
        #expect(RetryAfter.parse("Thu Oct  1 07:28:00 2015", now: now) == .zero)
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == .zero)
        #expect(RetryAfter.parse("Thu, 01 Jan 2099 00:00:00 GMT", now: now) == .seconds(4_070_908_800 - 1_445_412_470))
        #expect(RetryAfter.parse("Sun, 29 Feb 2032 00:00:00 GMT", now: now) == .seconds(1_961_625_600 - 1_445_412_470), "a leap day")
        // Garbage is ignored, never a trap: impossible dates, wrong zones, huge numbers, lone words.
        for bad in [
            "Wed, 31 Feb 2015 07:28:00 GMT", "Wed, 21 Oct 2015 24:00:00 GMT", "Wed, 21 Oct 2015 07:28:00 PST", "Wed, 21 Foo 2015 07:28:00 GMT",
            "Wed, 21 Oct 99999999999999999999 07:28:00 GMT", "Wed, 21 Oct 2015 07:28 GMT", "Wed Oct 21 07:28:00", ", , , , , GMT", "GMT",
            "Wed, 21 Oct 2015 07:28:0x GMT", "Wednesday, 21-Oct-2015 07:28:00 GMT",
        ] {
            #expect(RetryAfter.parse(bad, now: now) == nil, "\(bad)")
        }
    }

    /// FCM's dry run: `validate_only` is sent, the emulator validates without delivering.
    @Test func dryRunAsksFCMToValidateWithoutSending() async throws {
        let f = try await EmulatorFixture.start()
        let now = Date()
        let device = Device(
            id: ObjectIDGenerator().next(), userID: "u", address: DeviceAddress(provider: "fcm", token: "dry-1"), createdAt: now, updatedAt: now)
        let good = HeraldNotification(id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, timestamp: now, target: .users(["u"]))
        var reserved = good
        reserved.data = ["from": "x"]
        let deliveries = [good, reserved].enumerated().map { index, notification in
            Delivery(id: Int64(index), sink: "fcm", notification: notification, recipient: .init(userID: "u", device: device), distribution: .alert, attempt: 1)
        }
        let results = await f.sink.dryRun(deliveries)
        #expect(results.first == .valid)
        guard case .invalid = results.last else {
            Issue.record("a message FCM refuses is invalid: \(results)")
            await f.stop()
            return
        }
        #expect(f.emulator.received.count == 2 && f.emulator.received.allSatisfy(\.validateOnly), "both were sent with validate_only")
        #expect(f.emulator.deliveredMessages.isEmpty, "nothing was delivered")
        await f.stop()
    }

    /// The router hands the FCM sink FCM devices only; a registration that is not a token is refused.
    @Test func servesFCMDevicesOnly() async throws {
        let f = try await EmulatorFixture.start()
        #expect(f.sink.providers == .only(["fcm"]))
        var object = DeviceRegistration(address: DeviceAddress(provider: "fcm", value: .object(["token": .string("x")]), key: ""), addressField: "address")
        #expect(throws: HeraldError.self) { try f.sink.prepare(&object) }
        await f.stop()
    }

    /// FCM answering 503 UNAVAILABLE to the first two attempts of every message (a provider
    /// under load) must slow delivery down, never stop it: each message waits its own backoff
    /// and goes through on its third try, and the circuit never opens. The old rule (five
    /// failures in a row) opened it, and every probe, a message's first attempt, failed and
    /// reopened it: nothing was delivered for minutes.
    @Test func aProviderFailingEveryMessageTwiceDeliversEverything() async throws {
        let f = try await EmulatorFixture.start(maxAttempts: 5, backoff: .milliseconds(50), failFirst: 2)
        for user in 0..<20 { try await f.register("u\(user)", "tok-\(user)") }
        var ids: [ObjectID] = []
        for n in 0..<15 {
            ids.append(try await f.send(NotificationSubmission(type: "generic", title: "n\(n)", body: "b", userIDs: (0..<20).map { "u\($0)" })))
        }
        try await f.deliverAll(timeout: .seconds(120))
        let states = try await DeliveryTally.states(of: ids, sink: f.sink.name, in: f.store)
        #expect(states == [.delivered: 300], "\(states)")
        #expect(f.engine.circuits.state(of: f.sink.name).timesOpened == 0, "a provider that takes every message on its third try is not down")
        #expect(f.emulator.received.filter { $0.status == 503 }.count == 600)
        await f.stop()
    }
}
