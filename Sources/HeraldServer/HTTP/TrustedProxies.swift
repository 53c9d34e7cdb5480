import Foundation
import NIOCore

/// The proxies in front of Herald (`server.trusted_proxies`: addresses and CIDR ranges) whose
/// `X-Forwarded-For` names the client. Behind a reverse proxy or a load balancer every
/// connection comes from the proxy, so per-client limits (anonymous sign-ups) counted every
/// client as one. A header from anyone else is ignored: a client could name any address.
struct TrustedProxies: Sendable {
    private struct Range: Sendable {
        var bytes: [UInt8]
        var prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var left = prefix
            for (a, b) in zip(address, bytes) {
                guard left > 0 else { return true }
                let bits = min(8, left)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                guard a & mask == b & mask else { return false }
                left -= bits
            }
            return true
        }
    }

    private let ranges: [Range]

    static let none = TrustedProxies(ranges: [])

    private init(ranges: [Range]) { self.ranges = ranges }

    /// - Throws: the entry that is not an IPv4 or IPv6 address, with an optional `/prefix`.
    init(_ entries: [String]) throws {
        ranges = try entries.map { entry in
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = Self.bytes(String(parts[0])) else { throw TrustedProxiesError.invalid(entry) }
            var prefix = bytes.count * 8
            if parts.count == 2 {
                guard let given = Int(parts[1]), parts[1].allSatisfy(\.isASCII), (0...prefix).contains(given) else {
                    throw TrustedProxiesError.invalid(entry)
                }
                prefix = given
            }
            return Range(bytes: bytes, prefix: prefix)
        }
    }

    var isEmpty: Bool { ranges.isEmpty }

    /// The client of a request that came from `peer`: the peer itself, unless it is a trusted
    /// proxy, in which case the nearest address in `X-Forwarded-For` (read from the right,
    /// each proxy appending the one it saw) that is not a trusted proxy too. An entry that is
    /// not an address ends the walk at the last trusted hop, as anything before it may be forged.
    func client(peer: SocketAddress?, forwardedFor: String?) -> SocketAddress? {
        guard let peer, !ranges.isEmpty, isTrusted(peer), let forwardedFor else { return peer }
        var client = peer
        for entry in forwardedFor.split(separator: ",").reversed() {
            let text = entry.trimmingCharacters(in: .whitespaces)
            guard let address = try? SocketAddress(ipAddress: text, port: 0) else { return client }
            client = address
            if !isTrusted(address) { return address }
        }
        return client
    }

    private func isTrusted(_ address: SocketAddress) -> Bool {
        guard let text = address.ipAddress, let bytes = Self.bytes(text) else { return false }
        // An IPv4 peer on a dual-stack listener comes as ::ffff:a.b.c.d.
        let mapped = bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF ? Array(bytes[12...]) : nil
        return ranges.contains { $0.contains(bytes) || (mapped.map($0.contains) ?? false) }
    }

    /// The address's bytes (4 or 16), or nil when `text` is not an IP address.
    private static func bytes(_ text: String) -> [UInt8]? {
        guard let address = try? SocketAddress(ipAddress: text, port: 0) else { return nil }
        switch address {
        // sockaddr_in: family and port (4 bytes), then the 4 address bytes; sockaddr_in6:
        // family and port (4), flow info (4), then the 16 address bytes.
        case .v4(let v4):
            let raw = withUnsafeBytes(of: v4.address) { Array($0) }
            return raw.count >= 8 ? Array(raw[4..<8]) : nil
        case .v6(let v6):
            let raw = withUnsafeBytes(of: v6.address) { Array($0) }
            return raw.count >= 24 ? Array(raw[8..<24]) : nil
        default: return nil
        }
    }
}

enum TrustedProxiesError: Error {
    case invalid(String)
}
