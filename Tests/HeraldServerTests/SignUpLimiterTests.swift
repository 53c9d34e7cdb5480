import Foundation
import NIOCore
import Testing

@testable import HeraldServer

/// Anonymous sign-ups are limited per client: an IPv4 address, or an IPv6 /64, since one IPv6
/// host may use any address of its /64 and would otherwise get a fresh allowance with each.
@Suite struct SignUpLimiterTests {
    @Test func anIPv6SlashSixtyFourIsOneClient() throws {
        let first = SignUpLimiter.client(try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 443))
        let second = SignUpLimiter.client(try SocketAddress(ipAddress: "2001:db8:1:2:ffff:1234:5678:9abc", port: 1))
        let elsewhere = SignUpLimiter.client(try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 1))
        #expect(first == "2001:db8:1:2::/64")
        #expect(first == second)
        #expect(first != elsewhere)
    }

    @Test func ipv4ClientsCountByAddressAlsoWhenMappedIntoIPv6() throws {
        #expect(SignUpLimiter.client(try SocketAddress(ipAddress: "198.51.100.7", port: 1)) == "198.51.100.7")
        #expect(SignUpLimiter.client(try SocketAddress(ipAddress: "::ffff:198.51.100.7", port: 1)) == "198.51.100.7")
        #expect(SignUpLimiter.client(try SocketAddress(ipAddress: "::ffff:198.51.100.8", port: 1)) == "198.51.100.8", "not one bucket for all of IPv4")
        #expect(SignUpLimiter.client(nil) == "unknown")
    }

    @Test func addressesInOneSlashSixtyFourShareTheAllowance() throws {
        let limiter = SignUpLimiter(perMinute: 2)
        let now = Date()
        let hosts = try (1...3).map { SignUpLimiter.client(try SocketAddress(ipAddress: "2001:db8::\($0)", port: 1)) }
        #expect(limiter.take(hosts[0], now: now) == nil)
        #expect(limiter.take(hosts[1], now: now) == nil)
        #expect(limiter.take(hosts[2], now: now) != nil, "a third address of the same /64 waits")
        #expect(limiter.take(SignUpLimiter.client(try SocketAddress(ipAddress: "2001:db8:0:1::1", port: 1)), now: now) == nil)
    }

    /// The table of clients is bounded; filling it from many addresses used to empty it, which
    /// gave a client that was being refused its whole allowance back.
    @Test func floodingTheTableFromManyAddressesDoesNotRefillAClientThatKeepsAsking() {
        let limiter = SignUpLimiter(perMinute: 1, maxAddresses: 1_000)
        let start = Date()
        #expect(limiter.take("198.51.100.7", now: start) == nil)
        for index in 0..<5_000 {
            let now = start.addingTimeInterval(Double(index) / 10_000)
            #expect(limiter.take("2001:db8:\(index)::/64", now: now) == nil, "a new client has its allowance")
            if index % 100 == 0 {
                #expect(limiter.take("198.51.100.7", now: now) != nil, "refused while the table fills, at client \(index)")
            }
        }
        #expect(limiter.tracked <= 1_000)
    }
}
