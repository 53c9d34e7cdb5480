import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import Testing

@testable import HeraldKit

/// HeraldKit against the real `herald` binary over loopback (docs/heraldkit.md): each item of
/// the device half, including offline work that arrives once after the server comes back.
@Suite(.serialized) struct ServerIntegrationTests {
    let directory: URL

    init() throws {
        directory = try temporaryDirectory("heraldkit")
    }

    func device(
        _ server: HeraldProcess, name: String = "phone", app: AppIdentity = AppIdentity(platform: "linux"),
        transport: RecordingTransport = RecordingTransport(), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> Herald {
        Herald(
            serverURL: server.url, transport: transport, database: try LocalDatabase(url: directory.appendingPathComponent("\(name).sqlite")),
            secrets: FileSecretStore(url: directory.appendingPathComponent("\(name).secret")), app: app, now: now)
    }

    @Test func signUpRegisterSettingsAndRenewal() async throws {
        let server = try await HeraldProcess(in: directory)
        let clock = TestClock()
        let phone = try device(server, now: { clock.now })
        await #expect(throws: HeraldKitError.notSignedIn) { try await phone.settings() }
        let first = try await phone.signUp()
        #expect(first.userID.hasPrefix("dev_"))
        let secret = try #require(try FileSecretStore(url: directory.appendingPathComponent("phone.secret")).load())
        #expect(!secret.isEmpty)

        try await phone.register(.fcm(token: "phone-fcm-token"))
        try await phone.register(.apns(token: String(repeating: "ab", count: 32), sandbox: true))
        // RFC 8291's example subscription keys.
        let webPush = PushAddress.webPush(
            endpoint: "https://push.example.net/push/JzLQ3raZJfFBR0aqvOMsLrt54w4rJUsV",
            p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
            auth: "BTBZMqHH6r4Tts7J_aSIgg")
        try await phone.register(webPush)
        let settings = try await phone.updateTimeZone("Europe/Paris")
        #expect(settings.timezone == "Europe/Paris")
        let quiet = try await phone.updateSettings(
            SettingsChange(
                channels: .init(additionalProperties: ["push": false]),
                preferences: .init(additionalProperties: ["comment": .init(additionalProperties: ["push": true])])))
        #expect(quiet.channels.additionalProperties["push"] == false)
        #expect(quiet.preferences.additionalProperties["comment"]?.additionalProperties["push"] == true)
        try await phone.unregister(webPush)
        try await phone.unregister(.apns(token: String(repeating: "ab", count: 32), sandbox: true))

        // Relaunched: the same database and secret, still signed in as the same user.
        let relaunched = try device(server, now: { clock.now })
        #expect(try await relaunched.userID() == first.userID)
        #expect(try await relaunched.settings().timezone == "Europe/Paris")
        // Signing up again is signing back in, with the secret kept from the first time.
        #expect(try await relaunched.signUp().userID == first.userID)

        // Near expiry, the next call renews the token first.
        let token = try #require(try phone.database.value("token"))
        clock.now = first.expiresAt.addingTimeInterval(-30)
        _ = try await phone.settings()
        #expect(try phone.database.value("token") != token, "renewed before expiry")

        // A refusal is Herald's own code, typed.
        let tooLong = String(repeating: "x", count: 5_000)
        await #expect(throws: HeraldKitError.self) { try await phone.register(.fcm(token: tooLong)) }
        do {
            try await phone.register(.fcm(token: tooLong))
        } catch {
            guard case .server(let status, let code, _, _) = error else { throw error }
            #expect(status == 422 && code == "invalid_field", "\(error)")
        }
        try await phone.unregister(.fcm(token: "phone-fcm-token"))
    }

    /// Signed in with the backend's proof: the device acts for that user, and renewing near
    /// expiry asks the backend again (also after a relaunch, through `proofProvider`).
    @Test func signInWithABackendsProofAndRenewal() async throws {
        let server = try await HeraldProcess(in: directory)
        let clock = TestClock()
        let asked = Counter()
        let proof: @Sendable (String) async throws -> String = { userID in
            asked.increment()
            return BackendProof.mint(userID: userID, expires: Date().addingTimeInterval(3_600))
        }
        let phone = try device(server, now: { clock.now })
        let signedIn = try await phone.signIn(userID: "u-proof", proof: proof)
        #expect(signedIn.userID == "u-proof")
        #expect(signedIn.expiresAt <= Date().addingTimeInterval(3_601), "never later than the proof")
        #expect(try await phone.inboxCounts().unread == 0)
        #expect(asked.value == 1)

        // A bad proof is Herald's 401, typed.
        let stranger = try device(server, name: "stranger")
        do {
            try await stranger.signIn(userID: "u-proof") { _ in "not-a-token" }
            Issue.record("a bad proof was accepted")
        } catch {
            guard case .server(let status, _, _, _) = error else { throw error }
            #expect(status == 401, "\(error)")
        }

        // Relaunched near expiry: the renewal asks the backend through proofProvider.
        clock.now = signedIn.expiresAt.addingTimeInterval(-60)
        let relaunched = Herald(
            serverURL: server.url, transport: RecordingTransport(), database: try LocalDatabase(url: directory.appendingPathComponent("phone.sqlite")),
            secrets: FileSecretStore(url: directory.appendingPathComponent("phone.secret")), proofProvider: proof, now: { clock.now })
        #expect(try await relaunched.inboxCounts().unread == 0)
        #expect(asked.value == 2)
        #expect(try await relaunched.userID() == "u-proof")
    }

    @Test func privateFeedIsDecidedOnTheDevice() async throws {
        let admin = try HeraldProcess.createKey(role: "admin", in: directory)
        let server = try await HeraldProcess(in: directory)
        let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3_600))
        func post(_ title: String, priority: Int, regions: [String], version: String?) async throws -> String {
            let versionJSON = version.map { "\"\($0)\"" } ?? "null"
            let (status, body) = try await server.call(
                .POST, "/api/feed/messages", key: admin,
                json:
                    #"{"title":"\#(title)","body":"","expires_at":"\#(expires)","priority":\#(priority),"target_regions":["\#(regions.joined(separator: "\",\""))"],"target_version":\#(versionJSON)}"#
            )
            #expect(status == 201, "\(String(describing: body))")
            return try #require((body as? [String: Any])?["id"] as? String)
        }
        let everyone = try await post("Everyone", priority: 0, regions: ["CA"], version: nil)
        let quebec2 = try await post("Quebec, 2.x", priority: 5, regions: ["QC"], version: "^2")
        _ = try await post("Ontario", priority: 9, regions: ["ON"], version: nil)
        _ = try await post("Quebec, 1.x", priority: 7, regions: ["QC"], version: "1.x")

        let wire = RecordingTransport()
        let phone = try device(server, app: AppIdentity(platform: "linux", version: "2.4", region: "qc"), transport: wire)
        try await phone.signUp()
        #expect(try await phone.refreshFeed())
        #expect(try await phone.refreshFeed() == false, "304 with the entity tag")
        #expect(try phone.eligibleFeedMessages().map(\.id) == [quebec2, everyone])
        #expect(try phone.nextFeedMessage()?.id == quebec2)
        try phone.markFeedMessageRead(quebec2)
        #expect(try phone.nextFeedMessage()?.id == everyone)
        try phone.markFeedMessageRead(everyone)
        #expect(try phone.nextFeedMessage() == nil)
        // The server never learned the app's region or version: not at sign-in, not in a fetch.
        #expect(wire.sent.map(\.operationID).contains("authDevice") && wire.sent.map(\.operationID).contains("feedIndex"))
        for request in wire.sent {
            #expect(!request.path.contains("region") && !request.path.contains("version"), "\(request.path)")
            #expect(!request.body.contains("2.4") && !request.body.lowercased().contains("\"qc\""), "\(request.body)")
        }
        #expect(wire.sent.filter { $0.operationID == "feedIndex" }.allSatisfy { $0.path == "/feed/index.json" })

        // A message deleted on the server takes its receipt with it at the next fetch.
        #expect(try await server.call(.DELETE, "/api/feed/messages/\(quebec2)", key: admin).0 == 204)
        #expect(try await phone.refreshFeed())
        #expect(try phone.feedReceiptCount() == 1)
        // Offline, the feed still answers from the last fetch.
        server.kill()
        #expect(try phone.nextFeedMessage() == nil)
        await #expect(throws: HeraldKitError.self) { try await phone.refreshFeed() }
    }

    /// With the server stopped, promotion, seen reports and events keep working; after it
    /// restarts everything queued arrives once.
    @Test func cardsAndEventsWorkOfflineAndArriveOnce() async throws {
        let backend = try HeraldProcess.createKey(role: "backend", in: directory)
        var server = try await HeraldProcess(in: directory)
        let port = server.port
        let clock = TestClock()
        let phone = try device(server, now: { clock.now })
        let user = try await phone.signUp().userID
        for (card, hot) in [("c1", 0.9), ("c2", 0.5), ("c3", 0.7), ("c4", 0.1)] {
            let (status, _) = try await server.call(
                .PUT, "/api/cards/\(card)", key: backend, json: #"{"metadata":{"title":"\#(card)"},"posted_at":"2026-11-01T00:00:00Z","hot":\#(hot)}"#)
            #expect(status == 201)
        }
        let (scored, _) = try await server.call(
            .POST, "/api/pool/scores", key: backend, json: #"{"timestamp":1,"users":{"\#(user)":{"c1":0.9,"c2":0.5,"c3":0.7,"c4":0.1}}}"#)
        #expect(scored == 200)
        #expect(try await phone.refreshCards())
        #expect(try phone.pool().map(\.card) == ["c1", "c3", "c2", "c4"])
        #expect(try await phone.refreshCards() == false, "304 with the cache key")
        // A change since the key comes as a change: c4's new score, the rest kept.
        let (rescored, _) = try await server.call(.POST, "/api/pool/scores", key: backend, json: #"{"timestamp":2,"users":{"\#(user)":{"c4":0.2}}}"#)
        #expect(rescored == 200)
        #expect(try await phone.refreshCards())
        #expect(try phone.pool().map(\.card) == ["c1", "c3", "c2", "c4"])
        #expect(try phone.pool().first { $0.card == "c4" }?.score == 0.2)
        #expect(try await phone.refreshCards() == false)
        #expect(try phone.promote()?.card.id == "c1")
        #expect(try await phone.upload().uploaded == 1)
        #expect(try phone.seenCards().first?.serverIndex != nil, "Herald's index once it has the report")

        server.kill()
        #expect(try phone.promote()?.card.id == "c3")
        #expect(try phone.promote()?.card.metadata.value["title"] as? String == "c2")
        try phone.react(.tfu, card: "c3")
        try phone.focus(card: "c2")
        try phone.track("opened_settings", properties: ["from": "menu"])
        let offline = try await phone.upload()
        #expect(offline.uploaded == 0 && offline.waiting == 5 && offline.refused == 0, "\(offline)")

        server = try await HeraldProcess(in: directory, port: port)
        // The seen reports failed once and wait out their backoff (a second, doubling); the
        // events, never tried (the upload stopped at the first failure), go at once.
        let early = try await phone.upload()
        #expect(early.uploaded == 3 && early.waiting == 2, "\(early)")
        clock.now = clock.now.addingTimeInterval(2)
        let later = try await phone.upload()
        #expect(later.uploaded == 2 && later.waiting == 0, "\(later)")
        #expect(try await phone.upload().uploaded == 0, "nothing twice")

        // Herald has each once: the history in order, one reaction, one focus.
        let (_, pulled) = try await server.call(.GET, "/api/pull", key: backend, user: user)
        let history = ((pulled as? [String: Any])?["history"] as? [[String: Any]])?.compactMap { $0["card"] as? String }
        #expect(history == ["c1", "c3", "c2"])
        let (_, stats) = try await server.call(.GET, "/api/events/stats?card=c3", key: backend)
        #expect(((stats as? [String: Any])?["reactions"] as? [String: Any])?["tfu"] as? Int == 1)
        let (_, focus) = try await server.call(.GET, "/api/events/stats?card=c2", key: backend)
        #expect((focus as? [String: Any])?["focus"] as? Int == 1)
        // Resending a batch whose answer was lost counts nothing twice.
        try phone.react(.tfu, card: "c4")
        let duplicate = try phone.database.read { db in try String.fetchOne(db, sql: "SELECT body FROM outbox") }
        #expect(try await phone.upload().uploaded == 1)
        try phone.database.write { db in
            try db.execute(sql: "INSERT INTO outbox (id, kind, body, created_at) VALUES ('again', 'event', ?, 0)", arguments: [duplicate])
        }
        #expect(try await phone.upload().uploaded == 1)
        let (_, again) = try await server.call(.GET, "/api/events/stats?card=c4", key: backend)
        #expect(((again as? [String: Any])?["reactions"] as? [String: Any])?["tfu"] as? Int == 1)
    }

    @Test func liveUpdatesInboxAndMessageHub() async throws {
        let backend = try HeraldProcess.createKey(role: "backend", in: directory)
        let admin = try HeraldProcess.createKey(role: "admin", in: directory)
        let server = try await HeraldProcess(in: directory)
        let phone = try device(server)
        let user = try await phone.signUp().userID
        try await phone.register(.fcm(token: "live-token"))

        func send(_ title: String) async throws {
            let (status, body) = try await server.call(
                .POST, "/api/notifications", key: backend, json: #"{"type":"message","title":"\#(title)","user_ids":["\#(user)"]}"#)
            #expect(status == 202, "\(String(describing: body))")
        }
        // The stream: a notification arrives live, the inbox counts follow.
        var events = phone.liveUpdates().makeAsyncIterator()
        guard case .connected = await events.next() else {
            Issue.record("no connection")
            return
        }
        try await send("Lunch?")
        var titles: [String] = []
        while titles.isEmpty, let event = await events.next() {
            if case .notification(let item) = event { titles.append(item.notification.title) }
        }
        #expect(titles == ["Lunch?"])

        // A feed message posted now reaches the device through the stream's feed event.
        let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3_600))
        let (posted, _) = try await server.call(
            .POST, "/api/feed/messages", key: admin, json: #"{"title":"Live","body":"","expires_at":"\#(expires)","priority":0,"target_regions":["CA"]}"#)
        #expect(posted == 201)
        var feedChanged = false
        while !feedChanged, let event = await events.next() {
            if case .feedChanged = event { feedChanged = true }
        }
        #expect(try phone.nextFeedMessage()?.title == "Live")

        // Inbox: counts, a bulk mark, the badge.
        let counts = try await phone.inboxCounts()
        #expect(counts.unread == 1)
        #expect(try phone.badge() == 1)
        let page = try await phone.history()
        #expect(page.items.map(\.notification.title) == ["Lunch?"])
        #expect(try await phone.history(type: "message").items.count == 1)
        #expect(try await phone.history(type: "comment").items.isEmpty)
        let marked = try await phone.mark(page.items.map(\.data.id), .read)
        #expect(marked.unread == 0)
        #expect(try phone.badge() == 0)
        try await send("Dinner?")
        #expect(try await phone.markAll(.archived).archived == 2)

        // Resume: what was sent while no stream was open arrives on the next one.
        events = phone.liveUpdates().makeAsyncIterator()
        try await send("While away")
        var resumed: [String] = []
        while resumed.isEmpty, let event = await events.next() {
            if case .notification(let item) = event { resumed.append(item.notification.title) }
        }
        #expect(resumed == ["While away"])

        // Message Hub: Forced is shown locked and cannot be left; a plain subject can be joined.
        let (_, channel) = try await server.call(.POST, "/channel", key: admin, json: #"{"name":"Campus","desc":""}"#)
        let channelID = try #require((channel as? [String: Any])?["_id"] as? String)
        let (_, area) = try await server.call(.POST, "/area/\(channelID)", key: admin, json: #"{"name":"Safety","desc":""}"#)
        let areaID = try #require((area as? [String: Any])?["id"] as? String)
        func subject(_ name: String, _ level: String) async throws -> String {
            let (_, body) = try await server.call(
                .POST, "/subject/\(channelID)/\(areaID)", key: admin, json: #"{"name":"\#(name)","desc":"","opt":{"level":"\#(level)","distribution":"Alert"}}"#
            )
            return try #require((body as? [String: Any])?["topic_key"] as? String)
        }
        let emergencies = try await subject("Emergencies", "Forced")
        let sports = try await subject("Sports", "")
        let hub = try await phone.messageHub()
        let subjects = hub.first { $0.name == "Campus" }?.areas.first { $0.name == "Safety" }?.subjects ?? []
        #expect(subjects.first { $0.topicKey == emergencies }?.locked == true)
        #expect(subjects.first { $0.topicKey == emergencies }?.subscribed == true)
        #expect(subjects.first { $0.topicKey == sports }?.subscribed == false)
        await #expect(throws: HeraldKitError.locked(topicKey: emergencies)) { try await phone.unsubscribe(emergencies) }
        try await phone.subscribe(sports)
        #expect(try await phone.messageHub().flatMap(\.areas).flatMap(\.subjects).first { $0.topicKey == sports }?.subscribed == true)
        try await phone.unsubscribe(sports)
        #expect(try await phone.messageHub().flatMap(\.areas).flatMap(\.subjects).first { $0.topicKey == sports }?.subscribed == false)
    }
}

/// A clock the test moves.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var instant = Date()

    var now: Date {
        get { lock.withLock { instant } }
        set { lock.withLock { instant = newValue } }
    }
}

/// Counts calls from concurrent code.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
