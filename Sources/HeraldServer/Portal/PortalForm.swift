import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// An `application/x-www-form-urlencoded` body, as the portal's forms send it.
struct PortalForm {
    private var values: [String: String] = [:]

    static let maxBytes = 64 * 1024

    init(_ request: Request) async throws {
        guard !AnnouncedLength.exceeds(request, Self.maxBytes) else { throw HTTPError(.contentTooLarge) }
        var request = request
        let buffer = try await request.collectBody(upTo: Self.maxBytes)
        // Refused rather than read with U+FFFD in place of bytes that are not UTF-8.
        guard let text = String(validating: buffer.readableBytesView, as: UTF8.self) else {
            throw HeraldError(.badRequest, code: "invalid_form", "the form is not UTF-8")
        }
        try self.init(text: text)
    }

    /// - Throws: a 422 naming a field whose percent-encoded bytes are not UTF-8 (it would have
    ///   been read as empty), whose text has U+0000 (SQLite would cut the text there), or that is
    ///   given twice.
    init(text: String) throws {
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]) else { continue }
            guard let value = parts.count > 1 ? Self.decode(parts[1]) : "" else {
                throw HeraldError.invalidField(name, "must be percent-encoded UTF-8")
            }
            guard !name.contains("\0") && !value.contains("\0") else { throw HeraldError.invalidField(name, "must not contain U+0000") }
            // No portal form has a field twice; the last one silently won, as a query's first did.
            guard values[name] == nil else { throw HeraldError.invalidField(name, "is given more than once") }
            values[name] = value
        }
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    subscript(_ name: String) -> String? { values[name] }

    /// The field, trimmed, or nil when absent or blank.
    func text(_ name: String) -> String? {
        guard let value = values[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }
}
