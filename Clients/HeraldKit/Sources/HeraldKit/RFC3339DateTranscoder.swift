import Foundation
import OpenAPIRuntime

/// Herald writes instants with and without fractional seconds (`2026-11-22T08:00:00Z`,
/// `…08:00:00.123Z`); the runtime's transcoders read one form each. This one reads both and
/// writes milliseconds, so an event's `at` keeps its precision.
struct RFC3339DateTranscoder: DateTranscoder {
    func encode(_ date: Date) throws -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    func decode(_ text: String) throws -> Date {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return date }
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "'\(text)' is not an RFC 3339 instant"))
    }
}
