import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// Frequency caps, `digest_key` and quiet hours that hold (docs/timing.md), through the API.
@Suite(.cleansUp) struct FoldingAPITests {
    func send(_ client: some TestClientProtocol, _ herald: TestHerald, _ body: [String: Any]) async throws -> String {
        let accepted = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
        #expect(accepted.status == .accepted, "\(accepted.object)")
        return accepted.object["id"] as? String ?? ""
    }

    func counts(_ client: some TestClientProtocol, _ herald: TestHerald, _ id: String) async throws -> [String: Int] {
        let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
        return status.object["counts"] as? [String: Int] ?? [:]
    }

    @Test func pastItsCapAUsersPushesFoldIntoOneDigestAtTheWindowsEnd() async throws {
        let herald = try await TestHerald.make {
            $0.caps = [
                FrequencyCap(
                    name: "votes", types: ["upvote", "like"], max: 3, seconds: 1, digestType: "upvote", title: "{{count}} new votes",
                    body: "{{first_title}} & more ({{types}})")
            ]
            $0.preferences.critical = ["alert"]
        }
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-ann"])
            var ids: [String] = []
            for (index, type) in ["upvote", "like", "upvote", "like", "upvote"].enumerated() {
                ids.append(try await send(client, herald, ["type": type, "title": "Vote \(index + 1)", "user_ids": ["ann"]]))
            }
            // Critical and uncapped types are never counted.
            _ = try await send(client, herald, ["type": "alert", "title": "Outage", "user_ids": ["ann"]])
            _ = try await send(client, herald, ["type": "comment", "title": "A comment", "user_ids": ["ann"]])
            try await herald.deliver()
            #expect(herald.push.received.map(\.notification.title).sorted() == ["A comment", "Outage", "Vote 1", "Vote 2", "Vote 3"])
            #expect(try await counts(client, herald, ids[4])["folded"] == 1)
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "ann", contentType: nil))
            #expect((history.object["history"] as? [Any])?.count == 7, "history keeps every item")

            try await Task.sleep(for: .milliseconds(1_100))
            try await herald.deliver()
            let digest = try #require(herald.push.received.last?.notification)
            #expect(herald.push.received.count == 6, "one digest for the two folded")
            #expect(digest.title == "2 new votes" && digest.body == "Vote 4 & more (like, upvote)" && digest.type == "upvote")
            #expect(digest.data["digest_of"] == ids.suffix(2).joined(separator: ",") && digest.data["digest_count"] == "2")
            let after = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "ann", contentType: nil))
            #expect((after.object["history"] as? [Any])?.count == 7, "the digest is not a history item")

            // The explanation says a capped type's pushes may fold.
            let why = try await client.call(
                .post, "/api/notifications/explain", headers(herald.backend), json: ["type": "like", "title": "l", "user_ids": ["ann"], "user_id": "ann"])
            let fcm = (why.object["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "fcm" }
            let steps = (fcm?["reasons"] as? [[String: Any]])?.compactMap { $0["step"] as? String } ?? []
            #expect(steps.contains("frequency_cap"), "\(why.object)")
        }
    }

    @Test func aDigestKeyFoldsASendersNotificationsForItsWindow() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "bob"), json: ["fcm_token": "t-bob"])
            for index in 1...3 {
                _ = try await send(
                    client, herald, ["type": "message", "title": "Message \(index)", "user_ids": ["bob"], "digest_key": "chat-7", "digest_window": 1])
            }
            let alone = try await send(
                client, herald, ["type": "message", "title": "Elsewhere", "user_ids": ["bob"], "digest_key": "chat-8", "digest_window": "1s"])
            try await herald.deliver()
            #expect(herald.push.received.isEmpty, "every one waits for its window's end")
            try await Task.sleep(for: .milliseconds(1_100))
            try await herald.deliver()
            let titles = herald.push.received.map(\.notification.title).sorted()
            #expect(titles == ["3 new notifications", "Elsewhere"], "one digest, and the one alone as itself")
            #expect(try await counts(client, herald, alone)["sent"] == 2, "its push and its history row")
        }
    }

    @Test func quietHoursThatHoldKeepAlertsForTheirEnd() async throws {
        let herald = try await TestHerald.make { $0.preferences.critical = ["alert"] }
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "cy"), json: ["fcm_token": "t-cy"])
            // A window around now, in UTC.
            let now = Date()
            let minute = 60.0
            func clock(_ date: Date) -> String { String(Timestamp.format(date).dropFirst(11).prefix(5)) }
            let quiet: [String: Any] = [
                "start": clock(now.addingTimeInterval(-30 * minute)), "end": clock(now.addingTimeInterval(30 * minute)), "tz": "UTC", "mode": "hold",
            ]
            let saved = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "cy"), json: ["quiet_hours": quiet])
            #expect(saved.status == .ok, "\(saved.object)")
            #expect((saved.object["quiet_hours"] as? [String: Any])?["mode"] as? String == "hold")
            let held = try await send(client, herald, ["type": "comment", "title": "Later", "user_ids": ["cy"]])
            _ = try await send(client, herald, ["type": "alert", "title": "Now", "user_ids": ["cy"]])
            _ = try await send(client, herald, ["type": "comment", "title": "Silent data", "user_ids": ["cy"], "distribution": "information"])
            try await herald.deliver()
            #expect(herald.push.received.map(\.notification.title).sorted() == ["Now", "Silent data"], "the critical alert and information go now")
            #expect(herald.push.received.first { $0.notification.title == "Now" }?.distribution == .information, "silent, as quiet hours are")
            #expect(try await counts(client, herald, held)["folded"] == 1, "held for the window's end")

            let bad = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "cy"),
                json: ["quiet_hours": ["start": "22:00", "end": "07:00", "mode": "loud"]])
            #expect(bad.status == .unprocessableContent)
            #expect(((bad.object["error"] as? [String: Any])?["message"] as? String)?.contains("'quiet_hours.mode'") == true, "\(bad.object)")
        }
    }

    @Test func badDigestFieldsAreRefusedNamingTheField() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let base: [String: Any] = ["type": "comment", "title": "t", "user_ids": ["ann"]]
            let cases: [([String: Any], String)] = [
                (["digest_key": "k"], "digest_window"),
                (["digest_window": "10m"], "digest_key"),
                (["digest_key": "k", "digest_window": 0], "digest_window"),
                (["digest_key": "k", "digest_window": "0s"], "digest_window"),
                (["digest_key": "k", "digest_window": "8d"], "digest_window"),
                (["digest_key": "k", "digest_window": "10 minutes"], "digest_window"),
                (["digest_key": "k", "digest_window": 1.5], "digest_window"),
                (["digest_key": "", "digest_window": "1h"], "digest_key"),
            ]
            for (extra, field) in cases {
                let refused = try await client.call(.post, "/api/notifications", headers(herald.backend), json: base.merging(extra) { $1 })
                #expect(refused.status == .unprocessableContent, "\(extra): \(refused.object)")
                let message = (refused.object["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("'\(field)'"), "\(extra): \(refused.object)")
            }
        }
    }
}
