import HeraldCore
import Testing

/// Addresses Herald sends to are checked where they enter; AsyncHTTPClient would trap on a port
/// past 16 bits when the request is made.
@Suite struct HTTPURLTests {
    @Test(arguments: ["https://fcm.googleapis.com", "http://127.0.0.1:9099", "https://[::1]:8443/push/x", "HTTPS://Push.Example:65535/x?y=1"])
    func usableURLsPass(_ text: String) {
        #expect(HTTPURL.problem(text) == nil)
    }

    @Test(arguments: [
        ("https://93.184.216.34:99999/push", "has port 99999"), ("http://127.0.0.1:0/x", "has port 0"), ("ftp://x.example", "absolute http or https URL"),
        ("/relative", "absolute http or https URL"), ("http:///x", "must name a host"), ("not a url", "absolute http or https URL"),
    ])
    func unusableURLsAreNamed(_ text: String, _ problem: String) {
        #expect(HTTPURL.problem(text)?.contains(problem) == true, "\(text): \(HTTPURL.problem(text) ?? "accepted")")
    }

    @Test func aSchemeCanBeRequired() {
        #expect(HTTPURL.problem("http://api.push.apple.com", schemes: ["https"]) == "must be an absolute https URL")
        #expect(HTTPURL.problem("https://api.push.apple.com", schemes: ["https"]) == nil)
    }
}
