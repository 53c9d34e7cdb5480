import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// Swift compares strings by canonical equivalence and the stores by bytes, so "José" written
/// with U+00E9 and with "e" + U+0301 were one user to the router and two to the database: sent
/// together they were stored as one recipient, and sent at once to each, a third of the pushes
/// went to the other user's device. A user id must be in NFC, where equivalent means equal.
@Suite(.cleansUp) struct UserIDNormalizationTests {
    static let composed = "Jos\u{e9}"
    static let decomposed = "Jose\u{301}"

    @Test func anIdNotInNFCIsRefusedWhereverAUserIdComesIn() async throws {
        let herald = try await TestHerald.make()
        let token = try await herald.userToken(Self.decomposed)
        try await herald.test { client in
            let registration = try await client.call(
                .post, "/api/notifications/register", headers(herald.backend, user: Self.decomposed), json: ["fcm_token": "t"])
            #expect(registration.status == .unprocessableContent && registration.errorMessage.contains("X-User-ID"), "\(registration.errorMessage)")
            #expect(registration.errorMessage.contains("NFC"), "the message says what to send instead")
            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "message", "title": "t", "body": "b", "user_ids": [Self.composed, Self.decomposed]])
            #expect(send.status == .unprocessableContent && send.errorMessage.contains("user_ids[1]"), "\(send.errorMessage)")
            let audience = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "message", "title": "t", "body": "b", "audience": ["user_ids": [Self.decomposed]]])
            #expect(audience.status.code / 100 == 4 && audience.errorMessage.contains("audience"), "\(audience.errorMessage)")
            let byToken = try await client.call(.get, "/api/notifications/settings", headers(token))
            #expect(byToken.status.code / 100 == 4, "a user token naming such a user is refused: \(byToken.status)")
            let encoded = Self.decomposed.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? ""
            let attributes = try await client.call(.put, "/api/users/\(encoded)", headers(herald.backend), json: ["region": "eu"])
            #expect(attributes.status == .unprocessableContent && attributes.errorMessage.contains("'id'"), "\(attributes.errorMessage)")
            for path in ["Jos%E9", "50%off"] {
                let latin = try await client.call(.put, "/api/users/\(path)", headers(herald.backend), json: ["region": "eu"])
                #expect(latin.status == .unprocessableContent && latin.errorMessage.contains("percent-encoded UTF-8"), "\(path): \(latin.errorMessage)")
            }
            let escaped = try await client.call(.put, "/api/users/Jos%C3%A9%2550", headers(herald.backend), json: ["region": "eu"])
            #expect(escaped.object["id"] as? String == "Jos\u{e9}%50", "\(escaped.status)")
            // Audiences name groups and tiers in NFC and match them by bytes.
            let group = try await client.call(.put, "/api/users/ada", headers(herald.backend), json: ["group_ids": ["caf\u{e9}", "cafe\u{301}"]])
            #expect(group.status == .unprocessableContent && group.errorMessage.contains("group_ids[1]"), "\(group.errorMessage)")
            let tier = try await client.call(.put, "/api/users/ada", headers(herald.backend), json: ["tier_id": "cafe\u{301}"])
            #expect(tier.status == .unprocessableContent && tier.errorMessage.contains("tier_id"), "\(tier.errorMessage)")
        }
        #expect(herald.push.received.isEmpty, "nothing was sent")
    }

    @Test func accentedUsersInNFCGetTheirOwnPushes() async throws {
        let herald = try await TestHerald.make()
        let users = [Self.composed, "Zo\u{eb}", "\u{ac00}", "x\u{301}"] // the last has no composed form: NFC as it is
        try await herald.test { client in
            for (index, user) in users.enumerated() {
                let registration = try await client.call(
                    .post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "token-\(index)"])
                #expect(registration.status == .ok || registration.status == .created, "\(user.unicodeScalars.map(\.value)): \(registration.status)")
            }
            for user in users {
                let send = try await client.call(
                    .post, "/api/notifications", headers(herald.backend), json: ["type": "message", "title": "for \(user)", "body": "b", "user_ids": [user]])
                #expect(send.status == .accepted)
            }
        }
        try await herald.deliver()
        let received = herald.push.received
        #expect(received.count == users.count)
        for (index, user) in users.enumerated() {
            let mine = received.filter { $0.recipient.userID.unicodeScalars.elementsEqual(user.unicodeScalars) }
            #expect(mine.map(\.recipient.device?.token) == ["token-\(index)"], "\(user.unicodeScalars.map(\.value))")
            #expect(mine.map(\.notification.title) == ["for \(user)"])
        }
    }

    @Test func aUserNamedTwiceIsOneRecipientAndListedOnce() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend),
                json: ["type": "message", "title": "t", "body": "b", "user_ids": ["ada", Self.composed, "ada"]])
            #expect(send.status == .accepted && send.object["recipients"] as? Int == 2)
            let id = try #require(send.object["id"] as? String)
            let status = try await client.call(.get, "/api/notifications/\(id)", headers(herald.backend))
            let target = (status.object["notification"] as? [String: Any])?["target"] as? [String: Any]
            #expect(target?["user_ids"] as? [String] == ["ada", Self.composed])
        }
    }

    /// A header's bytes that are not UTF-8 would be read with U+FFFD in their place: `Jos\xE9`
    /// and `Jos\xE8` (Latin-1) would both be the user `Jos\u{FFFD}`.
    @Test func headersThatAreNotUTF8AreRefusedNotReplaced() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            var user = headers(herald.backend)
            user.append(HTTPField(name: HTTPField.Name("X-User-ID")!, value: [0x4A, 0x6F, 0x73, 0xE9]))
            let registration = try await client.execute(
                uri: "/api/notifications/register", method: .post, headers: user, body: ByteBuffer(string: #"{"fcm_token":"latin-1"}"#))
            #expect(registration.status == .unprocessableContent && registration.errorMessage.contains("X-User-ID"), "\(registration.errorMessage)")
            var keyed = headers(herald.backend)
            keyed.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: [0x6B, 0xFF]))
            let send = try await client.execute(
                uri: "/api/notifications", method: .post, headers: keyed,
                body: ByteBuffer(string: #"{"type":"message","title":"t","body":"b","user_ids":["ada"]}"#))
            #expect(send.status == .unprocessableContent && send.errorMessage.contains("Idempotency-Key"), "\(send.errorMessage)")
            var twice = headers(herald.backend)
            twice.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "k1"))
            twice.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "k2"))
            let joined = try await client.execute(
                uri: "/api/notifications", method: .post, headers: twice,
                body: ByteBuffer(string: #"{"type":"message","title":"t","body":"b","user_ids":["ada"]}"#))
            #expect(joined.status == .unprocessableContent && joined.errorMessage.contains("once"), "\(joined.errorMessage)")
        }
        #expect(herald.push.received.isEmpty)
    }

    /// The same over a real connection: NIO's parser puts U+FFFD in place of the bytes before
    /// Herald reads the header, and `Jos\xE9` was stored as the user `Jos\u{FFFD}` (the test
    /// client above hands the bytes over unchanged, so only this one saw it).
    @Test func headersThatAreNotUTF8AreRefusedOverARealConnection() async throws {
        let herald = try await TestHerald.make { $0.port = 0 }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            let port = try #require(client.port)
            func exchange(_ head: String, _ header: [UInt8], body: String) async throws -> String {
                let bytes =
                    Array(head.utf8) + header
                    + Array("\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
                return try await RawHTTP.onThread { try RawHTTP.exchange(port: port, bytes, halfClose: false) }
            }
            let authorization = "Host: x\r\nAuthorization: Bearer \(herald.backend)\r\n"
            let registration = try await exchange(
                "POST /api/notifications/register HTTP/1.1\r\n\(authorization)", Array("X-User-ID: Jos".utf8) + [0xE9], body: #"{"fcm_token":"latin-1"}"#)
            #expect(registration.hasPrefix("HTTP/1.1 422 ") && registration.contains("X-User-ID"), "\(registration)")
            let send = try await exchange(
                "POST /api/notifications HTTP/1.1\r\n\(authorization)", Array("Idempotency-Key: k".utf8) + [0xFF],
                body: #"{"type":"message","title":"t","body":"b","user_ids":["ada"]}"#)
            #expect(send.hasPrefix("HTTP/1.1 422 ") && send.contains("Idempotency-Key"), "\(send)")
            // UTF-8 sent as UTF-8 is the user it names.
            let composed = try await exchange(
                "POST /api/notifications/register HTTP/1.1\r\n\(authorization)", Array("X-User-ID: \(Self.composed)".utf8), body: #"{"fcm_token":"utf-8"}"#)
            #expect(composed.hasPrefix("HTTP/1.1 200 "), "\(composed)")
            #expect(try await herald.server.store.devices(userID: Self.composed).count == 1)
            #expect(try await herald.server.store.devices(userID: "Jos\u{FFFD}").isEmpty)
        }
        #expect(herald.push.received.isEmpty)
    }
}
