import Crypto
public import Foundation
import SwiftASN1
import X509

/// A certificate an emulator serves TLS with, made at start: self-signed (its own CA), valid
/// for `localhost` and `127.0.0.1` (or the names given). A client trusts it by its PEM file
/// (`--write-ca`), never by turning verification off.
public struct SelfSignedCertificate: Sendable {
    public let certificatePEM: String
    public let privateKeyPEM: String

    public init(commonName: String, dnsNames: [String] = ["localhost"], now: Date = Date()) throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
            try ExtendedKeyUsage([.serverAuth])
            SubjectAlternativeNames(dnsNames.map { .dnsName($0) } + [.ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3_600), notValidAfter: now.addingTimeInterval(365 * 86_400), issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: .init(key)
        )
        certificatePEM = try certificate.serializeAsPEM().pemString
        privateKeyPEM = key.pemRepresentation
    }
}
