import Foundation
import HTTPTypes
import HeraldCore
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@testable import HeraldServer

/// Behind a reverse proxy every connection comes from the proxy: without `server.trusted_proxies`
/// the anonymous sign-up limit counted every client as one (ten sign-ups a minute for a whole
/// app). A trusted proxy's `X-Forwarded-For` names the client; anyone else's is ignored.
@Suite(.cleansUp) struct TrustedProxiesTests {
    static func address(_ text: String) throws -> SocketAddress { try SocketAddress(ipAddress: text, port: 4242) }

    @Test func theClientIsTheNearestUntrustedHopBehindATrustedPeer() throws {
        let proxies = try TrustedProxies(["10.0.0.0/8", "192.0.2.7", "fd00::/8"])
        func client(_ peer: String, _ header: String?) throws -> String? {
            proxies.client(peer: try Self.address(peer), forwardedFor: header)?.ipAddress
        }
        #expect(try client("10.1.2.3", "198.51.100.9") == "198.51.100.9")
        #expect(try client("10.1.2.3", "203.0.113.5, 198.51.100.9, 10.9.9.9") == "198.51.100.9", "walked from the right past trusted hops")
        #expect(try client("192.0.2.7", "2001:db8::1") == "2001:db8::1")
        #expect(try client("fd12::1", " 198.51.100.9 ") == "198.51.100.9")
        #expect(try client("::ffff:10.1.2.3", "198.51.100.9") == "198.51.100.9", "an IPv4 proxy on a dual-stack listener")
        #expect(try client("198.51.100.50", "203.0.113.5") == "198.51.100.50", "a client's own header is ignored")
        #expect(try client("192.0.2.8", "203.0.113.5") == "192.0.2.8", "one address trusts that address only")
        #expect(try client("10.1.2.3", nil) == "10.1.2.3")
        #expect(try client("10.1.2.3", "unknown, 198.51.100.9") == "198.51.100.9")
        #expect(try client("10.1.2.3", "198.51.100.9, garbage") == "10.1.2.3", "nothing before a hop that is not an address is believed")
        #expect(try client("10.1.2.3", "10.2.2.2, 10.3.3.3") == "10.2.2.2", "all trusted: the farthest")
        #expect(try TrustedProxies([]).client(peer: try Self.address("10.1.2.3"), forwardedFor: "198.51.100.9")?.ipAddress == "10.1.2.3")
    }

    @Test(arguments: ["10.0.0.0/33", "fd00::/129", "10.0.0.0/-1", "10.0.0.0/", "proxy.example", "10.0.0", "", "10.0.0.1/8/8", "10.0.0.0/٨"])
    func entriesThatAreNotAddressesAreRefused(_ entry: String) {
        #expect(throws: TrustedProxiesError.self) { try TrustedProxies([entry]) }
    }

    @Test func theSettingIsReadAndChecked() async throws {
        let set = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_SERVER_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"])
        #expect(set.trustedProxies == ["10.0.0.0/8", "192.0.2.7"])
        do {
            _ = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_SERVER_TRUSTED_PROXIES": "10.0.0.0/40"])
            Issue.record("accepted")
        } catch let error as HeraldError {
            #expect(error.message.contains("server.trusted_proxies") && error.message.contains("10.0.0.0/40"), "\(error.message)")
        }
    }

    /// Over a real connection from 127.0.0.1, the proxy here: each client forwarded gets its
    /// own allowance; without the setting they all share the proxy's.
    @Test(arguments: [true, false])
    func signUpsBehindAProxyAreCountedPerClient(_ trusted: Bool) async throws {
        let herald = try await TestHerald.make {
            $0.port = 0
            $0.deviceSignUp = true
            $0.deviceSignUpsPerMinute = 2
            $0.trustedProxies = trusted ? ["127.0.0.1", "::1"] : []
        }
        try await herald.server.application(deliveryWorkers: false).test(.live) { client in
            func signUp(_ device: String, from address: String) async throws -> HTTPResponse.Status {
                var fields = headers()
                fields[HTTPField.Name("X-Forwarded-For")!] = address
                let body = ByteBuffer(string: #"{"device_id":"\#(device)","platform":"ios"}"#)
                return try await client.execute(uri: "/api/auth/device", method: .post, headers: fields, body: body).status
            }
            var answers: [HTTPResponse.Status] = []
            for (device, address) in [("a1", "198.51.100.1"), ("a2", "198.51.100.1"), ("a3", "198.51.100.1"), ("b1", "198.51.100.2")].map({
                ("install-\($0.0)-0123456789", $0.1)
            }) {
                answers.append(try await signUp(device, from: address))
            }
            // The client's third in a minute waits; another client behind the proxy has its own
            // allowance only when the proxy is trusted.
            #expect(answers == [.ok, .ok, .tooManyRequests, trusted ? .ok : .tooManyRequests])
        }
    }
}
