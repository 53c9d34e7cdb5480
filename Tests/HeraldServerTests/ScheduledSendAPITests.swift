import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// `send_at` (docs/timing.md): a scheduled send is stored at once and routed, delivered and
/// written into history from its instant, with the recipients' settings as they are then.
@Suite(.cleansUp) struct ScheduledSendAPITests {
    @Test func aScheduledSendGoesOutAtItsInstantWithTheSettingsThen() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-ann"])
            // An hour ahead: nothing before it, whoever asks.
            let later = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "comment", "title": "Later", "user_ids": ["ann"], "send_at": Timestamp.format(Date().addingTimeInterval(3600))])
            #expect(later.status == .accepted, "\(later.object)")
            #expect(later.object["status"] as? String == "scheduled" && later.object["recipients"] as? Int == 1)
            let laterID = try #require(later.object["id"] as? String)
            let status = try await client.call(.get, "/api/notifications/\(laterID)", headers(herald.backend, contentType: nil))
            #expect((status.object["fan_out"] as? [String: Any])?["state"] as? String == "scheduled", "\(status.object)")
            try await herald.server.fanOut.drain()
            try await herald.deliver()
            #expect(herald.push.received.isEmpty)
            let early = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "ann", contentType: nil))
            #expect((early.object["history"] as? [Any])?.isEmpty == true, "\(early.object)")

            // A second later: Ann turns comment pushes off before the worker routes it, so the
            // settings at its instant decide (the worker runs here only when drained).
            let instant = Date().addingTimeInterval(2)
            let soon = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "comment", "title": "Soon", "user_ids": ["ann"], "send_at": Timestamp.format(instant)])
            let soonID = try #require(soon.object["id"] as? String)
            _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["types": ["comment": false]])
            // On a loaded machine the change may land after the instant; the explanation, which
            // reads the settings in force at the instant, is checked only when it did not.
            let changedBeforeInstant = Date() < instant
            try await Task.sleep(for: .seconds(max(instant.timeIntervalSinceNow, 0) + 0.05))
            try await herald.server.fanOut.drain()
            try await herald.deliver()
            #expect(herald.push.received.isEmpty, "push turned off before the instant")
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "ann", contentType: nil))
            let titles = (history.object["history"] as? [[String: Any]])?.compactMap { ($0["notification"] as? [String: Any])?["title"] as? String }
            #expect(titles == ["Soon"], "in history from its instant, the later one not yet: \(history.object)")
            let done = try await client.call(.get, "/api/notifications/\(soonID)", headers(herald.backend, contentType: nil))
            #expect((done.object["fan_out"] as? [String: Any])?["state"] as? String == "done")
            #expect((done.object["counts"] as? [String: Int])?["sent"] == 1, "the history delivery: \(done.object)")
            // Explained as it was decided: at its instant, with the settings saved before it.
            let why = try await client.call(.get, "/api/notifications/\(soonID)/recipients/ann", headers(herald.backend, contentType: nil))
            let fcm = (why.object["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "fcm" }
            if changedBeforeInstant {
                #expect(fcm?["chosen"] as? Bool == false, "decided at its instant, with the settings then: \(why.object)")
            }
        }
    }

    @Test func badSendTimesAreRefusedNamingTheField() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let base: [String: Any] = ["type": "comment", "title": "t", "user_ids": ["ann"]]
            let cases: [([String: Any], String)] = [
                (["send_at": "tomorrow"], "send_at"),
                (["send_at": "2026-12-01T09:00:00"], "send_at"),
                (["send_at": Timestamp.format(Date().addingTimeInterval(400 * 86_400))], "send_at"),
                (["send_at": Timestamp.format(Date().addingTimeInterval(3600)), "expires_at": Timestamp.format(Date().addingTimeInterval(60))], "expires_at"),
            ]
            for (extra, field) in cases {
                let body = base.merging(extra) { $1 }
                let refused = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
                #expect(refused.status == .unprocessableContent, "\(extra): \(refused.object)")
                let message = (refused.object["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("'\(field)'"), "\(extra): \(refused.object)")
            }
            // A time in the past sends now.
            let past = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: base.merging(["send_at": "2020-01-01T00:00:00Z"]) { $1 })
            #expect(past.status == .accepted && past.object["status"] == nil, "\(past.object)")
        }
    }

    /// `DELETE /api/notifications/{id}`: a scheduled send cancelled before its instant reaches
    /// nobody; once everything went out there is nothing to cancel.
    @Test func aCancelledScheduledSendReachesNobody() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-ann"])
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "comment", "title": "Reminder", "user_ids": ["ann"], "send_at": Timestamp.format(Date().addingTimeInterval(3600))])
            let id = try #require(sent.object["id"] as? String)
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect(status.object["counts"] as? [String: Int] == ["scheduled": 1, "waiting": 0, "sent": 0, "cancelled": 0, "folded": 0], "\(status.object)")
            let cancelled = try await client.call(.delete, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect(cancelled.status == .ok, "\(cancelled.object)")
            #expect(cancelled.object["cancelled_recipients"] as? Int == 1 && cancelled.object["cancelled_deliveries"] as? Int == 0)
            let after = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect((after.object["fan_out"] as? [String: Any])?["state"] as? String == "cancelled")
            #expect(after.object["counts"] as? [String: Int] == ["scheduled": 0, "waiting": 0, "sent": 0, "cancelled": 1, "folded": 0], "\(after.object)")
            #expect(try await client.call(.delete, "/api/notifications/\(id)", headers(herald.backend, contentType: nil)).status == .conflict)

            // Sent at once and delivered: nothing left.
            let now = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "Now", "user_ids": ["ann"]])
            let nowID = try #require(now.object["id"] as? String)
            try await herald.deliver()
            let late = try await client.call(.delete, "/api/notifications/\(nowID)", headers(herald.backend, contentType: nil))
            #expect(late.status == .conflict && (late.object["error"] as? [String: Any])?["code"] as? String == "already_sent", "\(late.object)")
            for (path, status) in [("/api/notifications/\(ObjectIDGenerator().next())", 404), ("/api/notifications/nope", 404)] {
                #expect(Int(try await client.call(.delete, path, headers(herald.backend, contentType: nil)).status.code) == status, "\(path)")
            }
            #expect(try await client.call(.delete, "/api/notifications/\(nowID)", headers(herald.communicator, contentType: nil)).status == .forbidden)
        }
    }

    /// A scheduled broadcast is posted to the feed at its instant, with the instant as its
    /// `posted_at`; its feed delivery is shown as `scheduled` until then.
    @Test func aScheduledBroadcastIsPostedAtItsInstant() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            /// - Returns: its id, and whether it was scheduled (a request a loaded machine sent
            ///   after the instant goes out at once, as documented).
            func schedule(_ title: String, at instant: Date) async throws -> (id: String, scheduled: Bool) {
                let sent = try await client.call(
                    .post, "/api/notifications", headers(herald.backend),
                    json: ["type": "generic", "title": title, "broadcast": true, "send_at": Timestamp.format(instant)])
                #expect(sent.status == .accepted, "\(sent.object)")
                return (try #require(sent.object["id"] as? String), sent.object["status"] as? String == "scheduled")
            }
            func feedMessages() async throws -> [[String: Any]] {
                let feed = try await client.call(.get, "/feed/index.json", headers(contentType: nil))
                return feed.object["messages"] as? [[String: Any]] ?? []
            }
            // An hour ahead: not posted, its feed delivery shown as scheduled.
            let hourAhead = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3600).rounded(.up))
            let (later, laterScheduled) = try await schedule("Later", at: hourAhead)
            #expect(laterScheduled)
            try await herald.deliver()
            #expect(try await feedMessages().isEmpty, "not posted before its instant")
            let status = try await client.call(.get, "/api/notifications/\(later)", headers(herald.backend, contentType: nil))
            #expect((status.object["counts"] as? [String: Int])?["scheduled"] == 1, "\(status.object)")
            #expect((status.object["deliveries"] as? [[String: Any]])?.first?["state"] as? String == "scheduled")
            #expect(((status.object["notification"] as? [String: Any])?["send_at"] as? String).flatMap(Timestamp.parse) == hourAhead)

            // A second ahead: posted then, with its instant as posted_at.
            let instant = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 1).rounded(.up))
            let (_, scheduled) = try await schedule("Snow day", at: instant)
            try await Task.sleep(for: .seconds(max(instant.timeIntervalSinceNow, 0) + 0.05))
            try await herald.deliver()
            let messages = try await feedMessages()
            #expect(messages.compactMap { $0["title"] as? String } == ["Snow day"], "\(messages)")
            if scheduled {
                #expect((messages.first?["posted_at"] as? String).flatMap(Timestamp.parse) == instant, "\(messages)")
            }
        }
    }
}
