import Foundation
import HTTPTypes
import HeraldCore
import HeraldTestSupport
import HummingbirdTesting
import JWTKit
import Testing

@testable import HeraldServer

/// The promises of docs/security.md, "User and device tokens": tokens Herald mints say what they
/// are and never renew themselves, an erasure or a sign-out ends every token issued before it,
/// and knowing an anonymous device's id is not enough to get its account.
@Suite(.cleansUp) struct TokenSecurityTests {
    /// The claims of a JWT, read without checking it.
    static func claims(_ token: String) -> [String: Any] {
        let parts = token.split(separator: ".")
        guard parts.count == 3, let data = Base64URL.decode(String(parts[1])) else { return [:] }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// A backend's token with only `sub` and `exp`, as many backends mint them.
    static func undatedToken(userID: String) async throws -> String {
        struct Claims: JWTPayload {
            var sub: SubjectClaim
            var exp: ExpirationClaim
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TestHerald.userTokenSecret), digestAlgorithm: .sha256)
        return try await keys.sign(Claims(sub: SubjectClaim(value: userID), exp: ExpirationClaim(value: Date().addingTimeInterval(3600))))
    }

    @Test func aDeviceTokenSaysWhatItIsAndIsNeverAProof() async throws {
        let herald = try await TestHerald.make()
        // A proof that lives ten minutes: the device token it buys lives no longer.
        let proofExpires = Date().addingTimeInterval(600)
        let proof = try await herald.userToken("alice", expires: proofExpires)
        try await herald.test { client in
            let signedIn = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "phone-a", "proof": proof])
            #expect(signedIn.status == .ok, "\(signedIn.errorMessage)")
            let token = try #require(signedIn.object["token"] as? String)
            let claims = Self.claims(token)
            #expect(claims["kind"] as? String == "device" && claims["device_id"] as? String == "phone-a" && claims["sub"] as? String == "alice")
            let issued = try #require(claims["iat"] as? Double)
            #expect(abs(issued - Date().timeIntervalSince1970) < 60)
            let expires = try #require(claims["exp"] as? Double)
            #expect(expires <= proofExpires.timeIntervalSince1970, "a 10-minute proof bought a token until \(Date(timeIntervalSince1970: expires))")
            #expect(signedIn.object["expires_at"] is String)

            // Exchanged again as a proof: refused, so a leaked token cannot be renewed forever.
            let renewed = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "phone-a", "proof": token])
            #expect(renewed.status == .unauthorized && renewed.errorCode == "invalid_proof", "\(renewed.status) \(renewed.errorMessage)")
            // The token itself still works for the user's own endpoints, and a device registered
            // with it records the installation that signed in.
            #expect(try await client.call(.get, "/api/notifications/history", headers(token)).status == .ok)
            #expect(try await client.call(.post, "/api/notifications/register", headers(token), json: ["fcm_token": "alice-phone"]).status == .ok)
            #expect(try await herald.server.store.devices(userID: "alice").first?.installationID == "phone-a")
        }
    }

    @Test func erasureEndsEveryTokenIssuedBeforeIt() async throws {
        let herald = try await TestHerald.make()
        let backendToken = try await herald.userToken("gone")
        try await herald.test { client in
            let signedIn = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "phone-g", "proof": backendToken])
            let deviceToken = try #require(signedIn.object["token"] as? String)
            for token in [backendToken, deviceToken] {
                #expect(try await client.call(.get, "/api/notifications/history", headers(token)).status == .ok)
            }
            #expect(try await client.call(.delete, "/api/users/gone", headers(herald.backend)).status == .ok)
            for (name, token) in [("backend token", backendToken), ("device token", deviceToken)] {
                let after = try await client.call(.get, "/api/notifications/history", headers(token))
                #expect(after.status == .unauthorized && after.errorCode == "token_ended", "\(name): \(after.status)")
                let register = try await client.call(.post, "/api/notifications/register", headers(token), json: ["fcm_token": "again"])
                #expect(register.status == .unauthorized, "\(name) recreated the erased user's data: \(register.status)")
            }
            let asProof = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "phone-g", "proof": backendToken])
            #expect(asProof.status == .unauthorized, "an ended token bought a new one")
            // Issued after the erasure (the next whole second: tokens carry whole seconds), a
            // token works: the user may come back.
            try await Task.sleep(for: .milliseconds(1_100))
            let fresh = try await herald.userToken("gone")
            #expect(try await client.call(.get, "/api/notifications/history", headers(fresh)).status == .ok)
        }
    }

    @Test func aSignOutEndsTokensAndKeepsTheData() async throws {
        let herald = try await TestHerald.make()
        let token = try await herald.userToken("pat")
        // A backend's token without `iat`: nothing says when it was issued.
        let undated = try await Self.undatedToken(userID: "pat")
        try await herald.test { client in
            #expect(try await client.call(.get, "/api/notifications/history", headers(undated)).status == .ok, "accepted until a sign-out")
            _ = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "kept", "user_ids": ["pat"]])
            for role in [herald.communicator, token] {
                let refused = try await client.call(.post, "/api/users/pat/sign-out", headers(role))
                #expect(refused.status == .forbidden, "\(refused.status)")
            }
            let signedOut = try await client.call(.post, "/api/users/pat/sign-out", headers(herald.admin))
            #expect(signedOut.status == .ok && signedOut.object["id"] as? String == "pat", "\(signedOut.errorMessage)")
            #expect(signedOut.object["tokens_ended_before"] is String)
            for (name, old) in [("dated", token), ("undated", undated)] {
                let refused = try await client.call(.get, "/api/notifications/history", headers(old))
                #expect(refused.status == .unauthorized && refused.errorCode == "token_ended", "\(name): \(refused.status)")
            }
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "pat"))
            #expect((history.object["history"] as? [Any])?.count == 1, "a sign-out erases nothing")
            let bad = try await client.call(.post, "/api/users/%20/sign-out", headers(herald.admin))
            #expect(bad.status == .unprocessableContent)
        }
    }

    @Test func anAnonymousDeviceNeedsItsSecretAfterItsFirstSignUp() async throws {
        let herald = try await TestHerald.make { $0.deviceSignUp = true }
        try await herald.test { client in
            let short = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "abc"])
            #expect(short.status == .unprocessableContent && short.errorMessage.contains("device_id"), "\(short.errorMessage)")

            let device = "install-7f3a9c1e2b4d"
            let first = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": device])
            #expect(first.status == .ok)
            let secret = try #require(first.object["device_secret"] as? String)
            let user = try #require(first.object["user_id"] as? String)

            // Someone else who learns the id: no account.
            let takeover = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": device])
            #expect(takeover.status == .unauthorized && takeover.errorCode == "device_secret_required", "\(takeover.status)")
            let guessed = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": device, "device_secret": "hds_guess"])
            #expect(guessed.status == .unauthorized && guessed.errorCode == "invalid_device_secret")
            // The device itself renews with its secret, and gets no new one.
            let renewed = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": device, "device_secret": secret])
            #expect(renewed.status == .ok && renewed.object["user_id"] as? String == user && renewed.object["device_secret"] == nil)
            let tooLong = try await client.call(
                .post, "/api/auth/device", headers(), json: ["device_id": device, "device_secret": String(repeating: "s", count: 300)])
            #expect(tooLong.status == .unprocessableContent && tooLong.errorMessage.contains("device_secret"))
        }
    }

    /// Anonymous users from before device secrets have none: the first sign-in claims the
    /// account while `auth.device_secret_claim_until` has not passed, and none can after.
    @Test func anAnonymousUserFromBeforeSecretsIsClaimedOnlyWhileTheWindowIsOpen() async throws {
        for (open, until) in [(true, Date().addingTimeInterval(3600)), (false, Date().addingTimeInterval(-3600))] {
            let herald = try await TestHerald.make {
                $0.deviceSignUp = true
                $0.deviceSecretClaimUntil = until
            }
            let device = "old-install-0123456789"
            let user = DeviceAuthRoutes.anonymousUser(deviceID: device)
            // What the older Herald left: the user's settings, no secret.
            try await herald.test { client in
                _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: user), json: ["enabled": true])
                let claim = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": device])
                if open {
                    #expect(claim.status == .ok && claim.object["device_secret"] is String, "\(claim.errorMessage)")
                } else {
                    #expect(claim.status == .unauthorized && claim.errorCode == "device_secret_required", "\(claim.status)")
                    // A device never seen before still signs up after the window.
                    let fresh = try await client.call(.post, "/api/auth/device", headers(), json: ["device_id": "new-install-0123456789"])
                    #expect(fresh.status == .ok && fresh.object["device_secret"] is String)
                }
            }
        }
    }

    @Test func failedCredentialChecksAreLimitedPerClientAddress() async throws {
        let herald = try await TestHerald.make { $0.failedAuthPerMinute = 3 }
        try await herald.test { client in
            func get(_ token: String) async throws -> (Int, String?) {
                let response = try await client.call(.get, "/api/notifications/history", headers(token, user: "u1"))
                return (Int(response.status.code), response.headers[.retryAfter])
            }
            // An expired token is no guess: never counted.
            let expired = try await herald.userToken("u1", expires: Date().addingTimeInterval(-10))
            for _ in 0..<5 { #expect(try await get(expired).0 == 401) }
            for _ in 0..<3 { #expect(try await get("hk_" + String(repeating: "0", count: 48)).0 == 401) }
            let limited = try await get("hk_" + String(repeating: "1", count: 48))
            #expect(limited.0 == 429 && (Int(limited.1 ?? "") ?? 0) >= 1, "\(limited)")
            // Until the bucket refills, the address is refused before its key is read.
            #expect(try await get(herald.backend).0 == 429)
        }
    }

    /// Each registration may name a new host for Herald to look up and remember: a user, or a
    /// key, registering without end is turned away with 429 and Retry-After.
    @Test func deviceRegistrationsAreLimitedPerUserAndPerKey() async throws {
        let herald = try await TestHerald.make {
            $0.registrationsPerUserPerMinute = 3
            $0.registrationsPerKeyPerMinute = 5
        }
        let token = try await herald.userToken("reg")
        try await herald.test { client in
            for n in 0..<3 {
                #expect(try await client.call(.post, "/api/notifications/register", headers(token), json: ["fcm_token": "t\(n)"]).status == .ok)
            }
            let limited = try await client.call(.post, "/api/notifications/register", headers(token), json: ["fcm_token": "t9"])
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited" && limited.headers[.retryAfter] != nil)
            // The key acting for many users: its own allowance (each user has room).
            for n in 0..<5 {
                let user = "k\(n)"
                #expect(
                    try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": user]).status == .ok)
            }
            let keyLimited = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "k9"), json: ["fcm_token": "k9"])
            #expect(keyLimited.status == .tooManyRequests)
        }
    }
}
