import Foundation
import Hummingbird

/// An `application/x-www-form-urlencoded` body, as the portal's forms send it.
struct PortalForm {
    private var values: [String: String] = [:]

    static let maxBytes = 64 * 1024

    init(_ request: Request) async throws {
        var request = request
        let buffer = try await request.collectBody(upTo: Self.maxBytes)
        self.init(text: String(buffer: buffer))
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
