import Foundation
import HTTPTypes
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldWebhookSink
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

@Suite(.cleansUp) struct WebhookSinkTests {
    static let secret = "whsec_" + Data("a very secret key for tests".utf8).base64EncodedString()

    func delivery(id: Int64 = 1, type: String = "violation") -> Delivery {
        let n = HeraldNotification(
            id: ObjectIDGenerator().next(), type: type, title: "Flagged", body: "post 9", url: "https://pong.example/posts/9",
            data: ["reason": "spam"], timestamp: Date(), distribution: .alert, target: .users(["u1"])
        )
        return Delivery(id: id, sink: "webhook:moderation", notification: n, recipient: .init(userID: "u1"), distribution: .alert, attempt: 1)
    }

    /// A sink with its own HTTP client, as Herald makes it, closed when the test ends.
    func sink(_ receiver: Receiver) -> WebhookSink {
        released(WebhookSink(configuration: .init(name: "moderation", url: receiver.url, secret: Self.secret)))
    }

    func released<Sink: ReleasingSink>(_ sink: Sink) -> Sink {
        TestResources.register { await sink.shutdown() }
        return sink
    }

    /// With `forward_events`, engagement events go out signed, `type: engagement.event`, with an
    /// id derived from the user and the app's event id (a repeat has the same id).
    @Test func forwardsEngagementEventsWhenConfigured() async throws {
        let receiver = Receiver()
        try await receiver.start()
        let settings = SinkSettings(name: "analytics", values: ["url": receiver.url, "secret": Self.secret, "forward_events": "true"])
        let context = SinkContext(
            name: "analytics", settings: settings, store: try SQLiteStore(path: ":memory:"), feed: FeedSnapshot(), logger: Logger(label: "t"),
            metrics: HeraldMetrics()
        )
        let sink = try await SinkFactory.webhook.makeSink(context)
        if let releasing = sink as? any ReleasingSink { TestResources.register { await releasing.shutdown() } }
        #expect(sink.name == "webhook:analytics" && sink.capabilities.contains(.events))
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let event = EngagementEvent(
            eventID: "e-1", userID: "u1", type: "reaction", reaction: "ctfo", card: "card42", properties: ["screen": .string("feed")], at: at)
        #expect(await sink.deliverEvents([event, event]) == [.delivered, .delivered])
        #expect(receiver.received.count == 2)
        let ids = receiver.received.compactMap { $0.headers["webhook-id"] }
        #expect(ids.count == 2 && ids[0] == ids[1] && ids[0].hasPrefix("evt_"), "a repeat carries the same id")
        let first = try #require(receiver.received.first)
        let body = try #require(try JSONSerialization.jsonObject(with: first.body) as? [String: Any])
        #expect(body["type"] as? String == "engagement.event")
        let data = try #require(body["data"] as? [String: Any])
        #expect(data["event_id"] as? String == "e-1" && data["reaction"] as? String == "ctfo" && data["card"] as? String == "card42")
        #expect((data["properties"] as? [String: String]) == ["screen": "feed"])

        let quiet = try await SinkFactory.webhook.makeSink(
            SinkContext(
                name: "plain", settings: SinkSettings(name: "plain", values: ["url": receiver.url, "secret": Self.secret]),
                store: try SQLiteStore(path: ":memory:"), feed: FeedSnapshot(), logger: Logger(label: "t"), metrics: HeraldMetrics()
            )
        )
        if let releasing = quiet as? any ReleasingSink { TestResources.register { await releasing.shutdown() } }
        #expect(!quiet.capabilities.contains(.events))
        guard case .failed = await quiet.deliverEvents([event]).first else {
            Issue.record("a webhook without forward_events refuses events")
            return
        }
        #expect(receiver.received.count == 2)
        await receiver.stop()
    }

    @Test func postsSignedJSONThatIndependentVerifiersAccept() async throws {
        let receiver = Receiver()
        try await receiver.start()
        let sink = sink(receiver)
        #expect(sink.name == "webhook:moderation")
        let d = delivery()
        #expect(await sink.deliver([d]) == [.delivered])
        let hit = try #require(receiver.received.first)
        #expect(hit.headers["content-type"] == "application/json")
        let id = try #require(hit.headers["webhook-id"])
        let timestamp = try #require(hit.headers["webhook-timestamp"])
        let signature = try #require(hit.headers["webhook-signature"])
        #expect(id == "msg_\(d.notification.id.hex)_1")
        #expect(abs(Double(timestamp)! - Date().timeIntervalSince1970) < 60)
        #expect(signature.hasPrefix("v1,"))

        let body = try #require(try JSONSerialization.jsonObject(with: hit.body) as? [String: Any])
        #expect(body["type"] as? String == "notification.delivery")
        let data = try #require(body["data"] as? [String: Any])
        #expect((data["recipient"] as? [String: String]) == ["user_id": "u1"])
        let notification = try #require(data["notification"] as? [String: Any])
        #expect(notification["id"] as? String == d.notification.id.hex)
        #expect((notification["data"] as? [String: String]) == ["reason": "spam"])

        // Independent implementations: the verification code shipped in docs/webhooks.
        let bodyFile = try TestResources.temporaryDirectory("webhook-body").appendingPathComponent("body.json")
        try hit.body.write(to: bodyFile)
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "docs/webhooks")
        var verifiers = [("/usr/bin/env", ["python3", docs.appendingPathComponent("verify.py").path])]
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/node") || FileManager.default.isExecutableFile(atPath: "/usr/local/bin/node") {
            verifiers.append(("/usr/bin/env", ["node", docs.appendingPathComponent("verify.mjs").path]))
        }
        for (executable, command) in verifiers {
            #expect(try await run(executable, command + [Self.secret, id, timestamp, signature, bodyFile.path]) == 0, "\(command[0]) accepts the signature")
            #expect(
                try await run(executable, command + [Self.secret, id, timestamp, "v1,AAAA" + signature.dropFirst(7), bodyFile.path]) != 0,
                "\(command[0]) rejects a forged signature")
            #expect(
                try await run(
                    executable, command + ["whsec_" + Data("another key entirely".utf8).base64EncodedString(), id, timestamp, signature, bodyFile.path])
                    != 0, "\(command[0]) rejects another secret")
        }
        await receiver.stop()
    }

    @Test func retriesOnServerErrorsHonouringRetryAfterAndFailsOnOther4xx() async throws {
        let receiver = Receiver()
        try await receiver.start()
        receiver.answer(503)
        receiver.answer(429, headers: ["Retry-After": "7"])
        receiver.answer(400)
        let outcomes =
            await sink(receiver).deliver([delivery(id: 1)])
            + (await sink(receiver).deliver([delivery(id: 2)]))
            + (await sink(receiver).deliver([delivery(id: 3)]))
        guard case .retry(nil, let first, _) = outcomes[0], case .retry(let after, _, _) = outcomes[1], case .failed(let reason, _) = outcomes[2] else {
            Issue.record("unexpected outcomes \(outcomes)")
            return
        }
        #expect(first.contains("503"))
        #expect(after == .seconds(7))
        #expect(reason.contains("400"))
        await receiver.stop()
    }

    /// 410 Gone is the endpoint's fault, not the delivery's: it is retried (the engine's circuit
    /// breaker stops sending to a sink that keeps failing), and nothing is disabled for good.
    @Test func goneIsRetriedNotFatal() async throws {
        let receiver = Receiver()
        try await receiver.start()
        let sink = sink(receiver)
        receiver.answer(410)
        let first = await sink.deliver([delivery(id: 1)])
        guard case .retry(_, let reason, _) = first.first else {
            Issue.record("\(first)")
            return
        }
        #expect(reason.contains("410"))
        #expect(await sink.deliver([delivery(id: 2)]) == [.delivered], "once the endpoint is back, deliveries go through")
        #expect(receiver.received.count == 2)
        await receiver.stop()
    }

    /// A redirect is not followed: a 307/308 would re-send the signed delivery wherever it
    /// points, and a 301/302 would turn it into a GET whose 200 counted as delivered. The URL is
    /// stale, which only the operator can fix, so the delivery waits (retried, the circuit
    /// breaker probing) and the reason says where the endpoint claims to have gone.
    @Test(arguments: [301, 302, 303, 307, 308])
    func redirectsAreNotFollowedAndTheDeliveryWaits(_ status: Int) async throws {
        let receiver = Receiver()
        try await receiver.start()
        let sink = sink(receiver)
        receiver.answer(status, headers: ["Location": "/hook?moved=1"])
        let outcome = await sink.deliver([delivery(id: 1)])
        guard case .retry(_, let reason, _) = outcome.first else {
            Issue.record("\(status): \(outcome)")
            await receiver.stop()
            return
        }
        #expect(reason.contains("\(status)") && reason.contains("redirects are not followed"), "\(reason)")
        #expect(reason.contains("to http://127.0.0.1:\(receiver.port.withLock { $0 } ?? 0)/hook?…"), "the target, its query hidden: \(reason)")
        #expect(receiver.received.count == 1, "the redirect was not followed")
        #expect(await sink.deliver([delivery(id: 2)]) == [.delivered], "once the endpoint answers 2xx again, deliveries go through")
        await receiver.stop()
    }

    /// The status is the answer: a receiver that answers 200 with a long page (a framework's
    /// default HTML, an echo of the payload) received the delivery, which is not retried and
    /// sent again; a long error page still reads as its status.
    @Test func aLongAnswerBodyDoesNotTurnA2xxIntoARetry() async throws {
        let receiver = Receiver()
        try await receiver.start()
        let sink = sink(receiver)
        let page = String(repeating: "<p>thanks</p>", count: 20_000)
        receiver.answer(200, body: page)
        receiver.answer(400, body: page)
        #expect(await sink.deliver([delivery(id: 1)]) == [.delivered])
        guard case .failed(let reason, _) = (await sink.deliver([delivery(id: 2)])).first else {
            Issue.record("a long 400 page is still a 400")
            await receiver.stop()
            return
        }
        #expect(reason.contains("400") && !reason.contains("thanks"), "\(reason)")
        #expect(receiver.received.count == 2)
        #expect(await sink.deliver([delivery(id: 3)]) == [.delivered], "and the client still works")
        await receiver.stop()
    }

    @Test func unreachableEndpointIsRetried() async throws {
        var configuration = WebhookSink.Configuration(name: "down", url: "http://127.0.0.1:1/hook", secret: Self.secret)
        configuration.timeout = .milliseconds(500)
        let sink = released(WebhookSink(configuration: configuration))
        guard case .retry = (await sink.deliver([delivery()])).first else {
            Issue.record("expected a retry")
            return
        }
    }

    private func run(_ executable: String, _ arguments: [String]) async throws -> Int32 {
        let process = SpawnedProcess(executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment)
        try process.run()
        return await process.waitForExit()
    }
}
