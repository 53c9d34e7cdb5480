import Foundation
public import HeraldCore
public import HeraldStore

/// ``TopicMembershipStore`` on either engine, each statement written once (``SharedStatement``):
/// the `topic_members` table both engines' migrations created, compared with devices,
/// subscriptions and Forced subjects.
public struct SharedTopicMembershipStore: TopicMembershipStore {
    let database: any SharedSQLDatabase
    /// Changes recorded per statement: five values each, well under both engines' parameter limits.
    static let recordChunk = 200

    public init(database: any SharedSQLDatabase) {
        self.database = database
    }

    public func pendingMembershipChanges(_ scope: TopicMembershipScope, limit: Int) async throws -> [TopicMembershipChange] {
        guard !scope.providers.isEmpty, limit > 0 else { return [] }
        let additions = try await database.rows(
            SharedStatement.numbering { parameter in
                """
                SELECT token, topic FROM (
                    SELECT d.address_key AS token, sub.topic_key AS topic FROM devices d JOIN subscriptions sub ON sub.user_id = d.user_id
                    WHERE \(Self.inScope(scope, parameter))
                    UNION
                    SELECT d.address_key, s.topic_key FROM devices d JOIN subjects s ON s.level = \(parameter(.text(SubscriptionLevel.forced.rawValue)))
                    WHERE \(Self.inScope(scope, parameter))
                ) AS wanted
                WHERE NOT EXISTS (SELECT 1 FROM topic_members m WHERE m.sink = \(parameter(.text(scope.sink))) AND m.token = wanted.token AND m.topic = wanted.topic)
                ORDER BY topic, token LIMIT \(parameter(.integer(Int64(limit))))
                """
            }
        ).map { try Self.change($0, .add) }
        guard additions.count < limit else { return additions }
        // Read after the additions, not in their snapshot: a change between the two is found
        // by the next look, as any change after it is.
        let removals = try await database.rows(
            SharedStatement.numbering { parameter in
                """
                SELECT m.token, m.topic FROM topic_members m
                WHERE m.sink = \(parameter(.text(scope.sink))) AND NOT EXISTS (
                    SELECT 1 FROM devices d WHERE d.address_key = m.token AND \(Self.inScope(scope, parameter)) AND (
                        EXISTS (SELECT 1 FROM subjects s WHERE s.topic_key = m.topic AND s.level = \(parameter(.text(SubscriptionLevel.forced.rawValue))))
                        OR EXISTS (SELECT 1 FROM subscriptions sub WHERE sub.user_id = d.user_id AND sub.topic_key = m.topic)
                    )
                )
                ORDER BY m.topic, m.token LIMIT \(parameter(.integer(Int64(limit - additions.count))))
                """
            }
        ).map { try Self.change($0, .remove) }
        return additions + removals
    }

    public func recordMembership(sink: String, _ settled: [(change: TopicMembershipChange, outcome: TopicMembershipOutcome)]) async throws {
        // One entry per (token, topic), the last answer kept: PostgreSQL refuses an upsert that
        // meets its own row twice.
        var added: [TopicMembershipChange: String?] = [:]
        var removed: Set<TopicMembershipChange> = []
        for (change, outcome) in settled {
            switch (change.action, outcome) {
            case (_, .retry): continue
            case (.add, .applied): added[change] = .some(nil)
            case (.add, .refused(let reason)): added[change] = .some(reason.isEmpty ? "refused" : reason)
            case (.remove, _): removed.insert(change)
            }
        }
        guard !added.isEmpty || !removed.isEmpty else { return }
        let now = Timestamp.microseconds(Date())
        var statements: [SharedStatement] = []
        for chunk in Array(added).chunked(Self.recordChunk) {
            statements.append(
                SharedStatement.numbering { parameter in
                    let rows = chunk.map { change, refused in
                        "(\(parameter(.text(sink))), \(parameter(.text(change.token))), \(parameter(.text(change.topic))), \(parameter(.text(refused))), \(parameter(.integer(now))))"
                    }
                    return """
                        INSERT INTO topic_members (sink, token, topic, refused, updated_at) VALUES \(rows.joined(separator: ", "))
                        ON CONFLICT (sink, token, topic) DO UPDATE SET refused = excluded.refused, updated_at = excluded.updated_at
                        """
                })
        }
        for chunk in Array(removed).chunked(Self.recordChunk) {
            statements.append(
                SharedStatement.numbering { parameter in
                    let sinkParameter = parameter(.text(sink))
                    let pairs = chunk.map { "(\(parameter(.text($0.token))), \(parameter(.text($0.topic))))" }
                    return "DELETE FROM topic_members WHERE sink = \(sinkParameter) AND (token, topic) IN (VALUES \(pairs.joined(separator: ", ")))"
                })
        }
        _ = try await database.results(of: statements, announcing: nil)
    }

    public func membershipCounts(sink: String) async throws -> [String: (members: Int, refused: Int)] {
        var counts: [String: (members: Int, refused: Int)] = [:]
        for row in try await database.rows(
            SharedStatement(
                """
                SELECT topic, SUM(CASE WHEN refused IS NULL THEN 1 ELSE 0 END) AS members, SUM(CASE WHEN refused IS NULL THEN 0 ELSE 1 END) AS refused
                FROM topic_members WHERE sink = $1 GROUP BY topic
                """, .text(sink)))
        {
            counts[try row.text("topic")] = (try row.int("members"), try row.int("refused"))
        }
        return counts
    }

    /// The scope's devices: its providers', naming the sink, or naming none when it serves those.
    static func inScope(_ scope: TopicMembershipScope, _ parameter: (SharedStatement.Value) -> String) -> String {
        let providers = scope.providers.map { parameter(.text($0)) }.joined(separator: ", ")
        return
            "d.provider IN (\(providers)) AND (d.app = \(parameter(.text(scope.sink))) OR (d.app IS NULL AND \(parameter(.integer(scope.servesUnnamedDevices ? 1 : 0))) = 1))"
    }

    static func change(_ row: SharedRow, _ action: TopicMembershipChange.Action) throws -> TopicMembershipChange {
        TopicMembershipChange(action, token: try row.text("token"), topic: try row.text("topic"))
    }
}
