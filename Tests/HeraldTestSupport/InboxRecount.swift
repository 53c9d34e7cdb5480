import HeraldStore

/// The inbox counters against a recount of history (docs/inbox.md): what every store test that
/// writes history concurrently checks at its end.
public enum InboxRecount {
    /// Each (user, type) whose counters differ from a count of its rows, as "user/type:
    /// counters a/b/c, recount x/y/z"; empty when they agree.
    public static func mismatches(in database: any SharedSQLDatabase) async throws -> [String] {
        let share = InboxSQL.shares(of: "h")
        let recount = try await database.rows(
            SharedStatement(
                """
                SELECT h.user_id, h.type, SUM(\(share.unseen)) AS unseen, SUM(\(share.unread)) AS unread, SUM(\(share.archived)) AS archived
                FROM history h GROUP BY h.user_id, h.type
                """))
        let counters = try await database.rows(SharedStatement("SELECT user_id, type, unseen, unread, archived FROM inbox_counts"))
        func tallies(_ rows: [SharedRow]) throws -> [String: [Int64]] {
            var result: [String: [Int64]] = [:]
            for row in rows {
                let values = [try row.integer("unseen"), try row.integer("unread"), try row.integer("archived")]
                // A counter row whose rows are all gone stays at zero: the same as none.
                if values != [0, 0, 0] { result["\(try row.text("user_id"))/\(try row.text("type"))"] = values }
            }
            return result
        }
        let (expected, kept) = (try tallies(recount), try tallies(counters))
        return Set(expected.keys).union(kept.keys).sorted().compactMap { key in
            let (have, want) = (kept[key] ?? [0, 0, 0], expected[key] ?? [0, 0, 0])
            return have == want
                ? nil : "\(key): counters \(have.map(String.init).joined(separator: "/")), recount \(want.map(String.init).joined(separator: "/"))"
        }
    }
}
