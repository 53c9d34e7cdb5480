import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// Each app's page in docs/ shows the documents the app sends and the shapes it parses. These
/// tests take the JSON straight from those pages, send it, and hold the answers to the pages.
@Suite(.cleansUp) struct DocumentedExamplesTests {
    /// The JSON code blocks of a page in docs/, in order.
    static func jsonBlocks(_ page: String) throws -> [String] {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "docs")
        let text = try String(contentsOf: docs.appendingPathComponent(page), encoding: .utf8)
        return text.components(separatedBy: "```json\n").dropFirst().compactMap { block in
            block.components(separatedBy: "```").first
        }
    }

    static func parse(_ text: String?) -> Any? {
        text.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) }
    }

    /// The keys at every level, so a page and an answer can be compared by shape.
    static func shape(_ value: Any?) -> String {
        switch value {
        case let object as [String: Any]: "{" + object.keys.sorted().map { "\($0):\(shape(object[$0]))" }.joined(separator: ",") + "}"
        case let array as [Any]: "[" + (array.first.map { shape($0) } ?? "") + "]"
        default: "_"
        }
    }

    @Test func pongsHistoryItemIsExactlyThePagesShape() async throws {
        let page = try Self.jsonBlocks("pong.md").first
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let documented = try #require(Self.parse(page) as? [String: Any])
            let register = try await client.call(
                .post, "/api/notifications/register", headers(herald.backend, user: "pat"), json: js(["fcm_token": "pat-phone"]))
            #expect(register.status == .ok)
            #expect(Set(register.object.keys) == ["device_id", "fcm_token", "provider"])
            let notification = documented["notification"] as? [String: Any]
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: js([
                    "type": "upvote", "title": notification?["title"] ?? "", "body": notification?["body"] ?? "", "url": "/posts/DKJW", "user_ids": ["pat"],
                ])
            )
            #expect(sent.status == .accepted, "\(String(buffer: sent.body))")
            try await herald.deliver()
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "pat"))
            let item = try #require((history.object["history"] as? [[String: Any]])?.first)
            #expect(Self.shape(item) == Self.shape(documented), "the item has exactly the page's fields")
            #expect((item["notification"] as? [String: String]) == (documented["notification"] as? [String: String]))
            let data = try #require(item["data"] as? [String: Any])
            #expect(data["url"] as? String == (documented["data"] as? [String: Any])?["url"] as? String)
            #expect(data["type"] as? String == "upvote")
            #expect((data["timestamp"] as? String)?.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}/) != nil, "\(data)")
            #expect(item["read"] as? Bool == false)
        }
    }

    @Test func theCMSsDocumentIsTakenAsItIsAndReadBackInItsShape() async throws {
        let page = try Self.jsonBlocks("content.md").first
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let document = try #require(Self.parse(page) as? [String: Any])
            let pending = try #require(document["pendingContent"] as? [String: [String: Any]])
            let put = try await client.call(.put, "/api/content/pending", headers(herald.admin), json: js(document))
            #expect(put.status == .ok, "\(String(buffer: put.body))")
            let warnings = put.object["warnings"] as? [[String: Any]] ?? []
            #expect(warnings.map { $0["item"] as? String } == ["2"], "the item visible to nobody is named, not refused")
            #expect(try await client.call(.post, "/api/content/publish", headers(herald.admin)).status == .ok)
            _ = try await client.call(.put, "/api/users/goldie", headers(herald.backend), json: js(["tier_id": "gold"]))

            let read = try await client.call(.get, "/api/content?format=doubledutch", headers(herald.backend, user: "goldie"))
            let content = try #require(read.object["content"] as? [String: [String: Any]])
            var expected = [pending["0"] ?? [:], pending["1"] ?? [:]]
            for index in expected.indices { expected[index]["visibility"] = nil }
            #expect(content.keys.sorted() == ["0", "1"])
            for (index, key) in ["0", "1"].enumerated() {
                #expect(
                    NSDictionary(dictionary: content[key] ?? [:]).isEqual(to: expected[index]),
                    "fields exactly as uploaded, without visibility: \(content[key] ?? [:])")
            }
            let stamped = try #require(read.object["lastPublishedAt"] as? Int64)
            #expect(String(stamped) != document["lastPublishedAt"] as? String, "publishing stamps it")

            let stranger = try await client.call(.get, "/api/content?format=doubledutch", headers(herald.backend, user: "stranger"))
            #expect((stranger.object["content"] as? [String: Any])?.keys.sorted() == ["0"], "the survey is gold's")
        }
    }

    @Test func theSubjectTreeIsThePagesShape() async throws {
        let page = try Self.jsonBlocks("topics.md").first
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let documented = try #require(Self.parse(page) as? [Any])
            let channel = try await client.call(.post, "/channel", headers(herald.admin), json: js(["name": "Campus", "desc": "All campus news"]))
            let channelID = try #require(channel.object["_id"] as? String)
            let area = try await client.call(.post, "/area/\(channelID)", headers(herald.admin), json: js(["name": "Safety", "desc": ""]))
            let areaID = try #require(area.object["id"] as? String)
            _ = try await client.call(
                .post, "/subject/\(channelID)/\(areaID)", headers(herald.admin),
                json: js(["name": "Emergencies", "desc": "", "opt": ["level": "Forced", "distribution": "Alert"]])
            )
            let tree = try await client.call(.get, "/channel", headers(herald.communicator))
            #expect(Self.shape(tree.json) == Self.shape(documented))
            let subject = ((tree.json as? [[String: Any]])?.first?["areas"] as? [[String: Any]])?.first.flatMap { ($0["subjects"] as? [[String: Any]])?.first }
            #expect((subject?["opt"] as? [String: String]) == ["level": "Forced", "distribution": "Alert"])
        }
    }

    /// docs/routing.md's settings document, written back with PATCH on a server with a `chat`
    /// channel and `alert` critical, is what GET answers; and its explanation's shape is the one
    /// the page shows.
    @Test func theSettingsAndExplanationAreThePagesShapes() async throws {
        let blocks = try Self.jsonBlocks("routing.md")
        let documentedText = try #require(blocks.first)
        let chat = RecordingSink(name: "chat", capabilities: .perUser, channel: SinkChannel("chat"))
        let herald = try await TestHerald.make(extraSinks: [chat]) { configuration in
            configuration.preferences = ChannelPreferences(critical: ["alert"])
            configuration.routing = ["type=comment => +chat"]
        }
        try await herald.test { client in
            let documented = try #require(Self.parse(documentedText) as? [String: Any])
            var patch = documented
            patch["locked"] = nil
            let patched = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: js(patch))
            #expect(patched.status == .ok, "\(patched.object)")
            let read = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "ann"))
            #expect(NSDictionary(dictionary: read.object) == NSDictionary(dictionary: documented), "\(read.object)")

            let explained = try #require(Self.parse(blocks.dropFirst().first ?? "") as? [String: Any])
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: js(["fcm_token": "ann-phone"]))
            let answer = try await client.call(
                .post, "/api/notifications/explain", headers(herald.backend),
                json: js(["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "ann"]))
            #expect(answer.status == .ok)
            #expect(Self.shape(answer.object) == Self.shape(explained), "\(answer.object)")
        }
    }
}
