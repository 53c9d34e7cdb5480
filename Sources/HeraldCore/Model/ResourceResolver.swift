/// Turns the resource a sender names into the absolute URL Herald delivers.
///
/// `/posts/DKJW` becomes `<public_base_url>/posts/DKJW`; an absolute http(s) URL is kept;
/// nil stays nil, meaning the notification refers to no resource.
public struct ResourceResolver: Sendable, Equatable {
    public let publicBaseURL: String

    /// - Throws: a 422 when `publicBaseURL` is not an absolute http(s) URL.
    public init(publicBaseURL: String) throws {
        guard Self.isAbsoluteHTTP(publicBaseURL) else {
            throw HeraldError(.unprocessable, code: "invalid_config", "public_base_url must be an absolute http(s) URL, got '\(publicBaseURL)'")
        }
        var base = publicBaseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.publicBaseURL = base
    }

    public func resolve(_ resource: String?, field: String = "url") throws -> String? {
        guard let resource else { return nil }
        if resource.hasPrefix("/") && !resource.hasPrefix("//") {
            guard resource.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7f }) else {
                throw HeraldError.invalidField(field, "must not contain spaces or control characters")
            }
            return publicBaseURL + resource
        }
        if Self.isAbsoluteHTTP(resource) { return resource }
        throw HeraldError.invalidField(field, "must be a resource path starting with '/', an absolute http(s) URL, or null")
    }

    static func isAbsoluteHTTP(_ text: String) -> Bool {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") {
            rest = text.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            rest = text.dropFirst(7)
        } else {
            return false
        }
        guard let host = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first, !host.isEmpty else {
            return false
        }
        return text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7f }
    }
}
