import HeraldCore

/// ``StoreChange``s as PostgreSQL `NOTIFY` payloads: a letter, then user ids one per line
/// (user ids hold no whitespace), split so no payload passes PostgreSQL's 8 000-byte limit.
enum StoreChangeMessage {
    static let maxPayloadBytes = 7_000

    static func payloads(_ change: StoreChange) -> [String] {
        switch change {
        case .content: return ["c"]
        case .feed: return ["f"]
        case .history(let users): return chunks("h", users)
        case .attributes(let users): return chunks("a", users)
        case .inbox(let users): return chunks("i", users)
        }
    }

    /// A `WITH` clause entry named `announced` that sends, from inside PostgreSQL, the payloads
    /// ``payloads(_:)`` would for `.history(users:)` of the `user_id`s of `written` (an earlier
    /// entry of the same `WITH`): a fan-out announces its recipients without reading them into
    /// Herald. A chunk ends where the running byte count crosses a multiple of the limit, so it
    /// holds at most the limit plus one user id (at most 512 bytes): under PostgreSQL's 8 000.
    /// Select `COUNT(*) FROM announced` in the statement, or PostgreSQL skips it.
    static func historyNotices(of written: String, channel: String) -> String {
        """
        announced AS (
            SELECT pg_notify('\(channel)', 'h' || string_agg(E'\\n' || user_id, '' ORDER BY user_id))
            FROM (SELECT user_id, SUM(octet_length(user_id) + 1) OVER (ORDER BY user_id) / \(maxPayloadBytes) AS chunk FROM \(written)) AS chunked
            GROUP BY chunk
        )
        """
    }

    /// nil for a payload this version does not know (a newer process's): ignored.
    static func change(_ payload: String) -> StoreChange? {
        var lines = payload.split(separator: "\n").map(String.init)
        guard !lines.isEmpty else { return nil }
        let kind = lines.removeFirst()
        switch kind {
        case "c": return .content
        case "f": return .feed
        case "h": return .history(users: lines)
        case "a": return .attributes(users: lines)
        case "i": return .inbox(users: lines)
        default: return nil
        }
    }

    private static func chunks(_ kind: String, _ users: [String]) -> [String] {
        var payloads: [String] = []
        var current = kind
        var seen = Set<String>()
        for user in users where seen.insert(user).inserted {
            if current.utf8.count + 1 + user.utf8.count > maxPayloadBytes {
                payloads.append(current)
                current = kind
            }
            current += "\n" + user
        }
        if current != kind { payloads.append(current) }
        return payloads
    }
}
