import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@Suite(.cleansUp) struct SendAPITests {
    static var valid: [String: Any] { ["type": "comment", "title": "t", "body": "b", "user_ids": ["u"]] }

    /// The valid body with some fields changed or removed, serialised.
    static func with(_ changes: [String: Any], removing: [String] = []) -> String {
        var body = valid.merging(changes) { _, new in new }
        for key in removing { body.removeValue(forKey: key) }
        return js(body)
    }

    /// Every malformed request gets a 4xx JSON error naming the problem; none gets a 5xx.
    static let badInputs: [(String, String, Int, String)] = [
        ("malformed JSON", "{\"type\": ", 400, "not valid JSON"),
        ("trailing garbage", "{\"type\":\"hot\"} x", 400, "not valid JSON"),
        ("empty body", "", 400, "body"),
        ("array body", "[1]", 400, "JSON object"),
        ("string body", "\"hello\"", 400, "JSON object"),
        ("unknown type", with(["type": "nope"]), 400, "upvote, comment"),
        ("type is a number", with(["type": 5]), 422, "'type'"),
        ("title is a number", with(["title": 5]), 422, "'title'"),
        ("title missing", with([:], removing: ["title"]), 422, "'title'"),
        ("body is an object", with(["body": ["x": 1]]), 422, "'body'"),
        ("user_ids is a string", with(["user_ids": "u"]), 422, "'user_ids'"),
        ("user_ids has a number", with(["user_ids": ["u", 7]]), 422, "'user_ids[1]'"),
        ("user_ids has an id not in NFC", with(["user_ids": ["Jos\u{e9}", "Jose\u{301}"]]), 422, "'user_ids[1]'"),
        ("user_ids empty", with(["user_ids": [String]()]), 422, "'user_ids'"),
        ("data value is a number", with(["data": ["count": 3]]), 422, "'data.count'"),
        ("data is a list", with(["data": ["a"]]), 422, "'data'"),
        ("priority is a string", with(["priority": "high"]), 422, "'priority'"),
        ("priority is a fraction", with(["priority": 1.5]), 422, "'priority'"),
        ("distribution unknown", with(["distribution": "loud"]), 422, "'distribution'"),
        ("url relative", with(["url": "posts/1"]), 422, "'url'"),
        ("url is a number", with(["url": 1]), 422, "'url'"),
        ("expires_at in the past", with(["expires_at": "2000-01-01T00:00:00Z"]), 422, "'expires_at'"),
        ("expires_at not a date", with(["expires_at": "soon"]), 422, "'expires_at'"),
        ("unknown field", with(["user_id": "u"]), 422, "'user_id'"),
        ("no target", with([:], removing: ["user_ids"]), 422, "target"),
        ("two targets", with(["topic": "a-b-c"]), 422, "target"),
        ("broadcast false", with(["broadcast": false], removing: ["user_ids"]), 422, "'broadcast'"),
        ("audience wrong type", with(["audience": "all"], removing: ["user_ids"]), 422, "'audience'"),
        ("null title", with(["title": NSNull()]), 422, "'title'"),
    ]

    @Test(arguments: 0..<badInputs.count)
    func badInputMatrixNeverGets5xx(_ index: Int) async throws {
        let (name, body, status, fragment) = Self.badInputs[index]
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
            #expect(response.status.code == status, "\(name): \(response.status) \(String(buffer: response.body))")
            #expect(response.errorCode != nil, "\(name): error shape")
            #expect(response.errorMessage.contains(fragment), "\(name): \(response.errorMessage)")
        }
    }

    /// Audience targets resolve to users by tier, group and id (OR-ed, numbers read as text),
    /// each user's settings applied as for any send.
    @Test func anAudienceReachesItsUsersHistoriesAndDevices() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.put, "/api/users/ann", headers(herald.backend), json: js(["tier_id": 3]))
            _ = try await client.call(.put, "/api/users/bob", headers(herald.backend), json: js(["group_ids": ["press"]]))
            _ = try await client.call(.put, "/api/users/cy", headers(herald.backend), json: js(["tier_id": "silver"]))
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "bob"), json: ["fcm_token": "bob-phone"])
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "alert", "title": "Doors open", "audience": ["tier_ids": [3], "group_ids": ["press"], "user_ids": ["dee"]]]
            )
            #expect(sent.status == .accepted, "\(String(buffer: sent.body))")
            #expect(sent.object["recipients"] as? Int == 3)
            try await herald.deliver()
            for (user, count) in [("ann", 1), ("bob", 1), ("dee", 1), ("cy", 0)] {
                let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: user))
                #expect((history.object["history"] as? [Any])?.count == count, "\(user)")
            }
            #expect(herald.push.received.map { $0.recipient.userID } == ["bob"], "devices get pushes as for any send")
            let nobody = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "alert", "title": "t", "audience": [:]])
            #expect(nobody.status == .unprocessableContent && nobody.errorMessage.contains("audience"))
        }
    }

    /// `"dry_run": true` plans the deliveries and asks the push sinks, and stores and sends nothing.
    @Test func aDryRunPlansAndStoresNothing() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u1"), json: ["fcm_token": "tok-1"])
            let dry = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "like", "title": "t", "body": "b", "url": "/posts/X", "user_ids": ["u1"], "dry_run": true]
            )
            #expect(dry.status == .ok, "\(String(buffer: dry.body))")
            #expect(dry.object["dry_run"] as? Bool == true && dry.object["recipients"] as? Int == 1)
            let deliveries = dry.object["deliveries"] as? [[String: Any]] ?? []
            #expect(Set(deliveries.compactMap { $0["sink"] as? String }) == ["history", "fcm"])
            let push = deliveries.first { $0["sink"] as? String == "fcm" }
            #expect((push?["recipient"] as? [String: Any])?["provider"] as? String == "fcm")
            #expect((push?["payload"] as? [String: Any])?["url"] as? String == "https://pong.example/posts/X")
            #expect((dry.object["provider"] as? [[String: Any]])?.first?["sink"] as? String == "fcm")
            try await herald.deliver()
            #expect(herald.push.received.isEmpty, "nothing was sent")
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u1"))
            #expect((history.object["history"] as? [Any])?.isEmpty == true, "nothing was stored")
            let topic = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "like", "title": "t", "topic": "a-b-c", "dry_run": true])
            #expect(topic.status == .unprocessableContent || topic.status == .notFound)
        }
    }

    @Test func oversizedBodiesAre413() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let big = Self.with(["body": String(repeating: "x", count: 70 * 1024)])
            let response = try await client.call(.post, "/api/notifications", headers(herald.backend), json: big)
            #expect(response.status == .contentTooLarge)
            #expect(response.errorCode == "payload_too_large")
            let register = try await client.call(
                .post, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": String(repeating: "x", count: 65 * 1024)])
            #expect(register.status == .contentTooLarge)
        }
    }

    @Test func nonJSONContentTypeIs415() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(.post, "/api/notifications", headers(herald.backend, contentType: "text/plain"), json: Self.valid)
            #expect(response.status == .unsupportedMediaType)
            #expect(response.errorCode == "unsupported_media_type")
        }
    }

    @Test func repeatedIdempotencyKeySendsNothingTwice() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            let body = Self.with(["idempotency_key": "order-42-shipped"])
            let first = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
            let second = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
            #expect(first.status == .accepted && second.status == .accepted)
            #expect(first.object["id"] as? String == second.object["id"] as? String)
            #expect(second.object["recipients"] as? Int == 1)
            try await herald.deliver()
            #expect(herald.push.received.count == 1)
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u"))
            #expect((history.object["history"] as? [Any])?.count == 1)
        }
    }

    @Test func notificationStatusShowsDeliveriesPerSink() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            herald.push.script([.retry(after: .seconds(60), reason: "UNAVAILABLE: try later")])
            let sent = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.with(["data": ["thread": "9"], "priority": 5]))
            let id = try #require(sent.object["id"] as? String)
            try await herald.deliver()
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
            #expect(status.status == .ok)
            let notification = try #require(status.object["notification"] as? [String: Any])
            #expect(notification["id"] as? String == id)
            #expect(notification["priority"] as? Int == 5)
            #expect((notification["data"] as? [String: String]) == ["thread": "9"])
            #expect((notification["target"] as? [String: [String]]) == ["user_ids": ["u"]])
            let deliveries = try #require(status.object["deliveries"] as? [[String: Any]])
            let push = try #require(deliveries.first { $0["sink"] as? String == "fcm" })
            #expect(push["state"] as? String == "pending")
            #expect(push["attempts"] as? Int == 1)
            #expect(push["last_error"] as? String == "UNAVAILABLE: try later")
            #expect(push["next_attempt_at"] is String)
            let history = try #require(deliveries.first { $0["sink"] as? String == "history" })
            #expect(history["state"] as? String == "delivered")
            #expect((status.object["summary"] as? [String: [String: Int]]) == ["fcm": ["pending": 1], "history": ["delivered": 1]])

            let missing = try await client.call(.get, "/api/notifications/62505215624257b417055bc4", headers(herald.backend))
            #expect(missing.status == .notFound)
            let malformed = try await client.call(.get, "/api/notifications/not-an-id", headers(herald.backend))
            #expect(malformed.status == .notFound)
        }
    }

    @Test func operatorTypesAndRoutingRulesFromConfiguration() async throws {
        let herald = try await TestHerald.make {
            $0.extraTypes = ["digest"]
            $0.routing = ["type=digest => -fcm"]
        }
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            let digest = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.with(["type": "digest"]))
            #expect(digest.status == .accepted)
            try await herald.deliver()
            #expect(herald.push.received.isEmpty, "the rule removed push for digests")
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u"))
            #expect((history.object["history"] as? [Any])?.count == 1)
        }
    }

    @Test func webhookMatchRoutesOnlyMatchingNotifications() async throws {
        let herald = try await TestHerald.make {
            $0.addSink("moderation", type: "webhook", ["url": "http://127.0.0.1:1/hook", "secret": "moderation-secret-123", "match.types": "violation"])
        }
        try await herald.test { client in
            let violation = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: Self.with(["type": "violation", "user_ids": ["a", "b"]]))
            let comment = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.with(["type": "comment"]))
            for (response, expected) in [(violation, 2), (comment, 0)] {
                let id = try #require(response.object["id"] as? String)
                let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
                let sinks = (status.object["deliveries"] as? [[String: Any]] ?? []).compactMap { $0["sink"] as? String }
                #expect(sinks.filter { $0 == "webhook:moderation" }.count == expected, "one webhook delivery per user recipient of a match")
            }
        }
    }

    @Test func putUserSetsAttributes() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(
                .put, "/api/users/alice", headers(herald.backend), json: ["tier_id": 3, "group_ids": ["g1", 7], "region": "QC"])
            #expect(response.status == .ok)
            #expect(response.object["id"] as? String == "alice")
            let attributes = try #require(response.object["attributes"] as? [String: Any])
            #expect(attributes["tier_id"] as? String == "3", "numbers are kept as their decimal text")
            #expect(attributes["group_ids"] as? [String] == ["g1", "7"])
            #expect(try await herald.server.store.attributes(userID: "alice")?.region == "QC")

            let encoded = try await client.call(.put, "/api/users/user%40example.com", headers(herald.backend), json: js(["region": "ON"]))
            #expect(encoded.object["id"] as? String == "user@example.com")
            #expect(try await herald.server.store.attributes(userID: "user@example.com")?.region == "ON")
            let spaced = try await client.call(.put, "/api/users/a%20b", headers(herald.backend), json: js(["region": "ON"]))
            #expect(spaced.status == .unprocessableContent)

            for (body, fragment) in [
                (js(["tier_id": true]), "tier_id"), (js(["group_ids": "g1"]), "group_ids"), (js(["colour": "red"]), "colour"), (js(["region": ""]), "region"),
            ] {
                let bad = try await client.call(.put, "/api/users/alice", headers(herald.backend), json: body)
                #expect(bad.status == .unprocessableContent, "\(body)")
                #expect(bad.errorMessage.contains(fragment), "\(body): \(bad.errorMessage)")
            }
        }
    }
}
