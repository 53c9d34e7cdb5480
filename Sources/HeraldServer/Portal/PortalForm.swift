import Foundation
import HeraldCore
import Hummingbird

/// An `application/x-www-form-urlencoded` body, as the portal's forms send it.
struct PortalForm {
    private var values: [String: String] = [:]

    static let maxBytes = 64 * 1024

    init(_ request: Request) async throws {
        var request = request
        let buffer = try await request.collectBody(upTo: Self.maxBytes)
        self.init(text: String(buffer: buffer))
        // Refused rather than stored altered (SQLite would cut the text at U+0000).
        if let name = values.first(where: { $0.key.contains("\0") || $0.value.contains("\0") })?.key {
            throw HeraldError.invalidField(name, "must not contain U+0000")
        }
    }

    init(text: String) {
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]) else { continue }
            values[name] = parts.count > 1 ? Self.decode(parts[1]) ?? "" : ""
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
