import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// `DELETE /api/users/{id}`: what an app's "delete my account" needs of Herald. Without it a
/// user's devices, history, settings and events stayed for as long as Herald ran.
@Suite(.cleansUp) struct UserErasureAPITests {
    @Test func aBackendErasesAUserAndNothingOfTheirsIsLeft() async throws {
        let herald = try await TestHerald.make()
        let token = try await herald.userToken("bye")
        try await herald.test { client in
            for user in ["bye", "stay"] {
                let register = try await client.call(
                    .post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "tok-\(user)"])
                #expect(register.status == .ok)
                _ = try await client.call(.put, "/api/users/\(user)", headers(herald.backend), json: ["tier_id": "gold"])
            }
            _ = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "t", "user_ids": ["bye", "stay"]])
            try await herald.deliver()
            // Queued after the pushes above were made: never sent once the user is erased.
            _ = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "u", "user_ids": ["bye"]])

            // Only backends and admins may erase; the user's own token, or a communicator, may not.
            for (name, key) in [("user token", token), ("communicator", herald.communicator)] {
                let refused = try await client.call(.delete, "/api/users/bye", headers(key))
                #expect(refused.status == .forbidden || refused.status == .unauthorized, "\(name): \(refused.status)")
            }
            let erased = try await client.call(.delete, "/api/users/bye", headers(herald.backend))
            #expect(erased.status == .ok, "\(erased.errorMessage)")
            #expect(erased.object["id"] as? String == "bye")
            let counts = erased.object["erased"] as? [String: Int]
            #expect(counts?["devices"] == 1 && counts?["history"] == 2, "\(erased.object)")

            let pushesBefore = herald.push.received.count
            try await herald.deliver()
            #expect(herald.push.received.count == pushesBefore, "the queued push went nowhere")
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "bye"))
            #expect((history.object["history"] as? [Any])?.isEmpty == true)
            let kept = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "stay"))
            #expect((kept.object["history"] as? [Any])?.count == 1, "another user keeps theirs")

            // Again: nothing left, still a 200. A malformed id is refused, not erased.
            let again = try await client.call(.delete, "/api/users/bye", headers(herald.backend))
            #expect(again.status == .ok && (again.object["erased"] as? [String: Int])?.values.allSatisfy { $0 == 0 } == true, "\(again.object)")
            let bad = try await client.call(.delete, "/api/users/%E9", headers(herald.backend))
            #expect(bad.status == .unprocessableContent, "\(bad.status)")
        }
    }
}
