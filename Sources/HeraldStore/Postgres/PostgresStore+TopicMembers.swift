import Foundation
import HeraldCore
import PostgresNIO

extension PostgresStore {
    public func pendingMembershipChanges(_ scope: TopicMembershipScope, limit: Int) async throws -> [TopicMembershipChange] {
        guard !scope.providers.isEmpty, limit > 0 else { return [] }
        let (providers, sink, unnamed, forced) = (scope.providers, scope.sink, scope.servesUnnamedDevices, SubscriptionLevel.forced.rawValue)
        return try await withConnection { session in
            let additions = try await session.rows(
                """
                SELECT token, topic FROM (
                    SELECT d.address_key AS token, sub.topic_key AS topic FROM devices d JOIN subscriptions sub ON sub.user_id = d.user_id
                    WHERE d.provider = ANY(\(providers)) AND (d.app = \(sink) OR (d.app IS NULL AND \(unnamed)))
                    UNION
                    SELECT d.address_key, s.topic_key FROM devices d JOIN subjects s ON s.level = \(forced)
                    WHERE d.provider = ANY(\(providers)) AND (d.app = \(sink) OR (d.app IS NULL AND \(unnamed)))
                ) AS wanted
                WHERE NOT EXISTS (SELECT 1 FROM topic_members m WHERE m.sink = \(sink) AND m.token = wanted.token AND m.topic = wanted.topic)
                ORDER BY topic, token LIMIT \(limit)
                """
            ).map { try TopicMembershipSQL.change($0, .add) }
            guard additions.count < limit else { return additions }
            let removals = try await session.rows(
                """
                SELECT m.token, m.topic FROM topic_members m
                WHERE m.sink = \(sink) AND NOT EXISTS (
                    SELECT 1 FROM devices d
                    WHERE d.address_key = m.token AND d.provider = ANY(\(providers)) AND (d.app = \(sink) OR (d.app IS NULL AND \(unnamed))) AND (
                        EXISTS (SELECT 1 FROM subjects s WHERE s.topic_key = m.topic AND s.level = \(forced))
                        OR EXISTS (SELECT 1 FROM subscriptions sub WHERE sub.user_id = d.user_id AND sub.topic_key = m.topic)
                    )
                )
                ORDER BY m.topic, m.token LIMIT \(limit - additions.count)
                """
            ).map { try TopicMembershipSQL.change($0, .remove) }
            return additions + removals
        }
    }

    public func recordMembership(sink: String, _ settled: [(change: TopicMembershipChange, outcome: TopicMembershipOutcome)]) async throws {
        // Refusal reasons, empty for a member (arrays of optionals do not bind).
        var added: (tokens: [String], topics: [String], refused: [String]) = ([], [], [])
        var removed: (tokens: [String], topics: [String]) = ([], [])
        for (change, outcome) in settled {
            switch (change.action, outcome) {
            case (_, .retry): continue
            case (.add, .applied), (.add, .refused):
                added.tokens.append(change.token)
                added.topics.append(change.topic)
                if case .refused(let reason) = outcome { added.refused.append(reason.isEmpty ? "refused" : reason) } else { added.refused.append("") }
            case (.remove, _):
                removed.tokens.append(change.token)
                removed.topics.append(change.topic)
            }
        }
        guard !added.tokens.isEmpty || !removed.tokens.isEmpty else { return }
        let now = Self.micros(Date())
        try await transaction { [added, removed] session in
            if !added.tokens.isEmpty {
                try await session.execute(
                    """
                    INSERT INTO topic_members (sink, token, topic, refused, updated_at)
                    SELECT \(sink), token, topic, NULLIF(refused, ''), \(now) FROM UNNEST(\(added.tokens)::text[], \(added.topics)::text[], \(added.refused)::text[]) AS a(token, topic, refused)
                    ON CONFLICT (sink, token, topic) DO UPDATE SET refused = excluded.refused, updated_at = excluded.updated_at
                    """
                )
            }
            if !removed.tokens.isEmpty {
                try await session.execute(
                    """
                    DELETE FROM topic_members m USING UNNEST(\(removed.tokens)::text[], \(removed.topics)::text[]) AS r(token, topic)
                    WHERE m.sink = \(sink) AND m.token = r.token AND m.topic = r.topic
                    """
                )
            }
        }
    }

    public func membershipCounts(sink: String) async throws -> [String: (members: Int, refused: Int)] {
        try await withConnection { session in
            try TopicMembershipSQL.counts(
                try await session.rows(
                    """
                    SELECT topic, SUM(CASE WHEN refused IS NULL THEN 1 ELSE 0 END)::bigint AS members,
                        SUM(CASE WHEN refused IS NULL THEN 0 ELSE 1 END)::bigint AS refused
                    FROM topic_members WHERE sink = \(sink) GROUP BY topic
                    """
                )
            )
        }
    }
}
