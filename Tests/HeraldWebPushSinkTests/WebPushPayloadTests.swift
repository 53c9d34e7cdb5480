import Crypto
import Foundation
import HeraldCore
import HeraldTestSupport
import HeraldWebPushSink
import Testing

/// RFC 8291 §5's worked example, byte for byte (fixed keys and salt), and the round trip.
@Suite(.cleansUp) struct WebPushPayloadTests {
    static let plaintext = "When I grow up, I want to be a watermelon"
    static let receiverPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let receiverPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let senderPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let senderPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8w"
        + "EqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    func data(_ text: String) throws -> Data { try #require(Base64URL.decode(text)) }

    @Test func theRFCExampleEncryptsByteForByte() throws {
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: try data(Self.senderPrivate))
        #expect(Base64URL.encode(sender.publicKey.x963Representation) == Self.senderPublic)
        let body = try WebPushPayload.encrypt(
            Data(Self.plaintext.utf8), receiverPublicKey: try data(Self.receiverPublic), authSecret: try data(Self.authSecret), senderKey: sender,
            salt: try data(Self.salt)
        )
        #expect(Base64URL.encode(body) == Self.body)
    }

    @Test func theRFCExampleDecrypts() throws {
        let receiver = try P256.KeyAgreement.PrivateKey(rawRepresentation: try data(Self.receiverPrivate))
        let plaintext = try WebPushPayload.decrypt(try data(Self.body), receiverKey: receiver, authSecret: try data(Self.authSecret))
        #expect(String(decoding: plaintext, as: UTF8.self) == Self.plaintext)
    }

    @Test func freshKeysRoundTripAndTheRecordLimitHolds() throws {
        let receiver = P256.KeyAgreement.PrivateKey()
        let auth = Data((0..<16).map { UInt8($0) })
        let message = Data(String(repeating: "é", count: 1_996).utf8) // 3 992 bytes
        let body = try WebPushPayload.encrypt(message, receiverPublicKey: receiver.publicKey.x963Representation, authSecret: auth)
        #expect(body.count <= 4_096 + 86)
        #expect(try WebPushPayload.decrypt(body, receiverKey: receiver, authSecret: auth) == message)
        #expect(throws: WebPushPayload.Failure.tooLarge(3_994)) {
            try WebPushPayload.encrypt(Data(repeating: 0x61, count: 3_994), receiverPublicKey: receiver.publicKey.x963Representation, authSecret: auth)
        }
        #expect(throws: WebPushPayload.Failure.self) {
            try WebPushPayload.encrypt(Data("x".utf8), receiverPublicKey: Data(repeating: 4, count: 65), authSecret: auth)
        }
    }

    @Test func vapidKeysRoundTripAndSignForTheEndpointsOrigin() async throws {
        let key = VAPIDKey.generate()
        let again = try VAPIDKey(base64URL: key.privateKeyBase64URL)
        #expect(again.publicKeyBase64URL == key.publicKeyBase64URL)
        #expect(try data(key.publicKeyBase64URL).count == 65)
        let header = try await key.authorization(for: try #require(URL(string: "https://push.example:8443/send/abc?x=1")), subject: "mailto:ops@example.com")
        #expect(header.hasPrefix("vapid t=") && header.hasSuffix(", k=\(key.publicKeyBase64URL)"))
        let token = String(header.dropFirst("vapid t=".count).prefix { $0 != "," })
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        let claims = try JSONSerialization.jsonObject(with: try data(String(parts[1]))) as? [String: Any]
        #expect(claims?["aud"] as? String == "https://push.example:8443")
        #expect(claims?["sub"] as? String == "mailto:ops@example.com")
        let exp = try #require(claims?["exp"] as? Int)
        #expect(exp > Int(Date().timeIntervalSince1970) && exp <= Int(Date().timeIntervalSince1970) + 24 * 3600)
        // The signature verifies with the public key, as a push service checks it.
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try data(String(parts[2])))
        #expect(key.privateKey.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(throws: VAPIDError.self) { try VAPIDKey(base64URL: "too-short") }
    }
}
