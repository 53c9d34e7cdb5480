import NIOCore

extension SocketAddress {
    /// The IP address's bytes: 4 for IPv4, 16 for IPv6; nil for a Unix domain socket.
    package var ipBytes: [UInt8]? {
        switch self {
        // sockaddr_in: family and port (4 bytes), then the 4 address bytes; sockaddr_in6:
        // family and port (4), flow info (4), then the 16 address bytes.
        case .v4(let v4):
            let raw = withUnsafeBytes(of: v4.address) { Array($0) }
            return raw.count >= 8 ? Array(raw[4..<8]) : nil
        case .v6(let v6):
            let raw = withUnsafeBytes(of: v6.address) { Array($0) }
            return raw.count >= 24 ? Array(raw[8..<24]) : nil
        case .unixDomainSocket:
            return nil
        }
    }

    /// ``ipBytes``, with an IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`, as an IPv4 client
    /// reaches a dual-stack listener) as its 4 IPv4 bytes.
    package var unmappedIPBytes: [UInt8]? {
        guard let bytes = ipBytes else { return nil }
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else { return bytes }
        return Array(bytes[12...])
    }
}
