import Foundation
import GRDB
import HeraldCore

extension SQLiteStore {
    public func pendingMembershipChanges(_ scope: TopicMembershipScope, limit: Int) async throws -> [TopicMembershipChange] {
        guard !scope.providers.isEmpty, limit > 0 else { return [] }
        let inScope = "d.provider IN (\(Self.placeholders(scope.providers.count))) AND (d.app = ? OR (d.app IS NULL AND ?))"
        let forced = SubscriptionLevel.forced.rawValue
        return try await writer.read { db in
            var scopeValues: [any DatabaseValueConvertible] = scope.providers
            scopeValues.append(scope.sink)
            scopeValues.append(scope.servesUnnamedDevices)
            let additions = try Row.fetchAll(
                db,
                sql: """
                    SELECT token, topic FROM (
                        SELECT d.address_key AS token, sub.topic_key AS topic FROM devices d JOIN subscriptions sub ON sub.user_id = d.user_id WHERE \(inScope)
                        UNION
                        SELECT d.address_key, s.topic_key FROM devices d JOIN subjects s ON s.level = ? WHERE \(inScope)
                    ) AS wanted
                    WHERE NOT EXISTS (SELECT 1 FROM topic_members m WHERE m.sink = ? AND m.token = wanted.token AND m.topic = wanted.topic)
                    ORDER BY topic, token LIMIT ?
                    """,
                arguments: StatementArguments(scopeValues + [forced] + scopeValues + [scope.sink, limit])
            ).map { try TopicMembershipSQL.change($0, .add) }
            guard additions.count < limit else { return additions }
            let removals = try Row.fetchAll(
                db,
                sql: """
                    SELECT m.token, m.topic FROM topic_members m
                    WHERE m.sink = ? AND NOT EXISTS (
                        SELECT 1 FROM devices d WHERE d.address_key = m.token AND \(inScope) AND (
                            EXISTS (SELECT 1 FROM subjects s WHERE s.topic_key = m.topic AND s.level = ?)
                            OR EXISTS (SELECT 1 FROM subscriptions sub WHERE sub.user_id = d.user_id AND sub.topic_key = m.topic)
                        )
                    )
                    ORDER BY m.topic, m.token LIMIT ?
                    """,
                arguments: StatementArguments([scope.sink] + scopeValues + [forced, limit - additions.count])
            ).map { try TopicMembershipSQL.change($0, .remove) }
            return additions + removals
        }
    }

    public func recordMembership(sink: String, _ settled: [(change: TopicMembershipChange, outcome: TopicMembershipOutcome)]) async throws {
        guard !settled.isEmpty else { return }
        let now = Self.micros(Date())
        try await writer.write { db in
            let upsert = try db.cachedStatement(
                sql: """
                    INSERT INTO topic_members (sink, token, topic, refused, updated_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (sink, token, topic) DO UPDATE SET refused = excluded.refused, updated_at = excluded.updated_at
                    """
            )
            let delete = try db.cachedStatement(sql: "DELETE FROM topic_members WHERE sink = ? AND token = ? AND topic = ?")
            for (change, outcome) in settled {
                switch (change.action, outcome) {
                case (_, .retry): continue
                case (.add, .applied): try upsert.execute(arguments: [sink, change.token, change.topic, nil as String?, now])
                case (.add, .refused(let reason)): try upsert.execute(arguments: [sink, change.token, change.topic, reason, now])
                case (.remove, _): try delete.execute(arguments: [sink, change.token, change.topic])
                }
            }
        }
    }

    public func membershipCounts(sink: String) async throws -> [String: (members: Int, refused: Int)] {
        try await writer.read { db in
            try TopicMembershipSQL.counts(
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT topic, SUM(CASE WHEN refused IS NULL THEN 1 ELSE 0 END) AS members, SUM(CASE WHEN refused IS NULL THEN 0 ELSE 1 END) AS refused
                        FROM topic_members WHERE sink = ? GROUP BY topic
                        """,
                    arguments: [sink]
                )
            )
        }
    }
}
