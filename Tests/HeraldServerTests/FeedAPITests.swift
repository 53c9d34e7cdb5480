import Foundation
import HTTPTypes
import HeraldCore
import HeraldFeed
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@Suite(.cleansUp) struct FeedAPITests {
    func post(_ client: any TestClientProtocol, _ admin: String, _ fields: [String: Any]) async throws -> String {
        var body: [String: Any] = ["title": "t", "body": "b", "expires_at": Timestamp.format(Date().addingTimeInterval(3600)), "target_regions": ["CA"]]
        body.merge(fields) { _, new in new }
        let response = try await client.call(.post, "/api/feed/messages", headers(admin), json: js(body))
        #expect(response.status == .created, "\(String(buffer: response.body))")
        return try #require(response.object["id"] as? String)
    }

    func titles(_ response: TestResponse) -> [String] {
        (response.object["messages"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
    }

    @Test func anonymousClientsSeeExactlyTheEligibleMessagesInOrder() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let now = Date()
            _ = try await post(client, herald.admin, ["title": "everyone", "priority": 1, "posted_at": Timestamp.format(now.addingTimeInterval(-30))])
            _ = try await post(client, herald.admin, ["title": "quebec-only", "priority": 5, "target_regions": ["QC"]])
            _ = try await post(
                client, herald.admin,
                ["title": "new-app", "priority": 1, "target_version": ">=2.1.0 <3", "posted_at": Timestamp.format(now.addingTimeInterval(-60))])
            _ = try await post(client, herald.admin, ["title": "old-app", "target_version": "^1.4 || <0.9"])
            _ = try await post(client, herald.admin, ["title": "ontario-and-bc", "priority": 3, "target_regions": ["ON", "BC"], "url": "/promo"])

            let all = try await client.call(.get, "/feed/index.json", headers(contentType: nil))
            #expect(all.status == .ok)
            #expect(titles(all) == ["quebec-only", "ontario-and-bc", "new-app", "everyone", "old-app"], "priority, then oldest posted_at")
            let qc2 = try await client.call(.get, "/feed/index.json?region=QC&version=2.2", headers())
            #expect(titles(qc2) == ["quebec-only", "new-app", "everyone"])
            let on1 = try await client.call(.get, "/feed/index.json?region=ON&version=1.5.0", headers())
            #expect(titles(on1) == ["ontario-and-bc", "everyone", "old-app"])
            let item = try #require((on1.object["messages"] as? [[String: Any]])?.first)
            #expect(Set(item.keys) == ["id", "title", "body", "url", "posted_at", "expires_at", "priority", "target_regions", "target_version"])
            #expect(item["url"] as? String == "https://pong.example/promo")
            #expect(try await client.call(.get, "/feed/index.json?version=banana", headers()).status == .badRequest)
        }
    }

    /// Region codes are letters whose case means nothing (ISO 3166, BCP 47): a device asking for
    /// `qc` is in Quebec, a message for `on` is Ontario's, and `"ca"` is every region. The codes
    /// are answered as the communicator wrote them.
    @Test func regionCodesMatchInEitherLetterCase() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await post(client, herald.admin, ["title": "quebec", "priority": 3, "target_regions": ["QC"]])
            _ = try await post(client, herald.admin, ["title": "ontario", "priority": 2, "target_regions": ["on"]])
            _ = try await post(client, herald.admin, ["title": "everyone", "priority": 1, "target_regions": ["ca"]])
            let lower = try await client.call(.get, "/feed/index.json?region=qc", headers())
            #expect(titles(lower) == ["quebec", "everyone"])
            let upper = try await client.call(.get, "/feed/index.json?region=QC", headers())
            #expect(titles(upper) == ["quebec", "everyone"])
            #expect(lower.headers[.eTag] == upper.headers[.eTag], "one query, one document")
            #expect(titles(try await client.call(.get, "/feed/index.json?region=On", headers())) == ["ontario", "everyone"])
            #expect(titles(try await client.call(.get, "/feed/index.json?region=BC", headers())) == ["everyone"])
            let ontario = (try await client.call(.get, "/feed/index.json?region=ON", headers()).object["messages"] as? [[String: Any]])?.first
            #expect(ontario?["target_regions"] as? [String] == ["on"], "stored and answered as sent")
            let next = try await client.call(.get, "/feed/next?region=qC", headers())
            #expect(next.object["title"] as? String == "quebec")
        }
    }

    @Test func etagGives304UntilTheFeedChanges() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let id = try await post(client, herald.admin, ["title": "one"])
            let first = try await client.call(.get, "/feed/index.json", headers())
            let etag = try #require(first.headers[.eTag])
            #expect(first.headers[.cacheControl]?.contains("max-age") == true)
            var conditional = headers()
            conditional[.ifNoneMatch] = etag
            let same = try await client.call(.get, "/feed/index.json", conditional)
            #expect(same.status == .notModified)
            #expect(same.body.readableBytes == 0)
            // A list of tags (RFC 9110 §13.1.2), each with optional whitespace, weak or strong.
            var listed = headers()
            listed[.ifNoneMatch] = "\"other\",\t W/\(etag) "
            #expect(try await client.call(.get, "/feed/index.json", listed).status == .notModified)
            listed[.ifNoneMatch] = " \"other\" ,\t\"x\" "
            #expect(try await client.call(.get, "/feed/index.json", listed).status == .ok)
            listed[.ifNoneMatch] = "\"other\", * "
            #expect(try await client.call(.get, "/feed/index.json", listed).status == .notModified)
            _ = try await post(client, herald.admin, ["title": "two"])
            let changed = try await client.call(.get, "/feed/index.json", conditional)
            #expect(changed.status == .ok, "a new message invalidates the ETag")
            #expect(changed.headers[.eTag] != etag)
            #expect(try await client.call(.delete, "/api/feed/messages/\(id)", headers(herald.admin)).status == .noContent)
            #expect(titles(try await client.call(.get, "/feed/index.json", headers())) == ["two"])
            #expect(try await client.call(.delete, "/api/feed/messages/\(id)", headers(herald.admin)).status == .notFound)
            // Different filters, different documents, different ETags; the same filter, the same.
            _ = try await post(client, herald.admin, ["title": "quebec", "target_regions": ["QC"]])
            let everywhere = try await client.call(.get, "/feed/index.json?region=ON", headers())
            let filtered = try await client.call(.get, "/feed/index.json?region=QC", headers())
            #expect(titles(filtered) == ["two", "quebec"] && titles(everywhere) == ["two"])
            let filteredTag = try #require(filtered.headers[.eTag])
            #expect(filteredTag != everywhere.headers[.eTag])
            #expect(try await client.call(.get, "/feed/index.json?region=QC", headers()).headers[.eTag] == filteredTag)
            var stale = headers()
            stale[.ifNoneMatch] = everywhere.headers[.eTag]
            #expect(try await client.call(.get, "/feed/index.json?region=QC", stale).status == .ok, "another filter's tag does not match")
        }
    }

    @Test func expiredMessagesAreNeverServedAndArePurged() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            // Generous, so a loaded machine still reads the feed before the expiry; a machine so
            // loaded that the post itself outlasted the window (refused: the expiry is past) tries
            // again with a wider one, since that refusal is right and says nothing of the trim.
            var expiry = Date()
            for window in [3.0, 8.0, 20.0] {
                expiry = Date().addingTimeInterval(window)
                var body: [String: Any] = ["title": "short", "body": "b", "target_regions": ["CA"]]
                body["expires_at"] = Timestamp.format(expiry)
                let response = try await client.call(.post, "/api/feed/messages", headers(herald.admin), json: js(body))
                if response.status == .created { break }
                #expect(response.status == .unprocessableContent && Date() >= expiry, "\(String(buffer: response.body))")
            }
            _ = try await post(client, herald.admin, ["title": "long"])
            let before = titles(try await client.call(.get, "/feed/index.json", headers()))
            // A machine too loaded to read within the window proves nothing about this read;
            // the trim after the expiry below is checked either way.
            if Date() < expiry { #expect(before == ["short", "long"]) }
            try await Task.sleep(for: .milliseconds(Int64(max(expiry.timeIntervalSinceNow, 0) * 1000) + 100))
            #expect(titles(try await client.call(.get, "/feed/index.json", headers())) == ["long"], "trimmed at once, before any purge")
            #expect(
                titles(try await client.call(.get, "/api/feed/messages", headers(herald.admin))) == ["short", "long"], "admins still see it until the purge")
            try await FeedMaintenance(store: herald.server.feedStore, snapshot: herald.server.feed, logger: herald.server.logger).runOnce()
            #expect(titles(try await client.call(.get, "/api/feed/messages", headers(herald.admin))) == ["long"])
        }
    }

    @Test func nextWalksByPriorityThenAgeSkippingReadOnes() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let now = Date()
            let a = try await post(client, herald.admin, ["title": "a", "priority": 1, "posted_at": Timestamp.format(now.addingTimeInterval(-10))])
            let b = try await post(client, herald.admin, ["title": "b", "priority": 9])
            let c = try await post(client, herald.admin, ["title": "c", "priority": 1, "posted_at": Timestamp.format(now.addingTimeInterval(-20))])
            _ = try await post(client, herald.admin, ["title": "elsewhere", "priority": 99, "target_regions": ["NU"]])
            var read: [String] = []
            var seen: [String] = []
            for _ in 0..<5 {
                let response = try await client.call(.get, "/feed/next?region=QC&version=3.0.0&read=\(read.joined(separator: ","))", headers())
                if response.status == .noContent { break }
                #expect(response.status == .ok)
                let id = try #require(response.object["id"] as? String)
                seen.append(id)
                read.append(id)
            }
            #expect(seen == [b, c, a])
        }
    }

    @Test func invalidFeedMessagesAreRefusedAndOnlyAdminsWrite() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let future = Timestamp.format(Date().addingTimeInterval(3600))
            let cases: [([String: Any], String)] = [
                (["title": "t", "expires_at": future, "target_regions": ["CA"], "target_version": ">=banana"], "target_version"),
                (["title": "t", "expires_at": future, "target_regions": ["CA"], "target_version": "1.2.3 - "], "target_version"),
                (["title": "t", "expires_at": future, "target_regions": ["CA"], "target_version": "9223372036854775807.x"], "target_version"),
                (["title": "t", "expires_at": "2001-01-01T00:00:00Z", "target_regions": ["CA"]], "expires_at"),
                (["title": "t", "target_regions": ["CA"]], "expires_at"),
                (["title": "t", "expires_at": future], "target_regions"),
                (["title": "t", "expires_at": future, "target_regions": [String]()], "target_regions"),
                (["title": "", "expires_at": future, "target_regions": ["CA"]], "title"),
                (["title": "t", "expires_at": future, "target_regions": ["CA"], "priority": "high"], "priority"),
                (["title": "t", "expires_at": future, "target_regions": ["CA"], "colour": "red"], "colour"),
            ]
            for (body, fragment) in cases {
                let response = try await client.call(.post, "/api/feed/messages", headers(herald.admin), json: js(body))
                #expect(response.status == .unprocessableContent, "\(body): \(response.status)")
                #expect(response.errorMessage.contains(fragment), "\(body): \(response.errorMessage)")
            }
            let valid = js(["title": "t", "expires_at": future, "target_regions": ["CA"]])
            for key in [herald.backend, herald.communicator] {
                #expect(try await client.call(.post, "/api/feed/messages", headers(key), json: valid).status == .forbidden)
            }
            #expect(try await client.call(.get, "/api/feed/messages", headers()).status == .unauthorized)
            let schema = try await client.call(.get, "/feed/schema.json", headers())
            #expect(schema.status == .ok)
            #expect((schema.object["$defs"] as? [String: Any])?["message"] != nil)
        }
    }

    @Test func broadcastNotificationsArePublishedToTheFeed() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let targeted = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: js([
                    "type": "alert", "title": "Update available", "body": "2.4 is out", "url": "/update", "priority": 7,
                    "broadcast": ["regions": ["QC"], "version": "<2.4.0", "expires_at": Timestamp.format(Date().addingTimeInterval(600))],
                ]))
            #expect(targeted.status == .accepted, "\(String(buffer: targeted.body))")
            #expect(targeted.object["recipients"] as? Int == 0)
            let everyone = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: js(["type": "generic", "title": "Hello all", "broadcast": true]))
            #expect(everyone.status == .accepted)
            try await herald.deliver()
            #expect(titles(try await client.call(.get, "/feed/index.json?region=QC&version=2.3.9", headers())) == ["Update available", "Hello all"])
            #expect(titles(try await client.call(.get, "/feed/index.json?region=QC&version=2.4.0", headers())) == ["Hello all"])
            #expect(titles(try await client.call(.get, "/feed/index.json?region=ON", headers())) == ["Hello all"])
            let item = try #require((try await client.call(.get, "/feed/index.json?region=QC", headers())).object["messages"] as? [[String: Any]]).first
            #expect(item?["id"] as? String == targeted.object["id"] as? String, "the feed message keeps the notification id")
            #expect(item?["url"] as? String == "https://pong.example/update")
            #expect(item?["priority"] as? Int == 7)

            for (body, fragment) in [
                (js(["type": "alert", "title": "x", "broadcast": ["version": ">=nope"]]), "broadcast.version"),
                (js(["type": "alert", "title": "x", "broadcast": ["regions": [String]()]]), "broadcast.regions"),
                (js(["type": "alert", "title": "x", "broadcast": ["expires_at": "2001-01-01T00:00:00Z"]]), "broadcast.expires_at"),
            ] {
                let response = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
                #expect(response.status == .unprocessableContent, "\(body)")
                #expect(response.errorMessage.contains(fragment), "\(response.errorMessage)")
            }
        }
    }
}
