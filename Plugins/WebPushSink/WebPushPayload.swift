import Crypto
public import Foundation
import HeraldCore

/// Web Push message encryption (RFC 8291) in the `aes128gcm` content coding (RFC 8188), one
/// record: what a browser's push subscription can decrypt with its private key and `auth` secret.
public enum WebPushPayload {
    /// One aes128gcm record holds 4096 bytes: 86 of header aside, 16 of tag and 1 of padding
    /// delimiter leave 3 993 bytes of plaintext.
    public static let maxPlaintextBytes = 3_993
    static let recordSize: UInt32 = 4_096

    /// Why a payload could not be encrypted for a subscription (its keys are malformed).
    public enum Failure: Error, Equatable {
        case invalidKey(String)
        case tooLarge(Int)
        case malformed(String)
    }

    /// Encrypts `plaintext` for the subscription whose public key is `receiverPublicKey`
    /// (`p256dh`, 65 bytes uncompressed) and whose auth secret is `authSecret` (16 bytes). The
    /// sender's ephemeral key and the salt are fresh per message unless given (tests).
    public static func encrypt(
        _ plaintext: some DataProtocol, receiverPublicKey: Data, authSecret: Data,
        senderKey: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey(), salt: Data? = nil
    ) throws -> Data {
        let plaintext = Data(plaintext)
        guard plaintext.count <= maxPlaintextBytes else { throw Failure.tooLarge(plaintext.count) }
        guard authSecret.count == 16 else { throw Failure.invalidKey("auth must be 16 bytes") }
        let receiver: P256.KeyAgreement.PublicKey
        do {
            receiver = try P256.KeyAgreement.PublicKey(x963Representation: receiverPublicKey)
        } catch {
            throw Failure.invalidKey("p256dh must be an uncompressed P-256 point (65 bytes)")
        }
        let salt = salt ?? Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let senderPublic = senderKey.publicKey.x963Representation
        let shared = try senderKey.sharedSecretFromKeyAgreement(with: receiver)
        let (key, nonce) = deriveKeyAndNonce(
            shared: shared, authSecret: authSecret, receiverPublic: receiverPublicKey, senderPublic: senderPublic, salt: salt
        )
        var record = plaintext
        record.append(0x02) // the last (and only) record's padding delimiter
        let sealed = try AES.GCM.seal(record, using: key, nonce: nonce)
        var body = salt
        withUnsafeBytes(of: recordSize.bigEndian) { body.append(contentsOf: $0) }
        body.append(UInt8(senderPublic.count))
        body.append(senderPublic)
        body.append(sealed.ciphertext)
        body.append(sealed.tag)
        return body
    }

    /// Decrypts a one-record aes128gcm body with the subscription's private key and auth secret
    /// (what a browser does; the Web Push emulator uses it).
    public static func decrypt(_ body: Data, receiverKey: P256.KeyAgreement.PrivateKey, authSecret: Data) throws -> Data {
        let bytes = [UInt8](body)
        guard bytes.count > 21 else { throw Failure.malformed("shorter than the aes128gcm header") }
        let salt = Data(bytes[0..<16])
        let idLength = Int(bytes[20])
        guard bytes.count >= 21 + idLength + 17 else { throw Failure.malformed("shorter than its key id and one record") }
        let senderPublic = Data(bytes[21..<(21 + idLength)])
        let sender: P256.KeyAgreement.PublicKey
        do {
            sender = try P256.KeyAgreement.PublicKey(x963Representation: senderPublic)
        } catch {
            throw Failure.malformed("the key id is not a P-256 public key")
        }
        let shared = try receiverKey.sharedSecretFromKeyAgreement(with: sender)
        let (key, nonce) = deriveKeyAndNonce(
            shared: shared, authSecret: authSecret, receiverPublic: receiverKey.publicKey.x963Representation, senderPublic: senderPublic, salt: salt
        )
        let record = bytes[(21 + idLength)...]
        let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: Data(record.dropLast(16)), tag: Data(record.suffix(16)))
        var plaintext = try AES.GCM.open(box, using: key)
        // Padding: zeros after the delimiter, which is 0x02 in the last record.
        while let last = plaintext.last, last == 0 { plaintext.removeLast() }
        guard plaintext.last == 0x02 else { throw Failure.malformed("no last-record delimiter") }
        plaintext.removeLast()
        return plaintext
    }

    /// RFC 8291 §3.4 and RFC 8188 §2.2: the content-encryption key and the nonce.
    static func deriveKeyAndNonce(
        shared: SharedSecret, authSecret: Data, receiverPublic: Data, senderPublic: Data, salt: Data
    ) -> (SymmetricKey, AES.GCM.Nonce) {
        var keyInfo = Data("WebPush: info".utf8)
        keyInfo.append(0)
        keyInfo.append(receiverPublic)
        keyInfo.append(senderPublic)
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: authSecret, sharedInfo: keyInfo, outputByteCount: 32)
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: ikm, salt: salt)
        let cek = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Data("Content-Encoding: aes128gcm\u{0}".utf8), outputByteCount: 16)
        let nonce = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Data("Content-Encoding: nonce\u{0}".utf8), outputByteCount: 12)
        let nonceBytes = nonce.withUnsafeBytes { Data($0) }
        // A 12-byte nonce is always valid.
        return (cek, (try? AES.GCM.Nonce(data: nonceBytes)) ?? AES.GCM.Nonce())
    }
}
