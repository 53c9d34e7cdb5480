import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// Idempotency keys per the IETF Idempotency-Key draft and Stripe: scoped to the API key that
/// sent them, the same parsed request replays, another request is refused, 24 hours.
@Suite(.cleansUp) struct IdempotencyAPITests {
    static let body = #"{"type":"generic","title":"Shipped","body":"Order 1","user_ids":["u"],"idempotency_key":"order-1"}"#
    static let sameReordered = #"{ "user_ids" : ["u"], "idempotency_key":"order-1", "body":"Order 1", "title":"Shipped", "type":"generic" }"#
    static let different = #"{"type":"generic","title":"Shipped","body":"Order 2","user_ids":["u"],"idempotency_key":"order-1"}"#

    func backendKey(_ herald: TestHerald, _ name: String) async throws -> String {
        let secret = APIKeySecret.generate()
        try await herald.server.store.createKey(
            APIKeyRecord(id: ObjectIDGenerator().next(), name: name, role: .backend, createdAt: Date()), secretHash: APIKeySecret.hash(secret))
        return secret
    }

    @Test func keysAreScopedToTheSenderAndTheSameRequestReplays() async throws {
        let herald = try await TestHerald.make()
        let other = try await backendKey(herald, "backend-b")
        try await herald.test { client in
            let first = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.body)
            #expect(first.status == .accepted && first.headers[HTTPField.Name("Idempotent-Replayed")!] == nil)
            let replay = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.sameReordered)
            #expect(replay.status == .accepted)
            #expect(replay.object["id"] as? String == first.object["id"] as? String, "the same parsed JSON is the same request")
            #expect(replay.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")

            let fromB = try await client.call(.post, "/api/notifications", headers(other), json: Self.body)
            #expect(fromB.status == .accepted)
            #expect(fromB.object["id"] as? String != first.object["id"] as? String, "another backend's key of the same name is another key")

            let reused = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.different)
            #expect(reused.status == .unprocessableContent)
            #expect(reused.errorCode == "idempotency_key_reused")
            try await herald.deliver()
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u", contentType: nil))
            #expect((history.object["history"] as? [Any])?.count == 2, "A's and B's notifications, once each")
        }
    }

    @Test func theHeaderAndTheFieldAreOneKey() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            var withHeader = headers(herald.backend)
            withHeader[HTTPField.Name("Idempotency-Key")!] = "order-1"
            let noField = #"{"type":"generic","title":"Shipped","body":"Order 1","user_ids":["u"]}"#
            let first = try await client.call(.post, "/api/notifications", withHeader, json: noField)
            #expect(first.status == .accepted)
            let viaField = try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.body)
            #expect(viaField.object["id"] as? String == first.object["id"] as? String, "header or field, one key and one request")
            #expect(viaField.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            var clash = headers(herald.backend)
            clash[HTTPField.Name("Idempotency-Key")!] = "order-2"
            let both = try await client.call(.post, "/api/notifications", clash, json: Self.body)
            #expect(both.status == .unprocessableContent)
            #expect(both.errorMessage.contains("idempotency_key"))
        }
    }

    /// Duplicates sent at once: one notification, every answer carries its id.
    @Test func concurrentDuplicatesAreAcceptedOnce() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let ids = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<12 {
                    group.addTask { try await client.call(.post, "/api/notifications", headers(herald.backend), json: Self.body).object["id"] as? String }
                }
                var ids: [String?] = []
                for try await id in group { ids.append(id) }
                return ids
            }
            #expect(ids.count == 12 && Set(ids).count == 1 && ids.first != nil, "\(ids)")
            try await herald.deliver()
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u", contentType: nil))
            #expect((history.object["history"] as? [Any])?.count == 1)
        }
    }

    @Test func keysExpireAfterADay() async throws {
        let herald = try await TestHerald.make()
        let submission = NotificationSubmission(type: "generic", title: "t", idempotencyKey: "daily", userIDs: ["u"])
        let t0 = Date()
        let first = try await herald.server.service.send(submission, now: t0, scope: "k", requestHash: "h")
        let again = try await herald.server.service.send(submission, now: t0.addingTimeInterval(23 * 3600), scope: "k", requestHash: "h")
        #expect(again == .replayed(first.receipt))
        await #expect(throws: HeraldError.self) {
            _ = try await herald.server.service.send(submission, now: t0.addingTimeInterval(23 * 3600), scope: "k", requestHash: "other")
        }
        let later = try await herald.server.service.send(submission, now: t0.addingTimeInterval(25 * 3600), scope: "k", requestHash: "other")
        guard case .accepted(let receipt) = later else {
            Issue.record("after 24 h the key is free: \(later)")
            return
        }
        #expect(receipt.id != first.receipt.id)
    }
}
