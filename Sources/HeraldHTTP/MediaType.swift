import HeraldCore

/// A `Content-Type` value as RFC 9110 §8.3.1 reads it: the type and subtype, case-insensitive,
/// and the `charset` parameter. Matching the value's start instead let `application/jsonx` and
/// `application/json-patch+json` through as JSON, and a `charset` other than UTF-8 was read as
/// UTF-8 (Latin-1 `Ã©` would have been stored as `é`).
package struct MediaType: Equatable {
    /// `type/subtype`, lowercased.
    package var essence: String
    /// The `charset` parameter, lowercased and unquoted; nil when not given.
    package var charset: String?

    package init(_ value: String) {
        let parts = value.split(separator: ";", omittingEmptySubsequences: false)
        essence = String(parts.first?.trimmingOptionalWhitespace ?? "").lowercased()
        charset = nil
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, pair[0].trimmingOptionalWhitespace.lowercased() == "charset" else { continue }
            var name = pair[1].trimmingOptionalWhitespace
            if name.count >= 2, name.first == "\"", name.last == "\"" { name = name.dropFirst().dropLast() }
            charset = name.lowercased()
        }
    }

    /// Whether a body of this type is read as UTF-8: no charset, or `utf-8` (or `utf8`, which
    /// clients send though it is not the registered name). JSON is UTF-8 (RFC 8259 §8.1); any
    /// other charset would be a different text read as UTF-8.
    package var isUTF8: Bool { charset == nil || charset == "utf-8" || charset == "utf8" }

    /// The 415 for a body whose charset is not UTF-8.
    package var charsetRefusal: HeraldError {
        HeraldError(
            .unsupportedMediaType, code: "unsupported_media_type",
            "request bodies are read as UTF-8; send them as UTF-8 without 'charset=\(String((charset ?? "").prefix(40)))'")
    }
}
