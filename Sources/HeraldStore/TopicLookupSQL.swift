public import HeraldCore

/// The subject routing reads (``TopicLookup``), written once for both engines. The hierarchy's
/// tables are the topics module's (HeraldTopics), created by both engines' first migrations.
extension TopicLookup where Self: SharedSQLDatabase {
    public func subject(topicKey: String) async throws -> SubjectEntry? {
        try await rows(TopicLookupSQL.entry(topicKey: topicKey)).first.map(StoredRecords.entry)
    }

    public func isSubscribed(userID: String, topicKey: String) async throws -> Bool {
        try await !rows(TopicLookupSQL.subscription(userID: userID, topicKey: topicKey)).isEmpty
    }
}

/// Statements the topics module and routing share.
package enum TopicLookupSQL {
    /// Each subject with its area's and channel's names, as ``StoredRecords/entry(_:)`` reads them.
    package static let entries = """
        SELECT s.*, a.name AS area_name, c.name AS channel_name
        FROM subjects s JOIN areas a ON a.id = s.area_id JOIN channels c ON c.id = s.channel_id
        """

    /// The subject `topicKey` names, as ``entries`` reads it.
    package static func entry(topicKey: String) -> SharedStatement {
        SharedStatement(entries + " WHERE s.topic_key = $1", .text(topicKey))
    }

    /// The user's stored subscription to `topicKey`: one row or none.
    package static func subscription(userID: String, topicKey: String) -> SharedStatement {
        SharedStatement("SELECT 1 AS subscribed FROM subscriptions WHERE user_id = $1 AND topic_key = $2", .text(userID), .text(topicKey))
    }
}
