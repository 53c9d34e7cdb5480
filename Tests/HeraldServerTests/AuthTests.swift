import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@Suite(.cleansUp) struct AuthTests {
    @Test func authenticationAndRoleMatrix() async throws {
        let herald = try await TestHerald.make()
        let own = try await herald.userToken("alice")
        let expired = try await herald.userToken("alice", expires: Date().addingTimeInterval(-60))
        let forged = try await herald.userToken("alice", secret: "another-secret-0123456789abcdef-0123456789")
        let send = js(["type": "generic", "title": "t", "user_ids": ["alice"]])

        struct Row: Sendable {
            var name: String
            var method: HTTPRequest.Method
            var uri: String
            var headers: HTTPFields
            var body: String?
            var status: Int
            var code: String?
        }
        let rows: [Row] = [
            Row(name: "no credentials", method: .get, uri: "/api/notifications/settings", headers: headers(), status: 401, code: "missing_credentials"),
            Row(
                name: "unknown key", method: .get, uri: "/api/notifications/settings",
                headers: headers("hk_0000000000000000000000000000000000000000000000", user: "alice"), status: 401, code: "invalid_credentials"),
            Row(
                name: "not a bearer", method: .get, uri: "/api/notifications/settings",
                headers: {
                    var h = headers()
                    h[.authorization] = "Basic abc"
                    return h
                }(), status: 401, code: "invalid_credentials"),
            Row(name: "garbage token", method: .get, uri: "/api/notifications/settings", headers: headers("garbage"), status: 401, code: "invalid_credentials"),
            Row(
                name: "backend without X-User-ID", method: .get, uri: "/api/notifications/settings", headers: headers(herald.backend), status: 400,
                code: "missing_user_id"),
            Row(name: "backend acting", method: .get, uri: "/api/notifications/settings", headers: headers(herald.backend, user: "alice"), status: 200),
            Row(name: "admin acting", method: .get, uri: "/api/notifications/settings", headers: headers(herald.admin, user: "alice"), status: 200),
            Row(
                name: "communicator acting", method: .get, uri: "/api/notifications/settings", headers: headers(herald.communicator, user: "alice"),
                status: 403, code: "forbidden"),
            Row(name: "user token, own data", method: .get, uri: "/api/notifications/settings", headers: headers(own), status: 200),
            Row(name: "user token naming itself", method: .get, uri: "/api/notifications/history", headers: headers(own, user: "alice"), status: 200),
            Row(
                name: "user token for another user", method: .get, uri: "/api/notifications/history", headers: headers(own, user: "bob"), status: 403,
                code: "forbidden"),
            Row(name: "expired user token", method: .get, uri: "/api/notifications/settings", headers: headers(expired), status: 401, code: "token_expired"),
            Row(name: "forged user token", method: .get, uri: "/api/notifications/settings", headers: headers(forged), status: 401, code: "invalid_token"),
            Row(
                name: "bad X-User-ID", method: .get, uri: "/api/notifications/settings", headers: headers(herald.backend, user: "has space"), status: 422,
                code: "invalid_field"),
            Row(
                name: "X-User-ID not in NFC", method: .get, uri: "/api/notifications/settings", headers: headers(herald.backend, user: "Jose\u{301}"),
                status: 422, code: "invalid_field"),
            Row(name: "send without key", method: .post, uri: "/api/notifications", headers: headers(), body: send, status: 401),
            Row(name: "send as communicator", method: .post, uri: "/api/notifications", headers: headers(herald.communicator), body: send, status: 403),
            Row(name: "send with user token", method: .post, uri: "/api/notifications", headers: headers(own), body: send, status: 403),
            Row(name: "send as backend", method: .post, uri: "/api/notifications", headers: headers(herald.backend), body: send, status: 202),
            Row(name: "send as admin", method: .post, uri: "/api/notifications", headers: headers(herald.admin), body: send, status: 202),
            Row(
                name: "set user as communicator", method: .put, uri: "/api/users/alice", headers: headers(herald.communicator), body: js(["region": "QC"]),
                status: 403),
            Row(name: "set user with user token", method: .put, uri: "/api/users/alice", headers: headers(own), body: js(["region": "QC"]), status: 403),
            Row(name: "status with user token", method: .get, uri: "/api/notifications/62505215624257b417055bc4", headers: headers(own), status: 403),
            Row(name: "health needs nothing", method: .get, uri: "/health/live", headers: headers(), status: 200),
        ]
        try await herald.test { client in
            for row in rows {
                let response = try await client.call(row.method, row.uri, row.headers, json: row.body)
                #expect(response.status.code == row.status, "\(row.name): got \(response.status) \(String(buffer: response.body))")
                if let code = row.code {
                    #expect(response.errorCode == code, "\(row.name): \(String(buffer: response.body))")
                }
            }
        }
    }

    /// RFC 7519 §4.1.5: not accepted before `nbf`; RFC 7515 §4.1.11: a token naming
    /// extensions it must be understood with (`crit`) is refused, as Herald knows none; so is a
    /// token whose `sub` is not a user id.
    @Test func userTokensNotYetValidOrWithCriticalExtensionsAreRefused() async throws {
        struct Claims: JWTPayload {
            var sub: SubjectClaim
            var exp: ExpirationClaim
            var nbf: NotBeforeClaim?
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TestHerald.userTokenSecret), digestAlgorithm: .sha256)
        let now = Date()
        func token(nbf: Date?, header: JWTHeader = JWTHeader(), sub: String = "alice") async throws -> String {
            let claims = Claims(sub: SubjectClaim(value: sub), exp: ExpirationClaim(value: now.addingTimeInterval(600)), nbf: nbf.map(NotBeforeClaim.init))
            return try await keys.sign(claims, header: header)
        }
        var critical = JWTHeader()
        critical.crit = ["x-herald-unknown"]
        let cases: [(String, String, Int)] = [
            ("valid from a minute ago", try await token(nbf: now.addingTimeInterval(-60)), 200),
            ("no nbf", try await token(nbf: nil), 200),
            ("valid in ten minutes", try await token(nbf: now.addingTimeInterval(600)), 401),
            ("crit", try await token(nbf: nil, header: critical), 401),
            // A sub that is no user id is the token's fault: 401, not a 422 the caller cannot mend.
            ("an empty sub", try await token(nbf: nil, sub: ""), 401),
            ("a sub with a space", try await token(nbf: nil, sub: "has space"), 401),
            ("a sub not in NFC", try await token(nbf: nil, sub: "Jose\u{301}"), 401),
        ]
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (name, token, status) in cases {
                let response = try await client.call(.get, "/api/notifications/settings", headers(token))
                #expect(response.status.code == status, "\(name): \(response.status) \(response.errorMessage)")
                if status == 401 { #expect(response.errorCode == "invalid_token", "\(name)") }
            }
        }
    }

    /// The tokens Herald signs (`herald user-token`, `POST /api/auth/device`) carry `exp` as an
    /// integer, as every JWT library reads it, and never past the expiry asked for.
    @Test func signedTokensExpireAtAWholeSecond() async throws {
        let expires = Date(timeIntervalSince1970: 1_795_801_691.9)
        let token = try await UserTokenVerifier(secret: TestHerald.userTokenSecret).sign(userID: "alice", expires: expires)
        var payload = String(token.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        let json = String(decoding: try #require(Data(base64Encoded: payload)), as: UTF8.self)
        #expect(json.contains("\"exp\":1795801691") && !json.contains("1795801691."), "\(json)")
    }

    @Test func revokedKeysStopWorking() async throws {
        let herald = try await TestHerald.make()
        let keys = try await herald.server.store.keys()
        let backend = try #require(keys.first { $0.role == .backend })
        #expect(try await herald.server.store.revokeKey(id: backend.id, at: Date()))
        try await herald.test { client in
            let response = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "u"))
            #expect(response.status == .unauthorized)
        }
    }

    @Test func userTokensAreRefusedWhenNoSecretIsConfigured() async throws {
        let herald = try await TestHerald.make { $0.userTokenSecret = nil }
        let token = try await herald.userToken("alice")
        try await herald.test { client in
            let response = try await client.call(.get, "/api/notifications/settings", headers(token))
            #expect(response.status == .unauthorized)
            #expect(response.errorMessage.contains("user_token_secret"))
        }
    }

    @Test func keysAreStoredHashed() async throws {
        let herald = try await TestHerald.make()
        #expect(try await herald.server.store.key(secretHash: herald.backend) == nil)
        #expect(try await herald.server.store.key(secretHash: APIKeySecret.hash(herald.backend))?.role == .backend)
    }

    @Test func shortUserTokenSecretsAreRefused() async throws {
        await #expect(throws: HeraldError.self) { _ = try await TestHerald.make { $0.userTokenSecret = "too-short" } }
    }

    @Test func bootstrapKeyMustLookLikeAKey() async throws {
        await #expect(throws: HeraldError.self) { _ = try await TestHerald.make { $0.bootstrapAdminKey = "admin" } }
    }
}
