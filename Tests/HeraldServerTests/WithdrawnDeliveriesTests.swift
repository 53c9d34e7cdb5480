import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// A push accepted for a device waits in memory for a worker (the hand-off) and is sent without
/// reading its row again. When the device is unregistered, or registered by another user, before
/// a worker takes it, the store fails the row; the waiting copy must not go either. It did: a
/// push for the device's previous owner reached the new one.
@Suite(.cleansUp) struct WithdrawnDeliveriesTests {
    @Test func aDeviceMovedOrUnregisteredGetsNothingQueuedBefore() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (user, token) in [("alice", "tok-shared"), ("carol", "tok-carol"), ("dave", "tok-dave")] {
                let register = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": token])
                #expect(register.status == .ok)
            }
            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "message", "title": "private", "user_ids": ["alice", "carol", "dave"]])
            #expect(send.status == .accepted)
            let id = try #require(send.object["id"] as? String)

            // Before any worker runs: alice's token is now bob's, carol's device is gone.
            let moved = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "bob"), json: ["fcm_token": "tok-shared"])
            #expect(moved.status == .ok)
            let removed = try await client.call(
                .delete, "/api/notifications/register", headers(herald.backend, user: "carol"), json: ["fcm_token": "tok-carol"])
            #expect(removed.status == .noContent)

            try await herald.deliver()
            #expect(herald.push.received.map(\.recipient.device?.token) == ["tok-dave"], "only dave's push went")
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
            let fcm = (status.object["summary"] as? [String: [String: Int]])?["fcm"]
            #expect(fcm == ["failed": 2, "delivered": 1], "\(status.object)")
        }
    }
}
