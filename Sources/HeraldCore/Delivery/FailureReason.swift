/// A sink's or a provider's words about a failure, as Herald keeps them (a delivery's
/// `last_error`, a refused topic membership, a removed device's reason, their log lines).
/// They come from outside: an FCM error message can hold U+0000, which PostgreSQL refuses in
/// text (the whole batch of records failed with it, so the batch's pushes were sent again when
/// their leases ran out) and SQLite cuts at, and it can be as long as the answer Herald drains
/// (a megabyte), stored and logged at every attempt.
public enum FailureReason {
    /// Longer reasons are cut here, at a character, and end with "…".
    public static let maxBytes = 1024

    /// `text` with U+0000 as U+FFFD, at most ``maxBytes`` of UTF-8.
    public static func storable(_ text: String) -> String {
        if text.utf8.count <= maxBytes && !text.utf8.contains(0) { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { scalars.append(scalar == "\u{0}" ? "\u{FFFD}" : scalar) }
        let clean = String(scalars)
        guard clean.utf8.count > maxBytes else { return clean }
        let ellipsis = "…"
        var end = clean.startIndex
        var bytes = ellipsis.utf8.count
        for index in clean.indices {
            let next = clean.index(after: index)
            bytes += clean.utf8.distance(from: index, to: next)
            guard bytes <= maxBytes else { break }
            end = next
        }
        return clean[..<end] + ellipsis
    }
}
