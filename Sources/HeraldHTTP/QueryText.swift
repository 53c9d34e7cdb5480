import Foundation
import HeraldCore
import Hummingbird

extension Request {
    /// The percent-decoded value of the query parameter `name`, or nil when the query does not
    /// give it. Hummingbird's `queryParameters` reads escapes that are not UTF-8 as U+FFFD (so
    /// `region=%CEle` and `region=%CFle` would be one region, neither the one sent), keeps a
    /// malformed escape as written, and answers the first of two values; each of those is
    /// refused here instead, so a filter never silently means something the client did not
    /// write. As there, `+` is kept as written and names are compared as sent.
    /// - Throws: a 400 `invalid_query` naming the parameter.
    package func queryText(_ name: String) throws -> String? {
        guard let query = uri.query else { return nil }
        var found: String?
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts[0] == name else { continue }
            guard found == nil else { throw Self.invalidQuery(name, "must be given once") }
            let raw = parts.count > 1 ? parts[1] : ""
            guard let value = raw.removingPercentEncoding else {
                throw Self.invalidQuery(name, "must be percent-encoded UTF-8")
            }
            found = value
        }
        return found
    }

    /// ``queryText(_:)``, with an empty value read as absent.
    package func nonEmptyQueryText(_ name: String) throws -> String? {
        guard let text = try queryText(name), !text.isEmpty else { return nil }
        return text
    }

    package static func invalidQuery(_ name: String, _ problem: String) -> HeraldError {
        HeraldError(.badRequest, code: "invalid_query", "'\(name)' \(problem)")
    }
}
