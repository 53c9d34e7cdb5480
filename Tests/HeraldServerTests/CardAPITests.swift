import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// The cards API end to end through the router (docs/cards.md).
@Suite(.cleansUp) struct CardAPITests {
    static func card(_ minutes: Int, hot: Double = 0.5) -> [String: Any] {
        ["metadata": ["title": "t\(minutes)"], "posted_at": "2026-11-0\(1 + minutes % 8)T10:00:00Z", "hot": hot]
    }

    @Test func cardsAreStoredWithCreatedOrReplacedAndBadInputNamesTheField() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let key = headers(herald.backend)
            #expect(try await client.call(.put, "/api/cards/a1", key, json: Self.card(1)).status == .created)
            let again = try await client.call(.put, "/api/cards/a1", key, json: Self.card(2))
            #expect(again.status == .ok)
            #expect(again.object["id"] as? String == "a1")
            let bulk = try await client.call(
                .post, "/api/cards", key, json: ["cards": [["id": "a1"].merging(Self.card(3)) { a, _ in a }, ["id": "b2"].merging(Self.card(4)) { a, _ in a }]])
            #expect(bulk.status == .ok)
            #expect(bulk.object["created"] as? [String] == ["b2"])
            #expect(try await client.call(.delete, "/api/cards/b2", key).status == .noContent)
            #expect(try await client.call(.delete, "/api/cards/zz", key).status == .notFound)

            let bad: [(String, Any, String)] = [
                ("/api/cards/a1", ["posted_at": "2026-11-01T10:00:00Z"], "metadata"),
                ("/api/cards/a1", ["metadata": [:], "posted_at": "yesterday"], "posted_at"),
                ("/api/cards/a1", ["metadata": ["x": String(repeating: "y", count: 17_000)], "posted_at": "2026-11-01T10:00:00Z"], "metadata"),
                ("/api/cards/a%20b", Self.card(1), "id"),
                ("/api/cards/a1", ["metadata": [:], "posted_at": "2026-11-01T10:00:00Z", "colour": 1], "colour"),
            ]
            for (path, body, field) in bad {
                let response = try await client.call(.put, path, key, json: body)
                #expect([413, 422].contains(response.status.code), "\(path) \(body)")
                #expect(response.errorMessage.contains(field) || response.status == .contentTooLarge, "\(response.errorMessage)")
            }
            let user = try await herald.userToken("u")
            #expect(try await client.call(.put, "/api/cards/a1", headers(user), json: Self.card(1)).status == .forbidden)
            #expect(try await client.call(.put, "/api/cards/a1", headers(), json: Self.card(1)).status == .unauthorized)
        }
    }

    @Test func scoresInJSONAndNDJSONAnswerWhatHappenedToEachEntry() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let key = headers(herald.backend)
            for id in ["c1", "c2", "c3"] { _ = try await client.call(.put, "/api/cards/\(id)", key, json: Self.card(1)) }
            _ = try await client.call(
                .post, "/api/pool/seen", headers(herald.backend, user: "u1"), json: ["seen": [["card": "c3", "at": "2026-11-02T00:00:00Z"]]])
            let json = try await client.call(
                .post, "/api/pool/scores", key,
                json: ["timestamp": 100, "users": ["u1": ["c1": 0.9, "c2": 0.2, "c3": 0.5, "nope": 1], "bad user": ["c1": 1]]]
            )
            #expect(json.status == .ok, "\(String(buffer: json.body))")
            #expect(json.object["applied"] as? Int == 2)
            #expect(json.object["ignored_seen"] as? Int == 1)
            let rejected = json.object["rejected"] as? [[String: String]] ?? []
            #expect(rejected.contains(["user_id": "u1", "card": "nope", "reason": "unknown_card"]))
            #expect(rejected.contains(["user_id": "bad user", "card": "c1", "reason": "invalid_user_id"]))

            var lines = ""
            for user in 0..<200 {
                for card in ["c1", "c2"] { lines += #"{"user_id":"n\#(user)","card":"\#(card)","score":0.\#(user % 9),"timestamp":5}"# + "\n" }
            }
            lines += #"{"user_id":"u1","card":"c1","score":0.1,"timestamp":50}"# // older than 100: stale
            let ndjson = try await client.call(.post, "/api/pool/scores", headers(herald.backend, contentType: "application/x-ndjson"), json: lines)
            #expect(ndjson.status == .ok, "\(String(buffer: ndjson.body))")
            #expect(ndjson.object["applied"] as? Int == 400)
            #expect(ndjson.object["stale"] as? Int == 1)
            let broken = try await client.call(
                .post, "/api/pool/scores", headers(herald.backend, contentType: "application/x-ndjson"),
                json: #"{"user_id":"a","card":"c1","score":1,"timestamp":1}"# + "\n" + #"{"user_id":"a","card":"c1","score":"high","timestamp":1}"#
            )
            #expect(broken.status == .unprocessableContent)
            #expect(broken.errorMessage.contains("line 2") && broken.errorMessage.contains("score"), "\(broken.errorMessage)")
            // A member a line should not have is refused, as in a JSON body (it was ignored).
            let extra = try await client.call(
                .post, "/api/pool/scores", headers(herald.backend, contentType: "application/x-ndjson"),
                json: #"{"user_id":"a","card":"c1","score":1,"timestamp":1}"# + "\n" + #"{"user_id":"a","card":"c1","score":1,"timestamp":1,"scores":2}"#
            )
            #expect(extra.status == .unprocessableContent && extra.errorMessage.contains("line 2: unknown field 'scores'"), "\(extra.errorMessage)")
            let endless = try await client.call(
                .post, "/api/pool/scores", headers(herald.backend, contentType: "application/x-ndjson"), json: String(repeating: " ", count: 10_000)
            )
            #expect(endless.status == .unprocessableContent && endless.errorMessage.contains("line 1"), "a line without end is refused, not buffered")
            // NDJSON is read as UTF-8: another charset is refused, not read as UTF-8; the type's case does not matter.
            let latin1 = try await client.call(
                .post, "/api/pool/scores", headers(herald.backend, contentType: "application/x-ndjson; charset=latin1"),
                json: #"{"user_id":"a","card":"c1","score":1,"timestamp":1}"#)
            #expect(latin1.status == .unsupportedMediaType && latin1.errorMessage.contains("charset=latin1"), "\(latin1.errorMessage)")
            let upper = try await client.call(
                .post, "/api/pool/scores", headers(herald.backend, contentType: "Application/X-NDJSON; charset=utf8"),
                json: #"{"user_id":"n1","card":"c1","score":0.5,"timestamp":6}"#)
            #expect(upper.status == .ok && upper.object["applied"] as? Int == 1, "\(String(buffer: upper.body))")
            let missing = try await client.call(.post, "/api/pool/scores", key, json: ["users": [:]])
            #expect(missing.status == .unprocessableContent && missing.errorMessage.contains("timestamp"))
        }
    }

    @Test func pullSendsEverythingThenChangesAndAnswers304ForTheCurrentKey() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let key = headers(herald.backend)
            for (index, id) in ["c1", "c2", "c3"].enumerated() { _ = try await client.call(.put, "/api/cards/\(id)", key, json: Self.card(index)) }
            _ = try await client.call(.post, "/api/pool/scores", key, json: ["timestamp": 1, "users": ["u": ["c1": 0.2, "c2": 0.9, "c3": 0.5]]])
            let user = headers(try await herald.userToken("u"))

            let full = try await client.call(.get, "/api/pull?mode=hot", user)
            #expect(full.status == .ok)
            #expect(full.object["full"] as? Bool == true)
            let text = String(buffer: full.body)
            let order = ["\"c2\":0.9", "\"c3\":0.5", "\"c1\":0.2"].map { text.range(of: $0)?.lowerBound }
            #expect(order.allSatisfy { $0 != nil } && order.compactMap { $0 } == order.compactMap { $0 }.sorted(), "hot: by score, as written: \(text)")
            let recent = String(buffer: try await client.call(.get, "/api/pull?mode=recent", user).body)
            let byDate = ["\"c3\":0.5", "\"c2\":0.9", "\"c1\":0.2"].compactMap { recent.range(of: $0)?.lowerBound }
            #expect(byDate.count == 3 && byDate == byDate.sorted(), "recent: newest posted first: \(recent)")
            let cacheKey = try #require(full.object["cache_key"] as? String)
            #expect(full.headers[.eTag] == "\"\(cacheKey)\"")
            #expect((full.object["cards"] as? [String: Any])?.keys.sorted() == ["c1", "c2", "c3"])
            #expect((full.object["user"] as? [String: Any])?["unread"] as? Int == 0)

            var conditional = user
            conditional[.ifNoneMatch] = "\"\(cacheKey)\""
            #expect(try await client.call(.get, "/api/pull?cache_key=\(cacheKey)", conditional).status == .notModified)

            _ = try await client.call(.post, "/api/pool/seen", user, json: ["seen": [["card": "c2", "at": "2026-11-02T00:00:00Z"]]])
            #expect(try await client.call(.get, "/api/pull?cache_key=\(cacheKey)", conditional).status == .ok, "the key changed")
            let delta = try await client.call(.get, "/api/pull?cache_key=\(cacheKey)", user)
            #expect(delta.object["full"] as? Bool == false)
            #expect(delta.object["pool_removed"] as? [String] == ["c2"])
            #expect(delta.object["history"] as? [[String: String]] == [["index": "0", "card": "c2"]])
            #expect((delta.object["pool"] as? [String: Any])?.isEmpty == true)

            // Settings are part of the answer, so of the key.
            let before = try #require(delta.object["cache_key"] as? String)
            _ = try await client.call(.patch, "/api/notifications/settings", user, json: ["enabled": false])
            let after = try await client.call(.get, "/api/pull?cache_key=\(before)", user)
            #expect(after.object["cache_key"] as? String != before)

            // A notification reaching the user's history changes the key too, and comes with the changes.
            let beforeNotification = try #require(after.object["cache_key"] as? String)
            var stillCurrent = user
            stillCurrent[.ifNoneMatch] = "\"\(beforeNotification)\""
            #expect(try await client.call(.get, "/api/pull", stillCurrent).status == .notModified)
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "Hi", "body": "b", "user_ids": ["u"]])
            #expect(sent.status == .accepted)
            try await herald.deliver()
            let withNotification = try await client.call(.get, "/api/pull?cache_key=\(beforeNotification)", stillCurrent)
            #expect(withNotification.status == .ok)
            let items = withNotification.object["notifications"] as? [[String: Any]] ?? []
            #expect(items.count == 1 && (items.first?["notification"] as? [String: String])?["title"] == "Hi")
            #expect((withNotification.object["user"] as? [String: Any])?["unread"] as? Int == 1)
            let next = try #require(withNotification.object["cache_key"] as? String)
            #expect((try await client.call(.get, "/api/pull?cache_key=\(next)", user).object["notifications"] as? [Any])?.isEmpty == true, "only newer ones")

            // `unread` is the inbox's badge: an unread item archived leaves it, and the key moves.
            let id = try #require(sent.object["id"] as? String)
            #expect(try await client.call(.post, "/api/inbox/mark", user, json: ["ids": [id], "change": "archived"]).status == .ok)
            var stillNext = user
            stillNext[.ifNoneMatch] = "\"\(next)\""
            let archived = try await client.call(.get, "/api/pull?cache_key=\(next)", stillNext)
            #expect(archived.status == .ok && (archived.object["user"] as? [String: Any])?["unread"] as? Int == 0, "\(archived.object)")
            let badge = try await client.call(.get, "/api/inbox/counts", user)
            #expect(badge.object["unread"] as? Int == 0)

            #expect(try await client.call(.get, "/api/pull?cache_key=garbage", user).object["full"] as? Bool == true, "an unknown key gets everything")
            let otherUsers = try await client.call(.get, "/api/pull?cache_key=\(before)", headers(try await herald.userToken("someone-else")))
            #expect(otherUsers.object["full"] as? Bool == true, "another user's key is unknown")
            #expect(try await client.call(.get, "/api/pull?mode=cold", user).status == .unprocessableContent)
            #expect(try await client.call(.get, "/api/pull?limit=0", user).status == .unprocessableContent)
            #expect(try await client.call(.get, "/api/pull?limit=1", user).status == .ok)
        }
    }

    @Test func promoteTakesTheTopCardAnd204WhenThePoolIsEmpty() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let key = headers(herald.backend)
            for id in ["c1", "c2"] { _ = try await client.call(.put, "/api/cards/\(id)", key, json: Self.card(1)) }
            _ = try await client.call(.post, "/api/pool/scores", key, json: ["timestamp": 1, "users": ["u": ["c1": 0.2, "c2": 0.9]]])
            let user = headers(try await herald.userToken("u"))
            let first = try await client.call(.post, "/api/pool/promote", user)
            #expect(first.object["card"] as? String == "c2")
            #expect(first.object["index"] as? String == "0")
            #expect((first.object["metadata"] as? [String: String]) == ["title": "t1"])
            #expect(try await client.call(.post, "/api/pool/promote", user).object["index"] as? String == "1")
            #expect(try await client.call(.post, "/api/pool/promote", user).status == .noContent)
            let unknown = try await client.call(.post, "/api/pool/seen", user, json: ["seen": [["card": "never", "at": "2026-11-02T00:00:00Z"]]])
            #expect(unknown.status == .unprocessableContent && unknown.errorCode == "unknown_card")
            let noDate = try await client.call(.post, "/api/pool/seen", user, json: ["seen": [["card": "c1"]]])
            #expect(noDate.status == .unprocessableContent && noDate.errorMessage.contains("seen[0].at"))
        }
    }

    @Test func eventsAreAcceptedOnceCountedAndSummarisedPerCard() async throws {
        let analytics = RecordingSink(name: "analytics", capabilities: [.events])
        let herald = try await TestHerald.make(extraSinks: [analytics])
        try await herald.test { client in
            _ = try await client.call(.put, "/api/cards/c1", headers(herald.backend), json: Self.card(1))
            let user = headers(try await herald.userToken("u"))
            let events: [[String: Any]] = [
                ["event_id": "e1", "type": "reaction", "reaction": "ctfo", "card": "c1", "at": "2026-11-02T00:00:00Z"],
                ["event_id": "e2", "type": "focus", "card": "c1", "at": "2026-11-02T00:00:01Z"],
                ["event_id": "e3", "type": "track", "name": "opened", "properties": ["screen": "home"], "at": "2026-11-02T00:00:02Z"],
                ["event_id": "e4", "type": "identify", "at": "2026-11-02T00:00:03Z"],
            ]
            let first = try await client.call(.post, "/api/events", user, json: ["events": events])
            #expect(first.status == .accepted)
            #expect(first.object["accepted"] as? Int == 4)
            let retry = try await client.call(.post, "/api/events", user, json: ["events": events])
            #expect(retry.object["accepted"] as? Int == 0 && retry.object["duplicates"] as? Int == 4)
            let stats = try await client.call(.get, "/api/events/stats?card=c1", headers(herald.backend))
            #expect(stats.object["reactions"] as? [String: Int] == ["ctfo": 1, "tfu": 0, "tifb": 0])
            #expect(stats.object["focus"] as? Int == 1)
            #expect(try await client.call(.get, "/api/events/stats?card=c1", user).status == .forbidden)
            for query in ["", "?card=", "?card=a%20b"] {
                let bad = try await client.call(.get, "/api/events/stats\(query)", headers(herald.backend))
                #expect(bad.status == .unprocessableContent && bad.errorMessage.contains("card"), "\(query): \(bad.errorMessage)")
            }
            let pull = try await client.call(.get, "/api/pull", user)
            #expect(pull.object["history"] as? [[String: String]] == [["index": "0", "card": "c1"]], "a reaction marks its card seen")

            let bad: [([String: Any], String)] = [
                (["event_id": "x", "type": "click", "at": "2026-11-02T00:00:00Z"], "events[0].type"),
                (["event_id": "x", "type": "reaction", "reaction": "meh", "card": "c1", "at": "2026-11-02T00:00:00Z"], "events[0].reaction"),
                (["event_id": "x", "type": "track", "at": "2026-11-02T00:00:00Z"], "events[0].name"),
                (["type": "focus", "at": "2026-11-02T00:00:00Z"], "events[0].event_id"),
                (["event_id": "x", "type": "focus"], "events[0].at"),
            ]
            for (event, field) in bad {
                let response = try await client.call(.post, "/api/events", user, json: ["events": [event]])
                #expect(response.status == .unprocessableContent && response.errorMessage.contains(field), "\(field): \(response.errorMessage)")
            }
            // Sinks that take events get each stored event once: duplicates are not forwarded.
            for _ in 0..<100 where analytics.events.count < 4 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(analytics.events.map(\.eventID).sorted() == ["e1", "e2", "e3", "e4"])
            #expect(analytics.events.first { $0.eventID == "e3" }?.properties == ["screen": .string("home")])
            #expect(herald.push.events.isEmpty, "a sink without the events capability gets none")
            let metrics = String(buffer: try await client.call(.get, "/metrics", headers(herald.admin)).body)
            #expect(metrics.contains(#"herald_events_total{type="reaction"} 1"#), "\(metrics.prefix(200))")
        }
    }

    /// Engagement events are the one store an app's user (or anyone, with anonymous sign-up)
    /// could otherwise grow without bound: a user token may post `events.max_per_user_per_hour`.
    @Test func eventsFromAUserTokenAreLimitedPerHourAndDuplicatesAreNotCounted() async throws {
        let herald = try await TestHerald.make { $0.eventsPerUserPerHour = 500 }
        try await herald.test { client in
            func batch(_ range: Range<Int>) -> [String: Any] {
                ["events": range.map { ["event_id": "e\($0)", "type": "focus", "at": "2026-11-02T00:00:00Z"] }]
            }
            let user = headers(try await herald.userToken("u"))
            let first = try await client.call(.post, "/api/events", user, json: batch(0..<200))
            #expect(first.status == .accepted && first.object["accepted"] as? Int == 200)
            let resent = try await client.call(.post, "/api/events", user, json: batch(0..<200))
            #expect(resent.status == .accepted && resent.object["duplicates"] as? Int == 200)
            let rest = try await client.call(.post, "/api/events", user, json: batch(200..<500))
            #expect(rest.status == .accepted && rest.object["accepted"] as? Int == 300, "the resent batch's duplicates were given back")

            let over = try await client.call(.post, "/api/events", user, json: batch(500..<510))
            #expect(over.status == .tooManyRequests && over.errorCode == "rate_limited", "\(String(buffer: over.body))")
            #expect(over.errorMessage.contains("500") && over.errorMessage.contains("none of these 10"), "\(over.errorMessage)")
            let wait = try #require(Int(over.headers[.retryAfter] ?? ""))
            #expect((60...80).contains(wait), "10 more at 500 an hour: 72 s, got \(wait)")

            let other = try await client.call(.post, "/api/events", headers(try await herald.userToken("v")), json: batch(0..<500))
            #expect(other.status == .accepted && other.object["accepted"] as? Int == 500, "each user has an allowance of their own")
            // A key acting for the user is the operator's own backend: not counted. The refused
            // batch was not stored, so all 300 are new.
            let relayed = try await client.call(.post, "/api/events", headers(herald.backend, user: "u"), json: batch(500..<800))
            #expect(relayed.status == .accepted && relayed.object["accepted"] as? Int == 300)
        }
    }

    @Test func theEventLimitIsReadAndBoundedByOneFullBatch() async throws {
        #expect(try await HeraldConfiguration.load(configFile: nil, environment: [:]).eventsPerUserPerHour == 20_000)
        let set = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_EVENTS_MAX_PER_USER_PER_HOUR": "600"])
        #expect(set.eventsPerUserPerHour == 600)
        for value in ["499", "0", "-1", "1000000001", "lots", "1e30"] {
            do {
                _ = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_EVENTS_MAX_PER_USER_PER_HOUR": value])
                Issue.record("\(value) was accepted")
            } catch let error as HeraldError {
                #expect(error.message.contains("events.max_per_user_per_hour"), "\(value): \(error.message)")
            }
        }
    }

    @Test func devicesSignInWithProofOrAnonymouslyWhenEnabledAndRateLimited() async throws {
        let closed = try await TestHerald.make()
        try await closed.test { client in
            let anonymous = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "d1", "platform": "ios", "app_version": "1.0"])
            #expect(anonymous.status == .forbidden && anonymous.errorCode == "sign_up_disabled")
            let proof = try await closed.userToken("alice")
            let proven = try await client.call(
                .post, "/api/auth/device", headers(), json: ["device_id": "d1", "platform": "ios", "user_id": "alice", "proof": proof])
            #expect(proven.status == .ok, "\(String(buffer: proven.body))")
            #expect(proven.object["user_id"] as? String == "alice")
            let token = try #require(proven.object["token"] as? String)
            #expect(try await client.call(.get, "/api/pull", headers(token)).status == .ok, "the token is a user token")
            #expect(proven.object["cache_key"] is String)
            let mismatch = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "d1", "user_id": "bob", "proof": proof])
            #expect(mismatch.status == .forbidden)
            let forged = try await closed.userToken("alice", secret: "another-secret-that-is-long-enough-000")
            #expect(try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "d1", "proof": forged]).status == .unauthorized)
            #expect(try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "d1", "user_id": "alice"]).status == .unauthorized)
            #expect(try await client.call(.post, "/api/auth/device", headers(), json: ["platform": "ios"]).status == .unprocessableContent)
            let longPlatform = try await client.call(
                .post, "/api/auth/device", headers(), json: ["device_id": "d1", "platform": String(repeating: "p", count: 65), "proof": proof])
            #expect(longPlatform.status == .unprocessableContent && longPlatform.errorMessage.contains("platform"))
            let badDevice = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "has space", "proof": proof])
            #expect(badDevice.status == .unprocessableContent && badDevice.errorMessage.contains("device_id"))
        }
        let open = try await TestHerald.make {
            $0.deviceSignUp = true
            $0.deviceSignUpsPerMinute = 3
        }
        try await open.test { client in
            var users: [String] = []
            var secret: String?
            for _ in 0..<3 {
                var body: [String: Any] = ["device_id": "phone-1-0123456789", "platform": "android"]
                if let secret { body["device_secret"] = secret }
                let response = try await client.call(.post, "/api/auth/device", headers(), json: body)
                #expect(response.status == .ok, "\(String(buffer: response.body))")
                users.append(response.object["user_id"] as? String ?? "")
                secret = secret ?? response.object["device_secret"] as? String
            }
            #expect(Set(users).count == 1 && users[0].hasPrefix("dev_"), "the same device gets the same user: \(users)")
            for n in 2...3 {
                let other = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "phone-\(n)-0123456789", "platform": "android"])
                #expect(other.status == .ok, "sign-ups with a secret did not count against the limit")
            }
            let limited = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "phone-4-0123456789", "platform": "android"])
            #expect(limited.status == .tooManyRequests)
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
        }
    }
}
