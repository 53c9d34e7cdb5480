#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a subscription's endpoint host names, for refusing endpoints that point into the
/// operator's own network.
///
/// A subscription is whatever the client registering it sent, so without this check anyone who
/// may register a device could have Herald POST to `https://10.0.0.7/…` or to a service on
/// Herald's own loopback interface and read the outcome in the device's `last_error`. Push
/// services are on the public internet. Only literal addresses (and `localhost`) are judged:
/// a name that resolves to a private address is the network's to stop (an egress rule).
enum PushServiceHost {
    /// Whether `host` is `localhost` or a literal IPv4/IPv6 address that is not globally
    /// routable: loopback, private (RFC 1918, IPv6 unique local), link-local, shared address
    /// space (RFC 6598), unspecified, or IPv4-mapped forms of those.
    static func isPrivate(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        // An IPv6 zone (`fe80::1%eth0`) names the interface, not the address.
        if let zone = name.firstIndex(of: "%") { name = String(name[..<zone]) }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if let v4 = ipv4(name) { return isPrivate(v4) }
        if let v6 = ipv6(name) { return isPrivate(v6: v6) }
        return false
    }

    private static func isPrivate(_ a: [UInt8]) -> Bool {
        switch (a[0], a[1]) {
        case (0, _), (10, _), (127, _): true
        case (100, 64...127): true
        case (169, 254): true
        case (172, 16...31): true
        case (192, 168): true
        default: a[0] >= 224 // multicast and reserved
        }
    }

    private static func isPrivate(v6 a: [UInt8]) -> Bool {
        if a.allSatisfy({ $0 == 0 }) { return true } // ::
        if a[0..<15].allSatisfy({ $0 == 0 }) && a[15] == 1 { return true } // ::1
        if a[0] & 0xfe == 0xfc { return true } // fc00::/7, unique local
        if a[0] == 0xfe && a[1] & 0xc0 == 0x80 { return true } // fe80::/10, link-local
        if a[0] == 0xff { return true } // multicast
        // ::ffff:a.b.c.d (IPv4-mapped) and ::a.b.c.d (IPv4-compatible) reach the IPv4 address.
        if a[0..<10].allSatisfy({ $0 == 0 }) && ((a[10] == 0xff && a[11] == 0xff) || (a[10] == 0 && a[11] == 0)) {
            return isPrivate(Array(a[12..<16]))
        }
        return false
    }

    /// inet_aton, not inet_pton: the resolver behind the HTTP client also takes the old forms
    /// (`127.1`, `0x7f000001`, `2130706433`), so they must be judged as the address they reach.
    private static func ipv4(_ text: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_aton(text, &address) != 0 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    private static func ipv6(_ text: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }
}
