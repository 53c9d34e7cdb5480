import Foundation
import HeraldHTTP
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

    /// No proxy is trusted: every request's client is its peer.
    static let none = TrustedProxies(ranges: [])

    private init(ranges: [Range]) {
        self.ranges = ranges
    }

    /// - Throws: the entry that is not an IPv4 or IPv6 address, with an optional `/prefix`.
    init(_ entries: [String]) throws {
        ranges = try entries.map { entry in
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = (try? SocketAddress(ipAddress: String(parts[0]), port: 0))?.ipBytes else { throw TrustedProxiesError.invalid(entry) }
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

    /// `server.trusted_proxies`, or the configuration error naming the entry that is not one.
    static func configured(_ entries: [String]) throws -> TrustedProxies {
        do {
            return try TrustedProxies(entries)
        } catch TrustedProxiesError.invalid(let entry) {
            throw HeraldConfiguration.invalid("server.trusted_proxies", "'\(entry)' is not an IPv4 or IPv6 address with an optional /prefix")
        }
    }

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
        // An IPv4 peer on a dual-stack listener comes as ::ffff:a.b.c.d: either form may be listed.
        let forms = [address.ipBytes, address.unmappedIPBytes].compactMap { $0 }
        return ranges.contains { range in forms.contains(where: range.contains) }
    }
}

enum TrustedProxiesError: Error {
    case invalid(String)
}
