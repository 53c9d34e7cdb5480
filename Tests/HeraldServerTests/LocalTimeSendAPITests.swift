import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// `send_at_local` (docs/timing.md): each recipient gets the notification at the wall-clock
/// time named in their own zone, their settings' `timezone` or the server's default.
@Suite(.cleansUp) struct LocalTimeSendAPITests {
    /// The current minute on the UTC wall clock, as `YYYY-MM-DDTHH:MM`: already come in UTC and
    /// in every zone ahead of it, hours away in every zone behind.
    static func thisUTCMinute() -> String {
        String(Timestamp.format(Date()).prefix(16))
    }

    @Test func eachRecipientGetsItAtTheirOwnTime() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (user, zone) in [("east", "Pacific/Kiritimati"), ("plain", nil), ("west", "America/Los_Angeles")] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "t-\(user)"])
                if let zone {
                    let saved = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: user), json: ["timezone": zone])
                    #expect(saved.status == .ok, "\(saved.object)")
                }
            }
            let local = Self.thisUTCMinute()
            let body: [String: Any] = [
                "type": "comment", "title": "Morning", "user_ids": ["east", "plain", "west"], "send_at_local": local, "idempotency_key": "morning",
            ]
            let accepted = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
            #expect(accepted.status == .accepted, "\(accepted.object)")
            #expect(accepted.object["status"] as? String == "scheduled" && accepted.object["send_at_local"] as? String == local)
            #expect(accepted.object["send_at"] == nil && accepted.object["recipients"] as? Int == 3)
            let id = try #require(accepted.object["id"] as? String)
            let replay = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
            #expect(replay.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(replay.object["id"] as? String == id && replay.object["send_at_local"] as? String == local, "the replay says it again: \(replay.object)")
            #expect(replay.object["status"] as? String == "scheduled")

            let waiting = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect((waiting.object["counts"] as? [String: Int])?["scheduled"] == 3, "not paged yet: \(waiting.object)")
            #expect((waiting.object["notification"] as? [String: Any])?["send_at_local"] as? String == local)

            try await herald.server.fanOut.drain()
            try await herald.deliver()
            #expect(Set(herald.push.received.map(\.recipient.userID)) == ["east", "plain"], "their time has come, not the west's")
            let west = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "west", contentType: nil))
            #expect((west.object["history"] as? [Any])?.isEmpty == true, "nothing shows before its time: \(west.object)")
            let plain = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "plain", contentType: nil))
            #expect((plain.object["history"] as? [Any])?.count == 1)
            let paged = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            let counts = try #require(paged.object["counts"] as? [String: Int])
            #expect(counts["scheduled"] == 1, "the west waits: \(paged.object)")
            #expect((paged.object["fan_out"] as? [String: Any])?["state"] as? String == "done", "every recipient has an instant")

            // The explanation is decided at the recipient's own instant.
            let why = try await client.call(.get, "/api/notifications/\(id)/recipients/east", headers(herald.backend, contentType: nil))
            #expect(why.status == .ok, "\(why.object)")

            let cancelled = try await client.call(.delete, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect(cancelled.status == .ok && cancelled.object["cancelled_recipients"] as? Int == 1, "\(cancelled.object)")
            let after = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect((after.object["counts"] as? [String: Int])?["scheduled"] == 0)
            #expect((after.object["counts"] as? [String: Int])?["cancelled"] == 1, "\(after.object)")
            #expect(try await client.call(.delete, "/api/notifications/\(id)", headers(herald.backend, contentType: nil)).status == .conflict)
        }
    }

    /// An audience of everyone, paged by the job: each user's zone read as they are paged.
    @Test func anAudienceOfEveryoneIsPagedWithEachUsersZone() async throws {
        let herald = try await TestHerald.make { $0.fanOutInlineLimit = 1 }
        try await herald.test { client in
            for (user, zone) in [("a", "Asia/Tokyo"), ("b", "America/New_York"), ("c", "UTC")] {
                _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: user), json: ["timezone": zone])
            }
            let accepted = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "generic", "title": "Hi", "audience": ["all": true], "send_at_local": Self.thisUTCMinute()])
            #expect(accepted.status == .accepted, "\(accepted.object)")
            let id = try #require(accepted.object["id"] as? String)
            try await herald.server.fanOut.drain()
            try await herald.deliver()
            for (user, expected) in [("a", 1), ("b", 0), ("c", 1)] {
                let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: user, contentType: nil))
                #expect((history.object["history"] as? [Any])?.count == expected, "\(user): \(history.object)")
            }
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend, contentType: nil))
            #expect((status.object["counts"] as? [String: Int])?["scheduled"] == 1, "\(status.object)")
        }
    }

    @Test func badLocalTimesAreRefusedNamingTheField() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let base: [String: Any] = ["type": "comment", "title": "t", "user_ids": ["ann"]]
            let cases: [[String: Any]] = [
                ["send_at_local": "25:00"],
                ["send_at_local": "9:00"],
                ["send_at_local": "2026-02-30T09:00"],
                ["send_at_local": "2026-12-01T09:00:00+01:00"],
                ["send_at_local": "09:00", "send_at": Timestamp.format(Date().addingTimeInterval(3600))],
                ["send_at_local": String(Timestamp.format(Date().addingTimeInterval(400 * 86_400)).prefix(16))],
            ]
            for extra in cases {
                let refused = try await client.call(.post, "/api/notifications", headers(herald.backend), json: base.merging(extra) { $1 })
                #expect(refused.status == .unprocessableContent, "\(extra): \(refused.object)")
                let message = (refused.object["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("'send_at_local'"), "\(extra): \(refused.object)")
            }
            let broadcast = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "generic", "title": "t", "broadcast": true, "send_at_local": "09:00"])
            #expect(broadcast.status == .unprocessableContent, "\(broadcast.object)")
        }
    }
}
