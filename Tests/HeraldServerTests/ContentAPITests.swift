import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@Suite(.cleansUp) struct ContentAPITests {
    static var items: [[String: Any]] {
        [
            ["type": "banner", "title": "Welcome", "order": 1, "visibility": ["all": true], "image": "https://x.example/w.png"],
            ["type": "perk", "title": "Gold lounge", "order": 2, "visibility": ["tier_ids": ["gold", 3]]],
            ["type": "session", "title": "Speakers dinner", "order": 0, "visibility": ["group_ids": ["speakers"], "attendee_ids": ["vip-1", 42]]],
            ["type": "note", "title": "Only for carol", "order": 5, "visibility": ["attendee_ids": ["carol"]], "extra": ["nested": [1, 2]]],
        ]
    }

    func titles(_ response: TestResponse) -> [String] {
        (response.object["content"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
    }

    @Test func eachUserSeesOnlyTheirItemsAfterPublish() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let put = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(["items": Self.items]))
            #expect(put.status == .ok, "\(String(buffer: put.body))")
            #expect(
                titles(try await client.call(.get, "/api/content", headers(herald.backend, user: "anyone"))).isEmpty, "nothing is visible before publishing")

            _ = try await client.call(.put, "/api/users/goldie", headers(herald.backend), json: js(["tier_id": "gold"]))
            _ = try await client.call(.put, "/api/users/tier3", headers(herald.backend), json: js(["tier_id": 3]))
            _ = try await client.call(.put, "/api/users/speaker", headers(herald.backend), json: js(["group_ids": ["press", "speakers"]]))
            _ = try await client.call(.put, "/api/users/42", headers(herald.backend), json: js(["tier_id": "silver"]))

            let published = try await client.call(.post, "/api/content/publish", headers(herald.admin))
            #expect(published.status == .ok)
            let stamp = try #require(published.object["last_published_at"] as? Int64)
            #expect(abs(Double(stamp) / 1000 - Date().timeIntervalSince1970) < 60, "milliseconds")

            let expected: [String: [String]] = [
                "anyone": ["Welcome"], "goldie": ["Welcome", "Gold lounge"], "tier3": ["Welcome", "Gold lounge"],
                "speaker": ["Speakers dinner", "Welcome"], "vip-1": ["Speakers dinner", "Welcome"], "42": ["Speakers dinner", "Welcome"],
                "carol": ["Welcome", "Only for carol"],
            ]
            for (user, titles) in expected {
                let response = try await client.call(.get, "/api/content", headers(herald.backend, user: user))
                #expect(response.status == .ok)
                #expect(self.titles(response) == titles, "\(user)")
                #expect(response.object["last_published_at"] as? Int64 == stamp)
                let items = response.object["content"] as? [[String: Any]] ?? []
                #expect(items.allSatisfy { $0["visibility"] == nil }, "visibility is removed")
            }
            let carol = try await client.call(.get, "/api/content", headers(try await herald.userToken("carol")))
            let note = try #require((carol.object["content"] as? [[String: Any]])?.last)
            #expect((note["extra"] as? [String: [Int]]) == ["nested": [1, 2]], "free fields come back as sent")
            #expect(try await client.call(.get, "/api/content", headers(try await herald.userToken("carol"), user: "goldie")).status == .forbidden)
        }
    }

    /// Content is read often and changes rarely: an ETag per user's view, and 304 for it.
    @Test func contentAnswers304WhileTheUsersItemsStayTheSame() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(["items": Self.items]))
            _ = try await client.call(.post, "/api/content/publish", headers(herald.admin))
            let first = try await client.call(.get, "/api/content", headers(herald.backend, user: "anyone"))
            let tag = try #require(first.headers[.eTag])
            var conditional = headers(herald.backend, user: "anyone")
            conditional[.ifNoneMatch] = tag
            let again = try await client.call(.get, "/api/content", conditional)
            #expect(again.status == .notModified)
            #expect(again.body.readableBytes == 0)
            var goldie = headers(herald.backend, user: "goldie")
            _ = try await client.call(.put, "/api/users/goldie", headers(herald.backend), json: js(["tier_id": "gold"]))
            goldie[.ifNoneMatch] = tag
            #expect(try await client.call(.get, "/api/content", goldie).status == .ok, "another view, another tag")
            _ = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(["items": Array(Self.items.prefix(1))]))
            #expect(try await client.call(.get, "/api/content", conditional).status == .notModified, "a draft changes nothing")
            _ = try await client.call(.post, "/api/content/publish", headers(herald.admin))
            #expect(try await client.call(.get, "/api/content", conditional).status == .ok, "publishing does")
        }
    }

    @Test func revertRestoresThePublishedSetIntoPending() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(["items": [Self.items[0]]]))
            _ = try await client.call(.post, "/api/content/publish", headers(herald.admin))
            _ = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(["items": Self.items]))
            let pending = try await client.call(.get, "/api/content/pending", headers(herald.admin))
            #expect((pending.object["items"] as? [Any])?.count == 4)
            #expect(titles(try await client.call(.get, "/api/content", headers(herald.backend, user: "x"))) == ["Welcome"], "drafts are not served")
            let reverted = try await client.call(.post, "/api/content/revert", headers(herald.admin))
            #expect((reverted.object["items"] as? [[String: Any]])?.compactMap { $0["title"] as? String } == ["Welcome"])
            #expect((try await client.call(.get, "/api/content/pending", headers(herald.admin)).object["items"] as? [Any])?.count == 1)
        }
    }

    @Test func invalidItemsAreRefusedNamingTheItem() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let cases: [([String: Any], String)] = [
                (["items": [["title": "x", "visibility": ["all": true]]]], "items[0].type"),
                (["items": [Self.items[0], ["type": "t", "title": 7, "visibility": ["all": true]]]], "items[1].title"),
                (["items": [["type": "t", "title": "x", "visibility": "everyone"]]], "items[0].visibility"),
                (["pendingContent": ["zero": ["type": "t", "visibility": ["all": true]]]], "pendingContent.zero"),
                (["items": [["type": "t", "title": "x", "visibility": ["roles": ["a"]]]]], "items[0].visibility.roles"),
                (["items": [["type": "t", "title": "x", "visibility": ["tier_ids": [true]]]]], "items[0].visibility.tier_ids[0]"),
                (["items": [["type": "t", "title": "x", "order": "first", "visibility": ["all": true]]]], "items[0].order"),
                (["items": ["text"]], "items[0]"),
                (["things": []], "things"),
                ([String: Any](), "items"),
            ]
            for (body, fragment) in cases {
                let response = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(body))
                #expect(response.status == .unprocessableContent, "\(body): \(response.status)")
                #expect(response.errorMessage.contains(fragment), "\(body): \(response.errorMessage)")
            }
            // Two bad keys, or two bad visibility fields: always the first in key order is named
            // (each decoded object iterates in its own order, so several tries would catch a race).
            for _ in 0..<8 {
                let keys = try await client.call(
                    .put, "/api/content/pending", headers(herald.admin), json: js(["pendingContent": ["zero": ["type": "t"], "one": ["type": "t"]]]))
                #expect(keys.errorMessage.contains("pendingContent.one"), "\(keys.errorMessage)")
                let fields = try await client.call(
                    .put, "/api/content/pending", headers(herald.admin),
                    json: js(["items": [["type": "t", "visibility": ["tier_ids": "gold", "all": "yes", "group_ids": 1]]]]))
                #expect(fields.errorMessage.contains("items[0].visibility.all"), "\(fields.errorMessage)")
            }
            for key in [herald.backend, herald.communicator] {
                #expect(try await client.call(.post, "/api/content/publish", headers(key)).status == .forbidden)
            }
        }
    }

    /// The CMS's own document, as it uploads it: camelCase, items keyed by index, a survey
    /// without a title, an item for nobody (a warning, not a refusal), its own lastPublishedAt.
    /// Values nested as deep as Herald takes are stored and read back; one level more is a 422
    /// that stores nothing. (Just under the decoder's own limit such a document was stored, then
    /// answered 500 by the write and by every read: JSONEncoder refuses that depth.)
    @Test func nestingUpToTheLimitIsStoredAndPastItRefused() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            // The body's object, `items`, the item and `extra`'s arrays: 64 levels in all.
            func document(extraDepth: Int) -> String {
                #"{"items":[{"type":"t","extra":"# + String(repeating: "[", count: extraDepth) + String(repeating: "]", count: extraDepth) + "}]}"
            }
            let stored = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: document(extraDepth: 61))
            #expect(stored.status == .ok, "\(String(buffer: stored.body))")
            let read = try await client.call(.get, "/api/content/pending", headers(herald.admin))
            #expect(read.status == .ok)
            #expect(String(buffer: read.body).contains(String(repeating: "[", count: 61) + String(repeating: "]", count: 61)))
            for depth in [62, 506] {
                let refused = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: document(extraDepth: depth))
                #expect(refused.status == .unprocessableContent, "\(depth): \(String(buffer: refused.body))")
                #expect(refused.errorCode == "invalid_field")
                #expect(refused.errorMessage.contains("items[0].extra"), "\(refused.errorMessage)")
            }
            #expect(
                String(buffer: try await client.call(.get, "/api/content/pending", headers(herald.admin)).body) == String(buffer: read.body), "nothing stored")
        }
    }

    /// Numbers come back as the values sent: integers within Int64 as they are, others as the
    /// same double; an integer a double would round is refused naming it.
    @Test func numbersAreStoredAsTheirValuesOrRefused() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let sent = #"{"items":[{"type":"t","extra":[9223372036854775807,-9223372036854775808,18446744073709551616,0.1,1e300]}]}"#
            let stored = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: sent)
            #expect(stored.status == .ok, "\(String(buffer: stored.body))")
            let extra = try #require(((stored.object["items"] as? [[String: Any]])?.first?["extra"]) as? [Any])
            #expect((extra[0] as? NSNumber)?.int64Value == Int64.max)
            #expect((extra[1] as? NSNumber)?.int64Value == Int64.min)
            #expect((extra[2] as? NSNumber)?.doubleValue == 18_446_744_073_709_551_616.0)
            #expect((extra[3] as? NSNumber)?.doubleValue == 0.1)
            #expect((extra[4] as? NSNumber)?.doubleValue == 1e300)
            let before = String(buffer: try await client.call(.get, "/api/content/pending", headers(herald.admin)).body)
            let refused = try await client.call(
                .put, "/api/content/pending", headers(herald.admin), json: #"{"items":[{"type":"t","extra":{"n":12345678901234567890}}]}"#)
            #expect(refused.status == .unprocessableContent)
            #expect(refused.errorMessage.contains("items[0].extra.n"), "\(refused.errorMessage)")
            #expect(String(buffer: try await client.call(.get, "/api/content/pending", headers(herald.admin)).body) == before, "nothing stored")
        }
    }

    @Test func theCMSDocumentIsAcceptedAsItIs() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let document: [String: Any] = [
                "lastPublishedAt": "1699999999999",
                "pendingContent": [
                    "0": ["type": "banner", "title": "Welcome", "order": 0, "visibility": ["all": true]],
                    "1": ["type": "survey", "surveyId": "s-42", "order": 1, "visibility": ["tierIds": ["gold"], "groupIds": [7]]],
                    "2": ["type": "note", "title": "Draft for nobody", "order": 2, "visibility": ["attendeeIds": []]],
                ],
            ]
            let put = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(document))
            #expect(put.status == .ok, "\(String(buffer: put.body))")
            let warnings = put.object["warnings"] as? [[String: String]] ?? []
            #expect(warnings.count == 1 && warnings.first?["item"] == "2", "\(warnings)")
            let published = try await client.call(.post, "/api/content/publish", headers(herald.admin))
            let stamp = try #require(published.object["last_published_at"] as? Int64)
            #expect(stamp != 1_699_999_999_999, "publishing stamps it; the uploaded value is ignored")

            _ = try await client.call(.put, "/api/users/g", headers(herald.backend), json: js(["tier_id": "gold"]))
            let ours = try await client.call(.get, "/api/content", headers(herald.backend, user: "g"))
            #expect((ours.object["content"] as? [[String: Any]])?.compactMap { $0["type"] as? String } == ["banner", "survey"])
            let theirs = try await client.call(.get, "/api/content?format=doubledutch", headers(herald.backend, user: "g"))
            let keyed = try #require(theirs.object["content"] as? [String: [String: Any]])
            #expect(keyed.keys.sorted() == ["0", "1"])
            #expect(keyed["1"]?["surveyId"] as? String == "s-42" && keyed["1"]?["visibility"] == nil)
            #expect(theirs.object["lastPublishedAt"] as? Int64 == stamp)
            let nobody = try await client.call(.get, "/api/content?format=doubledutch", headers(herald.backend, user: "2"))
            #expect((nobody.object["content"] as? [String: Any])?.count == 1, "the item for nobody is shown to no one")
            #expect(try await client.call(.get, "/api/content?format=xml", headers(herald.backend, user: "g")).status == .unprocessableContent)
        }
    }

    @Test func concurrentReadersNeverSeeAMixOrNothing() async throws {
        let herald = try await TestHerald.make()
        @Sendable func set(_ name: String, _ count: Int) -> String {
            js(["items": (0..<count).map { ["type": "t", "title": "\(name)\($0)", "order": $0, "visibility": ["all": true]] as [String: Any] }])
        }
        let a = (0..<20).map { "a\($0)" }
        let b = (0..<35).map { "b\($0)" }
        try await herald.test { client in
            _ = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: set("a", 20))
            _ = try await client.call(.post, "/api/content/publish", headers(herald.admin))
            try await withThrowingTaskGroup(of: [[String]].self) { group in
                group.addTask {
                    for round in 0..<30 {
                        _ = try await client.call(
                            .put, "/api/content/pending", headers(herald.admin), json: round.isMultiple(of: 2) ? set("b", 35) : set("a", 20))
                        _ = try await client.call(.post, "/api/content/publish", headers(herald.admin))
                    }
                    return []
                }
                for reader in 0..<4 {
                    group.addTask {
                        var seen: [[String]] = []
                        for _ in 0..<40 {
                            let response = try await client.call(.get, "/api/content", headers(herald.backend, user: "reader\(reader)"))
                            seen.append(self.titles(response))
                        }
                        return seen
                    }
                }
                var reads = 0
                for try await seen in group {
                    for titles in seen {
                        reads += 1
                        #expect(titles == a || titles == b, "a whole set, never a mix or nothing: \(titles.prefix(3))… (\(titles.count))")
                    }
                }
                #expect(reads == 160)
            }
        }
    }
}
