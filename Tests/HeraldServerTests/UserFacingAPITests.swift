import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@Suite(.cleansUp) struct UserFacingAPITests {
    /// `timestamps: rfc3339` switches history items (and push data) to the `…Z` form.
    @Test func theRFC3339OptionAddsTheOffset() async throws {
        let herald = try await TestHerald.make { $0.timestamps = .rfc3339 }
        try await herald.test { client in
            _ = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "like", "title": "t", "body": "b", "user_ids": ["u1"]])
            try await herald.deliver()
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u1"))
            let item = try #require((history.object["history"] as? [[String: Any]])?.first)
            let timestamp = try #require((item["data"] as? [String: Any])?["timestamp"] as? String)
            #expect(timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"#, options: .regularExpression) != nil, "\(timestamp)")
            #expect((item["data"] as? [String: Any])?["type"] as? String == "like", "like is a built-in type")
        }
        let bad = await #expect(throws: HeraldError.self) { _ = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_TIMESTAMPS": "iso"]) }
        #expect(bad?.message.hasPrefix("timestamps") == true)
    }

    @Test func registerSendHistoryRoundTripHasTheExactItemShape() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let register = try await client.call(
                .post, "/api/notifications/register", headers(herald.backend, user: "u1"), json: ["fcm_token": "tok-1", "platform": "android"])
            #expect(register.status == .ok)
            #expect(register.object["fcm_token"] as? String == "tok-1")
            let deviceID = try #require(register.object["device_id"] as? String)
            #expect(ObjectID(deviceID) != nil)
            let again = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u1"), json: ["fcm_token": "tok-1"])
            #expect(again.object["device_id"] as? String == deviceID, "registration is idempotent")

            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: [
                    "type": "upvote", "title": "Your post got an upvote", "body": "Someone liked it", "url": "/posts/DKJW", "user_ids": ["u1"],
                ])
            #expect(send.status == .accepted)
            #expect(send.object["recipients"] as? Int == 1)
            let id = try #require(send.object["id"] as? String)
            try await herald.deliver()
            #expect(herald.push.received.map(\.recipient.device?.token) == ["tok-1"])

            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u1", contentType: nil))
            #expect(history.status == .ok)
            #expect(Set(history.object.keys) == ["history", "next"])
            #expect(history.object["next"] is NSNull)
            let items = try #require(history.object["history"] as? [[String: Any]])
            let item = try #require(items.first)
            #expect(Set(item.keys) == ["notification", "data", "read"])
            let notification = try #require(item["notification"] as? [String: Any])
            #expect(Set(notification.keys) == ["title", "body"])
            #expect(notification["title"] as? String == "Your post got an upvote")
            #expect(notification["body"] as? String == "Someone liked it")
            let data = try #require(item["data"] as? [String: Any])
            #expect(Set(data.keys) == ["id", "timestamp", "type", "url"])
            #expect(data["id"] as? String == id)
            #expect(data["type"] as? String == "upvote")
            #expect(data["url"] as? String == "https://pong.example/posts/DKJW")
            let timestamp = try #require(data["timestamp"] as? String)
            // Pong parses 2022-04-08T15:17:41.900560: UTC, six fractional digits, no offset.
            #expect(timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$"#, options: .regularExpression) != nil, "\(timestamp)")
            #expect(item["read"] as? Bool == false)
            let raw = String(buffer: history.body)
            #expect(raw.contains("https://pong.example/posts/DKJW"), "URLs are not slash-escaped: \(raw)")
        }
    }

    @Test func nullURLStaysNull() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "generic", "title": "t", "url": NSNull(), "user_ids": ["u"]])
            try await herald.deliver()
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u"))
            let data = try #require(((history.object["history"] as? [[String: Any]])?.first)?["data"] as? [String: Any])
            #expect(data["url"] is NSNull)
        }
    }

    @Test func unregisterStopsPushes() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            let remove = try await client.call(.delete, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            #expect(remove.status == .noContent)
            let removeAgain = try await client.call(.delete, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            #expect(removeAgain.status == .noContent, "idempotent")
            _ = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "hot", "title": "t", "user_ids": ["u"]])
            try await herald.deliver()
            #expect(herald.push.received.isEmpty)
        }
    }

    @Test func settingsReadPatchAndApply() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let initial = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "u"))
            #expect(initial.status == .ok)
            #expect(initial.object["enabled"] as? Bool == true)
            #expect(initial.object["delivery"] as? String == "push")
            #expect((initial.object["types"] as? [String: Any])?.isEmpty == true)
            #expect(initial.object["quiet_hours"] is NSNull)
            #expect(initial.object["timezone"] is NSNull, "no zone given: UTC")

            let patched = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "u"),
                json: [
                    "types": ["upvote": false], "quiet_hours": ["start": "22:00", "end": "07:00", "tz": "America/Toronto"],
                ])
            #expect(patched.status == .ok)
            #expect((patched.object["types"] as? [String: Bool]) == ["upvote": false])
            #expect((patched.object["quiet_hours"] as? [String: String])?["tz"] == "America/Toronto")
            #expect(patched.object["enabled"] as? Bool == true, "fields not given are kept")

            let cleared = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "u"), json: ["quiet_hours": NSNull(), "delivery": "pull"])
            #expect(cleared.object["quiet_hours"] is NSNull)
            #expect(cleared.object["delivery"] as? String == "pull")

            // A zone, and a window without its own: stored as sent, the window read in the zone.
            let zoned = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "u"),
                json: ["timezone": "Asia/Tokyo", "quiet_hours": ["start": "22:00", "end": "07:00"]])
            #expect(zoned.status == .ok, "\(zoned.object)")
            #expect(zoned.object["timezone"] as? String == "Asia/Tokyo")
            #expect((zoned.object["quiet_hours"] as? [String: String]) == ["start": "22:00", "end": "07:00"])
            let unzoned = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "u"), json: ["timezone": NSNull(), "quiet_hours": NSNull()])
            #expect(unzoned.object["timezone"] is NSNull && unzoned.object["quiet_hours"] is NSNull)
            #expect((cleared.object["types"] as? [String: Bool]) == ["upvote": false])

            // delivery=pull: no push, but history is still written.
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: ["fcm_token": "t"])
            _ = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "hot", "title": "t", "user_ids": ["u"]])
            try await herald.deliver()
            #expect(herald.push.received.isEmpty)
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u"))
            #expect((history.object["history"] as? [Any])?.count == 1)
        }
    }

    @Test func invalidSettingsAreRefusedAndChangeNothing() async throws {
        let herald = try await TestHerald.make()
        let cases: [(String, Int, String)] = [
            (js(["delivery": "fax"]), 422, "delivery"),
            (js(["enabled": "yes"]), 422, "enabled"),
            (js(["types": ["nope": false]]), 400, "nope"),
            (js(["types": ["upvote": "off"]]), 422, "types.upvote"),
            (js(["quiet_hours": ["start": "22:00", "end": "07:00", "tz": "Nowhere/City"]]), 422, "quiet_hours.tz"),
            (js(["quiet_hours": ["start": "24:00", "end": "07:00", "tz": "UTC"]]), 422, "quiet_hours.start"),
            (js(["quiet_hours": ["start": "+1:00", "end": "07:00", "tz": "UTC"]]), 422, "quiet_hours.start"),
            (js(["quiet_hours": ["start": "22:00", "end": "07:-0", "tz": "UTC"]]), 422, "quiet_hours.end"),
            (js(["quiet_hours": ["start": "٢٢:00", "end": "07:00", "tz": "UTC"]]), 422, "quiet_hours.start"),
            (js(["quiet_hours": ["start": "22:00", "tz": "UTC"]]), 422, "end"),
            (js(["timezone": "Mars/Olympus"]), 422, "'timezone'"),
            (js(["timezone": String(repeating: "A", count: 65)]), 422, "'timezone'"),
            (js(["timezone": 3]), 422, "timezone"),
            (js(["enabld": false]), 422, "enabld"),
            (js([1, 2]), 400, "JSON object"),
        ]
        try await herald.test { client in
            for (body, status, fragment) in cases {
                let response = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "u"), json: body)
                #expect(response.status.code == status, "\(body): \(response.status)")
                #expect(response.errorMessage.contains(fragment), "\(body): \(response.errorMessage)")
            }
            let settings = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "u"))
            #expect(settings.object["delivery"] as? String == "push")
            #expect(settings.object["enabled"] as? Bool == true)
        }
    }

    @Test func historyPagesNewestFirstWithoutGapsOrRepeats() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            var sent: [String] = []
            for i in 0..<23 {
                let response = try await client.call(
                    .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "n\(i)", "user_ids": ["pager"]])
                sent.append(try #require(response.object["id"] as? String))
            }
            try await herald.deliver()
            var seen: [String] = []
            var uri = "/api/notifications/history?limit=10"
            var pages = 0
            while pages < 10 {
                let page = try await client.call(.get, uri, headers(herald.backend, user: "pager"))
                #expect(page.status == .ok)
                let items = try #require(page.object["history"] as? [[String: Any]])
                seen.append(contentsOf: items.compactMap { ($0["data"] as? [String: Any])?["id"] as? String })
                pages += 1
                guard let next = page.object["next"] as? String else { break }
                uri = "/api/notifications/history?limit=10&before=\(next)"
            }
            #expect(pages == 3)
            #expect(seen == sent.reversed())
        }
    }

    @Test(arguments: ["limit=0", "limit=201", "limit=ten", "before=abc", "before=-5"])
    func badHistoryQueriesAre400(_ query: String) async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(.get, "/api/notifications/history?\(query)", headers(herald.backend, user: "u"))
            #expect(response.status == .badRequest)
            #expect(response.errorCode != nil)
        }
    }

    @Test func readReceiptsReturnTheUnreadCount() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            var ids: [String] = []
            for _ in 0..<3 {
                let response = try await client.call(
                    .post, "/api/notifications", headers(herald.backend), json: ["type": "reply", "title": "t", "user_ids": ["r"]])
                ids.append(try #require(response.object["id"] as? String))
            }
            try await herald.deliver()
            let read = try await client.call(.post, "/api/notifications/read", headers(herald.backend, user: "r"), json: ["ids": [ids[0], ids[2]]])
            #expect(read.status == .ok)
            #expect(read.object["unread"] as? Int == 1)
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "r"))
            let flags = (history.object["history"] as? [[String: Any]])?.compactMap { $0["read"] as? Bool }
            #expect(flags == [true, false, true])
            let bad = try await client.call(.post, "/api/notifications/read", headers(herald.backend, user: "r"), json: ["ids": ["nope"]])
            #expect(bad.status == .unprocessableContent)
            #expect(bad.errorMessage.contains("ids[0]"))
        }
    }

    @Test func registerValidatesTheToken() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for body in [
                js([String: Any]()), js(["fcm_token": ""]), js(["fcm_token": 42]), js(["fcm_token": "has space"]),
                js(["fcm_token": String(repeating: "x", count: 5000)]),
            ] {
                let response = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: body)
                #expect(response.status == .unprocessableContent, "\(body)")
                #expect(response.errorMessage.contains("fcm_token"))
            }
        }
    }
}
