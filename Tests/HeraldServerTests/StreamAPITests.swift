import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldServer
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// `GET /api/stream` on a running server, read as an app's EventSource would.
@Suite(.cleansUp) struct StreamAPITests {
    static func make(_ configure: @escaping (inout HeraldConfiguration) -> Void = { _ in }) async throws -> TestHerald {
        try await TestHerald.make { configuration in
            configuration.port = 0
            configure(&configuration)
        }
    }

    /// Sends a request with a JSON body and answers status and JSON.
    static func call(
        _ client: HTTPClient, _ method: HTTPMethod, _ url: String, token: String, user: String? = nil, json: String? = nil
    ) async throws -> (status: UInt, body: [String: Any], etag: String?) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        if let user { request.headers.add(name: "X-User-ID", value: user) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
        return (response.status.code, object, response.headers.first(name: "ETag"))
    }

    static func send(_ client: HTTPClient, _ base: String, _ herald: TestHerald, title: String, to user: String) async throws {
        let sent = try await call(
            client, .POST, base + "/api/notifications", token: herald.backend, json: js(["type": "comment", "title": title, "user_ids": [user]]))
        #expect(sent.status == 202, "\(sent.body)")
    }

    @Test func notificationsArriveLiveAndAReconnectResumesFromTheLastEventID() async throws {
        let herald = try await Self.make()
        let (_, shutdown) = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let token = try await herald.userToken("ada")
            let stream = try await EventStreamReader.open(base + "/api/stream", headers: [("Authorization", "Bearer \(token)")], client: client)
            #expect(stream.status == 200)
            // At connect: the current content and feed versions.
            let content = try #require(try await stream.next())
            #expect(content.event == "content")
            let contentNow = try await Self.call(client, .GET, base + "/api/content", token: token)
            #expect("\"\(content.json["version"] as? String ?? "")\"" == contentNow.etag, "the version is the entity tag GET /api/content answers")
            let feed = try #require(try await stream.next())
            #expect(feed.event == "feed")
            let inbox = try #require(try await stream.next())
            #expect(inbox.event == "inbox")
            #expect(inbox.json["unread"] as? Int == 0, "the inbox counts, as GET /api/inbox/counts answers them")

            try await Self.send(client, base, herald, title: "First", to: "ada")
            let first = try #require(try await stream.next(), "a notification event as the history row is written")
            #expect(first.event == "notification")
            #expect((first.json["notification"] as? [String: Any])?["title"] as? String == "First")
            #expect((first.json["data"] as? [String: Any])?["type"] as? String == "comment")
            #expect(first.json["read"] as? Bool == false)
            let firstID = try #require(first.id.flatMap { Int64($0) })
            let counted = try #require(try await stream.next(), "the counts move with it")
            #expect(counted.event == "inbox")
            #expect(counted.json["unread"] as? Int == 1)
            stream.cancel()

            // Away: two more arrive, then the app reconnects with the last id it saw.
            try await Self.send(client, base, herald, title: "Second", to: "ada")
            try await Self.send(client, base, herald, title: "Third", to: "ada")
            try await Self.send(client, base, herald, title: "Not for ada", to: "bob")
            var stored = 0
            for _ in 0..<200 where stored < 3 {
                stored = (try await Self.call(client, .GET, base + "/api/notifications/history", token: token).body["history"] as? [Any])?.count ?? 0
                if stored < 3 { try await Task.sleep(for: .milliseconds(20)) }
            }
            let resumed = try await EventStreamReader.open(
                base + "/api/stream", headers: [("Authorization", "Bearer \(token)"), ("Last-Event-ID", String(firstID))], client: client
            )
            let second = try #require(try await resumed.next())
            let third = try #require(try await resumed.next())
            #expect([second, third].map(\.event) == ["notification", "notification"])
            #expect([second, third].map { ($0.json["notification"] as? [String: Any])?["title"] as? String } == ["Second", "Third"])
            #expect([second, third].compactMap { $0.id.flatMap { Int64($0) } }.allSatisfy { $0 > firstID })
            // Then only the current versions and counts, once each.
            let again = [try await resumed.next(), try await resumed.next(), try await resumed.next()]
            #expect(again.map { $0?.event } == ["content", "feed", "inbox"])
            #expect(again.first??.data == content.data, "content unchanged: the same version")
            #expect(again.last??.id == third.id, "every event carries the history position to resume from")
            #expect(again.last??.json["unread"] as? Int == 3)
            #expect(try await resumed.next(timeout: .milliseconds(300)) == nil, "nothing else: bob's notification is not ada's")
            resumed.cancel()
        }
        #expect(shutdown < .seconds(10))
    }

    @Test func contentAndFeedChangesAreAnnouncedWithTheirNewVersions() async throws {
        let herald = try await Self.make()
        _ = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let token = try await herald.userToken("ada")
            let stream = try await EventStreamReader.open(base + "/api/stream?region=QC", headers: [("Authorization", "Bearer \(token)")], client: client)
            let initial = [try await stream.next(), try await stream.next(), try await stream.next()]
            #expect(initial.map { $0?.event } == ["content", "feed", "inbox"])

            let items = js(["items": [["type": "banner", "title": "Welcome", "visibility": ["all": true]]]])
            #expect(try await Self.call(client, .PUT, base + "/api/content/pending", token: herald.admin, json: items).status == 200)
            #expect(try await stream.next(timeout: .milliseconds(300)) == nil, "a pending change is nobody's yet")
            #expect(try await Self.call(client, .POST, base + "/api/content/publish", token: herald.admin).status == 200)
            let content = try #require(try await stream.next())
            #expect(content.event == "content")
            #expect(content.data != initial[0]?.data)
            let now = try await Self.call(client, .GET, base + "/api/content", token: token)
            #expect("\"\(content.json["version"] as? String ?? "")\"" == now.etag)

            let message = js(["title": "Snow day", "body": "b", "expires_at": Timestamp.format(Date().addingTimeInterval(3600)), "target_regions": ["QC"]])
            #expect(try await Self.call(client, .POST, base + "/api/feed/messages", token: herald.admin, json: message).status == 201)
            let feed = try #require(try await stream.next())
            #expect(feed.event == "feed")
            var request = HTTPClientRequest(url: base + "/feed/index.json?region=QC")
            request.method = .GET
            let index = try await client.execute(request, timeout: .seconds(10))
            #expect(
                "\"\(feed.json["version"] as? String ?? "")\"" == index.headers.first(name: "ETag"), "the version of the feed as the stream's query sees it")
            stream.cancel()
        }
    }

    @Test func heartbeatsKeepAnIdleStreamAliveAndTheOldestOfTooManyStreamsIsClosed() async throws {
        let herald = try await Self.make { configuration in
            configuration.streamHeartbeat = .seconds(1)
            configuration.maxStreamsPerUser = 2
        }
        _ = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let token = try await herald.userToken("ada")
            let auth = [("Authorization", "Bearer \(token)")]
            let oldest = try await EventStreamReader.open(base + "/api/stream", headers: auth, client: client)
            var comments: [String] = []
            while comments.filter({ $0 == "heartbeat" }).isEmpty, let event = try await oldest.next(timeout: .seconds(5), comments: true) {
                if event.isComment { comments.append(event.data) }
            }
            #expect(comments == ["connected", "heartbeat"])

            let second = try await EventStreamReader.open(base + "/api/stream", headers: auth, client: client)
            #expect(try await oldest.ends(within: .seconds(1)) == false, "two streams are allowed")
            let third = try await EventStreamReader.open(base + "/api/stream", headers: auth, client: client)
            #expect(try await oldest.ends(within: .seconds(5)), "the third closes the oldest")
            #expect(try await second.ends(within: .milliseconds(500)) == false)
            let other = try await EventStreamReader.open(
                base + "/api/stream", headers: [("Authorization", "Bearer \(try await herald.userToken("bob"))")], client: client)
            #expect(try await second.ends(within: .milliseconds(500)) == false, "another user's streams count for them")
            for stream in [second, third, other] { stream.cancel() }
        }
    }

    /// Users are many and each stream holds a connection: past `stream.max_total` a new stream
    /// is turned away (503 with Retry-After) rather than taking the connections API calls need
    /// or closing someone else's; a user replacing their own stream still may.
    @Test func theServerHoldsNoMoreStreamsThanItsTotal() async throws {
        let herald = try await Self.make { configuration in
            configuration.maxStreamsPerUser = 1
            configuration.maxStreamsTotal = 2
        }
        _ = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            func auth(_ user: String) async throws -> [(String, String)] { [("Authorization", "Bearer \(try await herald.userToken(user))")] }
            let ada = try await EventStreamReader.open(base + "/api/stream", headers: try await auth("ada"), client: client)
            let bob = try await EventStreamReader.open(base + "/api/stream", headers: try await auth("bob"), client: client)
            var request = HTTPClientRequest(url: base + "/api/stream")
            for (name, value) in try await auth("cyd") { request.headers.add(name: name, value: value) }
            let full = try await client.execute(request, timeout: .seconds(10))
            let body = String(buffer: try await full.body.collect(upTo: 1 << 16))
            #expect(full.status.code == 503 && body.contains("too_many_streams") && full.headers.first(name: "Retry-After") != nil, "\(full.status) \(body)")
            #expect(try await ada.ends(within: .milliseconds(500)) == false, "nobody else's stream was closed for it")
            // Ada replaces her own stream: still allowed at the total.
            let again = try await EventStreamReader.open(base + "/api/stream", headers: try await auth("ada"), client: client)
            #expect(try await ada.ends(within: .seconds(5)), "her older stream made way")
            for stream in [bob, again] { stream.cancel() }
        }
    }

    /// A stream outlives no token: one opened with a token that expires, or whose user is signed
    /// out (or erased), ends at the next heartbeat.
    @Test func aStreamEndsWithItsToken() async throws {
        let herald = try await Self.make { $0.streamHeartbeat = .seconds(1) }
        _ = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let shortLived = try await herald.userToken("eve", expires: Date().addingTimeInterval(2))
            let expiring = try await EventStreamReader.open(base + "/api/stream", headers: [("Authorization", "Bearer \(shortLived)")], client: client)
            let signedOut = try await EventStreamReader.open(
                base + "/api/stream", headers: [("Authorization", "Bearer \(try await herald.userToken("sam"))")], client: client)
            let kept = try await EventStreamReader.open(
                base + "/api/stream", headers: [("Authorization", "Bearer \(try await herald.userToken("kim"))")], client: client)
            var request = HTTPClientRequest(url: base + "/api/users/sam/sign-out")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(herald.admin)")
            #expect(try await client.execute(request, timeout: .seconds(10)).status.code == 200)
            #expect(try await signedOut.ends(within: .seconds(10)), "a signed-out user's stream went on")
            #expect(try await expiring.ends(within: .seconds(10)), "a stream outlived its token")
            #expect(try await kept.ends(within: .seconds(2)) == false, "another user's stream is untouched")
            kept.cancel()
        }
    }

    @Test func badRequestsAreRefusedBeforeStreaming() async throws {
        let herald = try await Self.make()
        _ = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let token = try await herald.userToken("ada")
            func status(_ headers: [(String, String)], query: String = "") async throws -> (UInt, String) {
                var request = HTTPClientRequest(url: base + "/api/stream" + query)
                for (name, value) in headers { request.headers.add(name: name, value: value) }
                let response = try await client.execute(request, timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 1 << 16)
                return (response.status.code, String(buffer: body))
            }
            #expect(try await status([]).0 == 401)
            let badID = try await status([("Authorization", "Bearer \(token)"), ("Last-Event-ID", "yesterday")])
            #expect(badID.0 == 400)
            #expect(badID.1.contains("Last-Event-ID"))
            #expect(try await status([("Authorization", "Bearer \(token)"), ("Last-Event-ID", "-1")]).0 == 400)
            #expect(try await status([("Authorization", "Bearer \(token)")], query: "?version=banana").0 == 400)
            #expect(try await status([("Authorization", "Bearer \(herald.communicator)"), ("X-User-ID", "ada")]).0 == 403)
        }
    }

    /// A graceful shutdown ends open streams at once rather than waiting out the drain.
    @Test func openStreamsEndAtShutdown() async throws {
        // A drain far longer than the bound below, which is loose for a loaded machine (10 s
        // was exceeded once, by the whole suite's load, with the streams ending at once).
        let herald = try await Self.make { $0.shutdownTimeout = .seconds(180) }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        let (stream, shutdown) = try await herald.serve { base in
            let stream = try await EventStreamReader.open(
                base + "/api/stream", headers: [("Authorization", "Bearer \(try await herald.userToken("ada"))")], client: client)
            _ = try await stream.next()
            return stream
        }
        #expect(try await stream.ends(within: .seconds(10)))
        // Without the streams ending, the HTTP server would wait for them for good.
        #expect(shutdown < .seconds(60), "took \(shutdown)")
    }

    @Test func streamAndMembershipSettingsParse() async throws {
        let configuration = try await HeraldConfiguration.load(
            configFile: nil, environment: ["HERALD_STREAM_HEARTBEAT": "30s", "HERALD_STREAM_MAX_PER_USER": "2", "HERALD_TOPICS_MANAGE_FCM_MEMBERSHIP": "false"]
        )
        #expect(configuration.streamHeartbeat == .seconds(30))
        #expect(configuration.maxStreamsPerUser == 2)
        #expect(configuration.manageTopicMembership == false, "the old name still works")
        let defaults = try await HeraldConfiguration.load(configFile: nil, environment: [:])
        #expect(defaults.streamHeartbeat == .seconds(15) && defaults.maxStreamsPerUser == 5 && defaults.manageTopicMembership)
        let renamed = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_TOPICS_MANAGE_MEMBERSHIP": "false"])
        #expect(renamed.manageTopicMembership == false)
        let both = try await HeraldConfiguration.load(
            configFile: nil, environment: ["HERALD_TOPICS_MANAGE_MEMBERSHIP": "true", "HERALD_TOPICS_MANAGE_FCM_MEMBERSHIP": "false"])
        #expect(both.manageTopicMembership, "the key wins over its alias")
    }

    /// A file that still uses the old name, alone or with the new one, starts: the alias is a
    /// key Herald reads, not an unknown one.
    @Test func theOldMembershipKeyInAFileIsRead() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("herald.yaml").path
        try "topics:\n  manage_fcm_membership: false\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try await HeraldConfiguration.load(configFile: file, environment: [:]).manageTopicMembership == false)
        try "topics:\n  manage_membership: true\n  manage_fcm_membership: false\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try await HeraldConfiguration.load(configFile: file, environment: [:]).manageTopicMembership)
    }

    /// `circuit.failures` is no longer read: a configuration that sets it is told so at start,
    /// never silently ignored.
    @Test func theOldCircuitSettingIsWarnedAbout() async throws {
        let old = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_CIRCUIT_FAILURES": "5"])
        #expect(old.warnings.count == 1 && old.warnings[0].contains("circuit.failures is no longer read"), "\(old.warnings)")
        let current = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_CIRCUIT_SUCCESS_FLOOR": "0.1"])
        #expect(current.warnings.isEmpty && current.delivery.circuit.successFloor == 0.1)
    }

    @Test(
        arguments: [
            (["HERALD_STREAM_HEARTBEAT": "0"], "stream.heartbeat"),
            (["HERALD_STREAM_HEARTBEAT": "10m"], "stream.heartbeat"),
            (["HERALD_STREAM_HEARTBEAT": "soon"], "stream.heartbeat"),
            (["HERALD_STREAM_MAX_PER_USER": "0"], "stream.max_per_user"),
            (["HERALD_STREAM_MAX_PER_USER": "many"], "stream.max_per_user"),
            (["HERALD_STREAM_MAX_TOTAL": "0"], "stream.max_total"),
            (["HERALD_STREAM_MAX_TOTAL": "5000"], "stream.max_total"),
            (["HERALD_AUTH_FAILED_ATTEMPTS_PER_MINUTE": "0"], "auth.failed_attempts_per_minute"),
            (["HERALD_AUTH_DEVICE_SECRET_CLAIM_UNTIL": "next week"], "auth.device_secret_claim_until"),
            (["HERALD_DEVICES_REGISTRATIONS_PER_USER_PER_MINUTE": "0"], "devices.registrations_per_user_per_minute"),
            (["HERALD_DEVICES_REGISTRATIONS_PER_KEY_PER_MINUTE": "-1"], "devices.registrations_per_key_per_minute"),
            (["HERALD_CIRCUIT_WINDOW": "0"], "circuit.window"),
            (["HERALD_CIRCUIT_MIN_CALLS": "500"], "circuit.min_calls"),
            (["HERALD_CIRCUIT_SUCCESS_FLOOR": "1.5"], "circuit.success_floor"),
            (["HERALD_CIRCUIT_PROBES": "0"], "circuit.probes"),
            (["HERALD_TOPICS_MANAGE_FCM_MEMBERSHIP": "maybe"], "topics.manage_fcm_membership"),
            (["HERALD_TOPICS_MANAGE_MEMBERSHIP": "maybe"], "topics.manage_membership"),
        ] as [([String: String], String)])
    func badStreamAndMembershipSettingsAreRefusedNamingTheKey(_ environment: [String: String], _ key: String) async throws {
        do {
            _ = try await HeraldConfiguration.load(configFile: nil, environment: environment)
            Issue.record("\(environment) was accepted")
        } catch let error as HeraldError {
            #expect(error.message.contains(key), "\(error.message)")
        }
    }
}
