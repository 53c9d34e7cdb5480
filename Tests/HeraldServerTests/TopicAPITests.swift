import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// Builds a hierarchy through the API and returns the ids it got.
struct Hierarchy {
    var channel: String
    var area: String
    var forced: String
    var recommended: String
    var optIn: String
    var info: String

    static func build(_ client: any TestClientProtocol, admin: String) async throws -> Hierarchy {
        func post(_ uri: String, _ body: [String: Any]) async throws -> [String: Any] {
            let response = try await client.call(.post, uri, headers(admin), json: js(body))
            #expect(response.status == .created, "\(uri): \(String(buffer: response.body))")
            return response.object
        }
        let channel = try #require(try await post("/channel", ["name": "Campus", "desc": "All campus news"])["_id"] as? String)
        let area = try #require(try await post("/area/\(channel)", ["name": "Safety", "desc": ""])["id"] as? String)
        func subject(_ name: String, _ level: String, _ distribution: String) async throws -> String {
            try #require(
                try await post("/subject/\(channel)/\(area)", ["name": name, "desc": "", "opt": ["level": level, "distribution": distribution]])["topic_key"]
                    as? String)
        }
        return Hierarchy(
            channel: channel, area: area, forced: try await subject("Emergencies", "Forced", "Alert"),
            recommended: try await subject("Weather", "Recommended", "Alert"), optIn: try await subject("Events", "", "Alert"),
            info: try await subject("Library hours", "", "Information")
        )
    }
}

@Suite(.cleansUp) struct TopicAPITests {
    @Test func hierarchyRoundTripAsMessageHubAppsReadIt() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let h = try await Hierarchy.build(client, admin: herald.admin)
            let list = try await client.call(.get, "/channel", headers(herald.communicator))
            #expect(list.status == .ok)
            let channels = try #require(list.json as? [[String: Any]])
            let channel = try #require(channels.first)
            #expect(Set(channel.keys) == ["_id", "name", "desc", "access", "areas"])
            #expect(channel["_id"] as? String == h.channel)
            let area = try #require((channel["areas"] as? [[String: Any]])?.first)
            #expect(Set(area.keys) == ["id", "name", "desc", "access", "subjects"])
            #expect((area["access"] as? [String]) == [])
            let subjects = try #require(area["subjects"] as? [[String: Any]])
            #expect(subjects.count == 4)
            let first = subjects[0]
            #expect(Set(first.keys) == ["id", "name", "desc", "access", "tags", "topic_key", "opt"])
            #expect(first["topic_key"] as? String == "\(h.channel)-\(h.area)-\(first["id"] as? String ?? "")")
            #expect((first["opt"] as? [String: String]) == ["level": "Forced", "distribution": "Alert"])
            #expect((subjects[2]["opt"] as? [String: String])?["level"] == "")

            // PUT replaces only the fields given.
            let subjectID = try #require(first["id"] as? String)
            let renamed = try await client.call(.put, "/area/\(h.channel)/\(h.area)", headers(herald.admin), json: js(["name": "Security"]))
            #expect(renamed.status == .ok)
            #expect(renamed.object["name"] as? String == "Security")
            #expect(renamed.object["desc"] as? String == "")
            let changed = try await client.call(
                .put, "/subject/\(h.channel)/\(h.area)/\(subjectID)", headers(herald.admin), json: js(["opt": ["distribution": "Information"]]))
            #expect(changed.status == .ok)
            #expect((changed.object["opt"] as? [String: String]) == ["level": "Forced", "distribution": "Information"])
            #expect(changed.object["name"] as? String == "Emergencies")

            let user = try await herald.userToken("someone")
            #expect(try await client.call(.get, "/channel", headers(user)).status == .ok, "user tokens read the cube")
            #expect(try await client.call(.get, "/channel", headers()).status == .unauthorized)
        }
    }

    /// Apps load the subject tree before sign-in when `topics.public_read` is on; writes still need a key.
    @Test func publicReadOpensTheTreeAndNothingElse() async throws {
        let herald = try await TestHerald.make { $0.topicsPublicRead = true }
        try await herald.test { client in
            _ = try await Hierarchy.build(client, admin: herald.admin)
            let anonymous = try await client.call(.get, "/channel", headers())
            #expect(anonymous.status == .ok)
            #expect((anonymous.json as? [[String: Any]])?.count == 1)
            #expect(try await client.call(.post, "/channel", headers(), json: js(["name": "x", "desc": "y"])).status == .unauthorized)
            #expect(try await client.call(.get, "/message", headers()).status == .unauthorized)
        }
    }

    @Test func everyErrorStatus() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let h = try await Hierarchy.build(client, admin: herald.admin)
            let missing = "62505215624257b417055bc4"
            let subjectID = String(h.optIn.split(separator: "-")[2])
            let cases: [(HTTPRequest.Method, String, String?, Int, String)] = [
                (.post, "/area/\(missing)", js(["name": "x"]), 404, "channel"),
                (.post, "/area/not-an-id", js(["name": "x"]), 404, "channel"),
                (.put, "/area/\(h.channel)/\(missing)", js(["name": "x"]), 404, "area"),
                (.delete, "/area/\(missing)/\(h.area)", nil, 404, "area"),
                (.post, "/subject/\(h.channel)/\(missing)", js(["name": "x"]), 404, "area"),
                (.put, "/subject/\(h.channel)/\(h.area)/\(missing)", js(["name": "x"]), 404, "subject"),
                (.delete, "/subject/\(missing)/\(h.area)/\(subjectID)", nil, 404, "subject"),
                (.post, "/subject/\(h.channel)/\(h.area)", js(["name": "x", "opt": ["level": "Mandatory"]]), 422, "opt.level"),
                (.post, "/subject/\(h.channel)/\(h.area)", js(["name": "x", "opt": ["distribution": "Loud"]]), 422, "opt.distribution"),
                (.put, "/subject/\(h.channel)/\(h.area)/\(subjectID)", js(["opt": ["level": "forced"]]), 422, "opt.level"),
                (.post, "/channel", js(["desc": "no name"]), 422, "'name'"),
                (.post, "/channel", js(["name": "  "]), 422, "'name'"),
                (.post, "/channel", js(["name": 5]), 422, "'name'"),
                (.post, "/channel", js(["name": "x", "colour": "red"]), 422, "colour"),
                (.put, "/area/\(h.channel)/\(h.area)", js([String: Any]()), 422, "at least one"),
                (.post, "/area/\(h.channel)", js(["name": "x", "opt": ["level": "Forced"]]), 422, "opt"),
                (.post, "/channel", "{nope", 400, "JSON"),
            ]
            for (method, uri, body, status, fragment) in cases {
                let response = try await client.call(method, uri, headers(herald.admin), json: body)
                #expect(response.status.code == status, "\(method) \(uri) \(body ?? ""): \(response.status) \(String(buffer: response.body))")
                #expect(response.errorMessage.contains(fragment), "\(method) \(uri): \(response.errorMessage)")
            }
        }
    }

    @Test func onlyAdminsChangeTheHierarchy() async throws {
        let herald = try await TestHerald.make()
        let user = try await herald.userToken("u")
        try await herald.test { client in
            let h = try await Hierarchy.build(client, admin: herald.admin)
            for caller in [herald.communicator, herald.backend, user] {
                for (method, uri) in [
                    (HTTPRequest.Method.post, "/channel"), (.post, "/area/\(h.channel)"), (.put, "/area/\(h.channel)/\(h.area)"),
                    (.delete, "/area/\(h.channel)/\(h.area)"), (.post, "/subject/\(h.channel)/\(h.area)"),
                ] {
                    let response = try await client.call(method, uri, headers(caller), json: js(["name": "x"]))
                    #expect(response.status == .forbidden, "\(method) \(uri)")
                }
            }
            #expect(try await client.call(.post, "/channel", headers(), json: js(["name": "x"])).status == .unauthorized)
        }
    }

    @Test func subscriptionsForcedRecommendedAndOptIn() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let h = try await Hierarchy.build(client, admin: herald.admin)
            func subscribed(_ user: String) async throws -> [String: Bool] {
                let response = try await client.call(.get, "/api/notifications/subscriptions", headers(herald.backend, user: user))
                #expect(response.status == .ok)
                let items = try #require(response.json as? [[String: Any]])
                for item in items { #expect(Set(item.keys) == ["topic_key", "channel", "area", "subject", "level", "subscribed"]) }
                return Dictionary(
                    uniqueKeysWithValues: items.compactMap { item in (item["topic_key"] as? String).map { ($0, item["subscribed"] as? Bool ?? false) } })
            }
            #expect(
                try await subscribed("newbie") == [h.forced: true, h.recommended: false, h.optIn: false, h.info: false],
                "Forced applies before any registration")

            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "newbie"), json: js(["fcm_token": "t1"]))
            #expect(
                try await subscribed("newbie") == [h.forced: true, h.recommended: true, h.optIn: false, h.info: false], "Recommended at first registration")

            #expect(
                try await client.call(.delete, "/api/notifications/subscriptions/\(h.recommended)", headers(herald.backend, user: "newbie")).status
                    == .noContent)
            #expect(try await client.call(.put, "/api/notifications/subscriptions/\(h.optIn)", headers(herald.backend, user: "newbie")).status == .noContent)
            // A second device does not bring the removed Recommended subject back.
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "newbie"), json: js(["fcm_token": "t2"]))
            #expect(try await subscribed("newbie") == [h.forced: true, h.recommended: false, h.optIn: true, h.info: false])

            let forced = try await client.call(.delete, "/api/notifications/subscriptions/\(h.forced)", headers(herald.backend, user: "newbie"))
            #expect(forced.status == .conflict)
            #expect(forced.errorCode == "forced_subscription")
            let unknown = try await client.call(
                .put, "/api/notifications/subscriptions/62505215624257b417055bc4-62505215624257b417055bc4-62505215624257b417055bc4",
                headers(herald.backend, user: "newbie"))
            #expect(unknown.status == .notFound)

            // Deleting a subject removes it and its subscriptions.
            let optInID = String(h.optIn.split(separator: "-")[2])
            #expect(try await client.call(.delete, "/subject/\(h.channel)/\(h.area)/\(optInID)", headers(herald.admin)).status == .noContent)
            #expect(try await subscribed("newbie")[h.optIn] == nil)
            #expect(try await client.call(.delete, "/area/\(h.channel)/\(h.area)", headers(herald.admin)).status == .noContent)
            #expect(try await subscribed("newbie").isEmpty)
        }
    }
}

@Suite(.cleansUp) struct MessageAPITests {
    @Test func postingAMessageArchivesItAndWritesSubscribersHistory() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let h = try await Hierarchy.build(client, admin: herald.admin)
            // Three users: one registered (Forced + Recommended), one only known by settings, one opted in to Events.
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "reg"), json: js(["fcm_token": "t-reg"]))
            _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "quiet"), json: js(["enabled": false]))
            _ = try await client.call(.put, "/api/notifications/subscriptions/\(h.optIn)", headers(herald.backend, user: "fan"))

            let post = try await client.call(
                .post, "/message", headers(herald.communicator),
                json: js([
                    "title": "Fire drill", "desc": "Leave the building", "message": "At 10:00 in building B", "topic_key": h.forced, "distribution": "Alert",
                ]))
            #expect(post.status == .created, "\(String(buffer: post.body))")
            let msi = try #require(post.object["msi_key"] as? String)
            let timestamp = try #require(post.object["timestamp"] as? Int64)
            #expect(abs(Double(timestamp) / 1000 - Date().timeIntervalSince1970) < 60, "timestamp is in milliseconds")
            _ = try await client.call(
                .post, "/message", headers(herald.admin),
                json: js([
                    "title": "Concert", "desc": "Tonight", "message": "", "topic_key": h.optIn, "distribution": "Alert",
                ]))
            try await herald.deliver()

            func history(_ user: String) async throws -> [String] {
                let response = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: user))
                return (response.object["history"] as? [[String: Any]] ?? []).compactMap { ($0["notification"] as? [String: String])?["title"] }
            }
            #expect(try await history("reg") == ["Fire drill"], "Forced reaches every user")
            #expect(try await history("quiet") == ["Fire drill"], "settings never suppress history")
            #expect(try await history("fan") == ["Concert", "Fire drill"])
            let item = try #require(
                (try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "reg"))).object["history"] as? [[String: Any]]
            ).first
            #expect((item?["data"] as? [String: Any])?["id"] as? String == msi)
            #expect((item?["notification"] as? [String: String])?["body"] == "Leave the building")

            let archive = try await client.call(.get, "/message", headers(herald.communicator))
            #expect(archive.status == .ok)
            let messages = try #require(archive.object["messages"] as? [[String: Any]])
            #expect(messages.compactMap { $0["title"] as? String } == ["Concert", "Fire drill"], "newest first")
            #expect(messages.last?["sender"] as? String == "Communicator (communicator-test)", "the role in words and the key's name")
            #expect(messages.last?["_id"] as? String == messages.last?["msi_key"] as? String)
            #expect(messages.last?["msi_key"] as? String == msi)
            #expect(messages.last?["message"] as? String == "At 10:00 in building B")
            let filtered = try await client.call(.get, "/message?topic_key=\(h.optIn)", headers(herald.admin))
            #expect((filtered.object["messages"] as? [[String: Any]])?.compactMap { $0["title"] as? String } == ["Concert"])
            let paged = try await client.call(.get, "/message?limit=1", headers(herald.admin))
            let next = try #require(paged.object["next"] as? String)
            let second = try await client.call(.get, "/message?limit=1&before=\(next)", headers(herald.admin))
            #expect((second.object["messages"] as? [[String: Any]])?.first?["title"] as? String == "Fire drill")
            #expect(second.object["next"] is NSNull)
        }
    }

    @Test func messageValidationAndAuth() async throws {
        let herald = try await TestHerald.make()
        let user = try await herald.userToken("u")
        try await herald.test { client in
            let h = try await Hierarchy.build(client, admin: herald.admin)
            let missingTopic = "62505215624257b417055bc4-62505215624257b417055bc4-62505215624257b417055bc4"
            let cases: [([String: Any], Int, String)] = [
                (["title": "t", "desc": "d", "topic_key": missingTopic, "distribution": "Alert"], 404, "topic"),
                (["title": "t", "desc": "d", "topic_key": h.info, "distribution": "Alert"], 422, "Information"),
                (["title": "t", "desc": "", "topic_key": h.forced, "distribution": "Alert"], 422, "'desc'"),
                (["title": "t", "topic_key": h.forced, "distribution": "Alert"], 422, "'desc'"),
                (["title": "", "desc": "d", "topic_key": h.forced, "distribution": "Alert"], 422, "'title'"),
                (["desc": "d", "topic_key": h.forced, "distribution": "Alert"], 422, "'title'"),
                (["title": "t", "desc": "d", "topic_key": h.forced, "distribution": "alert"], 422, "'distribution'"),
                (["title": "t", "desc": "d", "distribution": "Alert"], 422, "'topic_key'"),
                (["title": "t", "desc": "d", "topic_key": h.forced, "distribution": "Alert", "sender": "me"], 422, "'sender'"),
            ]
            for (body, status, fragment) in cases {
                let response = try await client.call(.post, "/message", headers(herald.communicator), json: js(body))
                #expect(response.status.code == status, "\(body): \(String(buffer: response.body))")
                #expect(response.errorMessage.contains(fragment), "\(body): \(response.errorMessage)")
            }
            let information = try await client.call(
                .post, "/message", headers(herald.communicator),
                json: js(["title": "Open late", "desc": "", "message": "until 22:00", "topic_key": h.info, "distribution": "Information"]))
            #expect(information.status == .created, "an empty desc is fine for Information")
            let valid = js(["title": "t", "desc": "d", "topic_key": h.forced, "distribution": "Alert"])
            #expect(try await client.call(.post, "/message", headers(user), json: valid).status == .forbidden, "a user token cannot post messages")
            #expect(try await client.call(.post, "/message", headers(herald.backend), json: valid).status == .forbidden)
            #expect(try await client.call(.get, "/message", headers(herald.backend)).status == .forbidden)
            #expect(try await client.call(.get, "/message?limit=0", headers(herald.admin)).status == .badRequest)
        }
    }

    /// Four users with a device each; loud, muted (push off) and picky (no `hot`) subscribe to the
    /// opt-in subject, which is then sent a `hot` notification for them: accepted for all three.
    static func sendHotToSubscribersWithSettings(_ client: any TestClientProtocol, _ herald: TestHerald) async throws -> (Hierarchy, TestResponse) {
        let h = try await Hierarchy.build(client, admin: herald.admin)
        for user in ["loud", "muted", "picky", "outsider"] {
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: js(["fcm_token": "t-\(user)"]))
        }
        for user in ["loud", "muted", "picky"] {
            _ = try await client.call(.put, "/api/notifications/subscriptions/\(h.optIn)", headers(herald.backend, user: user))
        }
        _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "muted"), json: js(["enabled": false]))
        _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "picky"), json: js(["types": ["hot": false]]))
        let sent = try await client.call(
            .post, "/api/notifications", headers(herald.backend), json: js(["type": "hot", "title": "Tickets", "topic": h.optIn]))
        #expect(sent.status == .accepted, "\(String(buffer: sent.body))")
        #expect(sent.object["recipients"] as? Int == 3, "the count at accept time")
        return (h, sent)
    }

    /// Once that notification is delivered: loud's device alone got the push, and every
    /// subscriber has it in history, whatever their settings.
    static func expectEverySubscribersSettingsApplied(_ client: any TestClientProtocol, _ herald: TestHerald) async throws {
        try await herald.deliver()
        #expect(herald.push.received.compactMap(\.recipient.device?.token) == ["t-loud"], "every subscriber's settings apply")
        for user in ["loud", "muted", "picky"] {
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: user))
            #expect((history.object["history"] as? [Any])?.count == 1, "\(user) has it in history")
        }
    }

    @Test func topicNotificationsRespectEverySubscribersSettings() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let (h, _) = try await Self.sendHotToSubscribersWithSettings(client, herald)
            try await Self.expectEverySubscribersSettingsApplied(client, herald)
            let outsider = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "outsider"))
            #expect((outsider.object["history"] as? [Any])?.isEmpty == true)

            // The subject's distribution is the default; unknown topics are 404.
            let info = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: js(["type": "generic", "title": "Hours", "topic": h.info]))
            let id = try #require(info.object["id"] as? String)
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
            #expect((status.object["notification"] as? [String: Any])?["distribution"] as? String == "information")
            let missing = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: js(["type": "generic", "title": "x", "topic": "62505215624257b417055bc4-62505215624257b417055bc4-62505215624257b417055bc4"]))
            #expect(missing.status == .notFound)
        }
    }

    /// Above `fanout.inline_limit` the 202 commits the notification, its count and a cursor; the
    /// rows follow from the fan-out service, with the same settings applied, and the status
    /// shows the progress. Message Hub messages take the same path.
    @Test func largeFanOutsAreWrittenAfterTheAcceptWithVisibleProgress() async throws {
        let herald = try await TestHerald.make { $0.fanOutInlineLimit = 2 }
        /// `fan_out` as "state written/recipients".
        @Sendable func progress(_ status: [String: Any]) -> String? {
            guard let fanOut = status["fan_out"] as? [String: Any] else { return nil }
            return "\(fanOut["state"] as? String ?? "?") \(fanOut["written"] as? Int ?? -1)/\(fanOut["recipients"] as? Int ?? -1)"
        }
        try await herald.test { client in
            let (h, sent) = try await Self.sendHotToSubscribersWithSettings(client, herald)
            let id = try #require(sent.object["id"] as? String)
            let accepted = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
            #expect(progress(accepted.object) == "writing 0/3")
            #expect((accepted.object["deliveries"] as? [Any])?.isEmpty == true, "nothing is written with the accept")

            try await herald.server.fanOut.drain()
            let written = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
            #expect(progress(written.object) == "done 3/3")
            try await Self.expectEverySubscribersSettingsApplied(client, herald)

            // Forced: every user Herald knows (the four registered), written later.
            let post = try await client.call(
                .post, "/message", headers(herald.communicator),
                json: js(["title": "Fire drill", "desc": "Leave", "message": "Now", "topic_key": h.forced, "distribution": "Alert"]))
            #expect(post.status == .created, "\(String(buffer: post.body))")
            let msi = try #require(post.object["msi_key"] as? String)
            #expect(progress(try await client.call(.get, "/api/notifications/\(msi)", headers(herald.admin)).object) == "writing 0/4")
            try await herald.server.fanOut.drain()
            for user in ["loud", "muted", "picky", "outsider"] {
                let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: user))
                let titles = (history.object["history"] as? [[String: Any]] ?? []).compactMap { ($0["notification"] as? [String: String])?["title"] }
                #expect(titles.first == "Fire drill", "\(user): \(titles)")
            }

            // At or below the limit nothing changes: no fan_out, every row with the 202.
            let small = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: js(["type": "generic", "title": "Hours", "topic": h.info]))
            let smallID = try #require(small.object["id"] as? String)
            #expect(try await client.call(.get, "/api/notifications/\(smallID)", headers(herald.backend)).object["fan_out"] == nil)
        }
    }
}
