import Foundation

/// Turns the resource a sender names into the absolute URL Herald delivers.
///
/// `/posts/DKJW` becomes `<public_base_url>/posts/DKJW`; an absolute http(s) URL is kept;
/// nil stays nil, meaning the notification refers to no resource.
public struct ResourceResolver: Sendable, Equatable {
    /// The base relative paths resolve against, without a trailing slash.
    public let publicBaseURL: String

    /// - Throws: a 422 when `publicBaseURL` is not an absolute http(s) URL.
    public init(publicBaseURL: String) throws {
        // Port 0 is what the default gives under `--port 0` (tests, development), before the
        // server has a port of its own.
        if let problem = Self.absoluteHTTPProblem(publicBaseURL, allowingPortZero: true) {
            throw HeraldError(.unprocessable, code: "invalid_config", "public_base_url \(problem), got '\(publicBaseURL)'")
        }
        var base = publicBaseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.publicBaseURL = base
    }

    /// - Returns: the absolute URL, or nil for nil.
    /// - Throws: a 422 naming `field` for a value that is neither a path nor an absolute http(s) URL.
    public func resolve(_ resource: String?, field: String = "url") throws -> String? {
        guard let resource else { return nil }
        if resource.hasPrefix("/") && !resource.hasPrefix("//") {
            guard Self.hasNoSpaceOrControl(resource) else {
                throw HeraldError.invalidField(field, "must not contain spaces or control characters")
            }
            return publicBaseURL + resource
        }
        guard HTTPURL.httpAuthority(of: resource) != nil else {
            throw HeraldError.invalidField(field, "must be a resource path starting with '/', an absolute http(s) URL, or null")
        }
        if let problem = Self.absoluteHTTPProblem(resource) { throw HeraldError.invalidField(field, problem) }
        return resource
    }

    static func hasNoSpaceOrControl(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7f }
    }

    /// Why `text` is not an absolute http(s) URL a device can open, or nil.
    ///
    /// User names and passwords are refused (RFC 9110 §4.2.4: senders must not generate them
    /// in http(s) URIs): shown on a device, `https://bank.example@evil.example/` reads as the
    /// bank's address, and a password in a link goes to every device and log that holds it.
    static func absoluteHTTPProblem(_ text: String, allowingPortZero: Bool = false) -> String? {
        guard let authority = HTTPURL.httpAuthority(of: text)?.authority else { return "must be an absolute http(s) URL" }
        guard hasNoSpaceOrControl(text) else { return "must not contain spaces or control characters" }
        guard !authority.isEmpty else { return "must name a host" }
        guard !authority.contains("@") else { return "must not contain a user name or password" }
        guard let url = URL(string: text) else { return "is not a valid URL" }
        if allowingPortZero && url.port == 0 { return nil }
        return HTTPURL.problem(url)
    }
}
