import Foundation
import HeraldCore
import HeraldServer
import HeraldTestSupport
import Hummingbird
import HummingbirdTesting
import Testing

/// `POST /api/inbox/mark`, `GET /api/inbox/counts` and the history's state filters
/// (docs/inbox.md), through the API.
@Suite(.cleansUp) struct InboxAPITests {
    func send(_ client: some TestClientProtocol, _ herald: TestHerald, type: String = "comment", to user: String = "ada") async throws -> String {
        let sent = try await client.call(.post, "/api/notifications", headers(herald.backend), json: js(["type": type, "title": "T", "user_ids": [user]]))
        #expect(sent.status == .accepted)
        return sent.object["id"] as? String ?? ""
    }

    @Test func marksAnswerTheCountsAndHistoryFiltersByState() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let ids = [try await send(client, herald), try await send(client, herald), try await send(client, herald, type: "like")]
            try await herald.deliver()
            let user = headers(herald.backend, user: "ada")
            var counts = try await client.call(.get, "/api/inbox/counts", user)
            #expect(counts.status == .ok)
            #expect(counts.object["unread"] as? Int == 3 && counts.object["unseen"] as? Int == 3 && counts.object["archived"] as? Int == 0)
            #expect(((counts.object["by_type"] as? [String: Any])?["like"] as? [String: Int]) == ["unseen": 1, "unread": 1, "archived": 0])

            let read = try await client.call(.post, "/api/notifications/read", user, json: js(["ids": [ids[0]]]))
            #expect(read.object["unread"] as? Int == 2, "the read endpoint answers the same unread count")
            let marked = try await client.call(.post, "/api/inbox/mark", user, json: js(["all": true, "type": "comment", "change": "archived"]))
            #expect(marked.status == .ok)
            #expect(marked.object["unread"] as? Int == 1 && marked.object["archived"] as? Int == 2)
            counts = try await client.call(.get, "/api/inbox/counts", user)
            #expect(counts.object["unread"] as? Int == 1, "counts read after a mark are the mark's")

            let archived = try await client.call(.get, "/api/notifications/history?state=archived", user)
            let items = try #require(archived.object["history"] as? [[String: Any]])
            #expect(items.map { ($0["data"] as? [String: Any])?["id"] as? String } == [ids[1], ids[0]])
            #expect(items.allSatisfy { $0["archived"] as? Bool == true && $0["snoozed_until"] is NSNull && $0["seen"] != nil })
            let unread = try await client.call(.get, "/api/notifications/history?state=unread&type=like", user)
            #expect((unread.object["history"] as? [[String: Any]])?.count == 1)
            let plain = try await client.call(.get, "/api/notifications/history", user)
            let first = try #require((plain.object["history"] as? [[String: Any]])?.first)
            #expect(Set(first.keys) == ["data", "notification", "read"], "without a state, every item exactly as Pong parses it")
            #expect((plain.object["history"] as? [Any])?.count == 3)

            let until = Timestamp.format(Date().addingTimeInterval(3_600))
            let snoozed = try await client.call(.post, "/api/inbox/mark", user, json: js(["ids": [ids[2]], "change": "snooze", "until": until]))
            #expect(snoozed.object["unread"] as? Int == 0)
            let listed = try await client.call(.get, "/api/notifications/history?state=snoozed", user)
            let item = try #require((listed.object["history"] as? [[String: Any]])?.first)
            #expect(item["snoozed_until"] as? String == String(until.dropLast()), "in the server's timestamp style")
        }
    }

    @Test(arguments: [
        (#"{"change": "read"}"#, "ids"),
        (#"{"ids": ["x"], "change": "read"}"#, "ids[0]"),
        (#"{"ids": [], "change": "read"}"#, "ids"),
        (#"{"all": true}"#, "change"),
        (#"{"all": true, "change": "burn"}"#, "change"),
        (#"{"all": false, "change": "read"}"#, "all"),
        (#"{"all": true, "ids": ["5f0c1a2b3c4d5e6f7a8b9c0d"], "change": "read"}"#, "all"),
        (#"{"all": true, "type": "nonsense", "change": "read"}"#, "type"),
        (#"{"all": true, "before": "yesterday", "change": "read"}"#, "before"),
        (#"{"ids": ["5f0c1a2b3c4d5e6f7a8b9c0d"], "type": "comment", "change": "read"}"#, "type"),
        (#"{"all": true, "change": "snooze"}"#, "until"),
        (#"{"all": true, "change": "snooze", "until": "tomorrow"}"#, "until"),
        (#"{"all": true, "change": "read", "until": "2091-01-01T00:00:00Z"}"#, "until"),
        (#"{"all": "yes", "change": "read"}"#, "all"),
        (#"{"all": true, "change": "read", "extra": 1}"#, "extra"),
        (#"{"all": true, "before": null, "change": "read"}"#, "before"),
    ])
    func badMarksAre422NamingTheField(_ body: String, _ field: String) async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let answer = try await client.call(.post, "/api/inbox/mark", headers(herald.backend, user: "ada"), json: body)
            #expect(answer.status == .unprocessableContent, "\(body): \(String(buffer: answer.body))")
            let message = (answer.object["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(message.contains("'\(field)'"), "\(body): \(message)")
        }
    }

    @Test func inboxSettingsParse() async throws {
        let configuration = try await HeraldConfiguration.load(
            configFile: nil,
            environment: [
                "HERALD_INBOX_SYNC_PUSH": "false", "HERALD_INBOX_SYNC_PUSH_INTERVAL": "10s", "HERALD_RETENTION_INBOX_READ": "30d",
                "HERALD_RETENTION_INBOX_ARCHIVED": "90d",
            ])
        #expect(!configuration.inboxSyncPush && configuration.inboxSyncInterval == .seconds(10))
        #expect(configuration.inboxReadRetention == .seconds(30 * 86_400) && configuration.inboxArchivedRetention == .seconds(90 * 86_400))
        let defaults = try await HeraldConfiguration.load(configFile: nil, environment: [:])
        #expect(defaults.inboxSyncPush && defaults.inboxSyncInterval == .seconds(3))
        #expect(defaults.inboxReadRetention == nil && defaults.inboxArchivedRetention == nil, "nothing is purged unless asked")
        for (key, value) in [("HERALD_INBOX_SYNC_PUSH_INTERVAL", "0"), ("HERALD_RETENTION_INBOX_READ", "1h"), ("HERALD_INBOX_SYNC_PUSH", "maybe")] {
            await #expect(throws: (any Error).self, "\(key)=\(value)") { _ = try await HeraldConfiguration.load(configFile: nil, environment: [key: value]) }
        }
    }

    @Test func badHistoryFiltersAre400NamingTheParameter() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (query, field) in [("state=new", "state"), ("type=nonsense", "type")] {
                let answer = try await client.call(.get, "/api/notifications/history?\(query)", headers(herald.backend, user: "ada"))
                #expect(answer.status.code / 100 == 4, "\(query)")
                #expect(String(buffer: answer.body).contains(field), "\(query): \(String(buffer: answer.body))")
            }
        }
    }
}
