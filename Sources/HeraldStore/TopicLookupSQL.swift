public import HeraldCore

/// The subject routing reads (``TopicLookup``), written once for both engines. The hierarchy's
/// tables are the topics module's (HeraldTopics), created by both engines' first migrations.
extension TopicLookup where Self: SharedSQLDatabase {
    public func subject(topicKey: String) async throws -> SubjectEntry? {
        try await TopicLookupSQL.subject(topicKey: topicKey, in: self)
    }

    public func isSubscribed(userID: String, topicKey: String) async throws -> Bool {
        try await TopicLookupSQL.isSubscribed(userID: userID, topicKey: topicKey, in: self)
    }
}

/// Statements the topics module and routing share.
package enum TopicLookupSQL {
    /// Each subject with its area's and channel's names, as ``StoredRecords/entry(_:)`` reads them.
    package static let entries = """
        SELECT s.*, a.name AS area_name, c.name AS channel_name
        FROM subjects s JOIN areas a ON a.id = s.area_id JOIN channels c ON c.id = s.channel_id
        """

    /// ``TopicLookup/subject(topicKey:)`` on `database`: for a store, and for the topics
    /// module's store on one.
    package static func subject(topicKey: String, in database: some SharedSQLDatabase) async throws -> SubjectEntry? {
        try await database.rows(SharedStatement(entries + " WHERE s.topic_key = $1", .text(topicKey))).first.map(StoredRecords.entry)
    }

    /// ``TopicLookup/isSubscribed(userID:topicKey:)`` on `database`.
    package static func isSubscribed(userID: String, topicKey: String, in database: some SharedSQLDatabase) async throws -> Bool {
        try await !database.rows(
            SharedStatement("SELECT 1 AS subscribed FROM subscriptions WHERE user_id = $1 AND topic_key = $2", .text(userID), .text(topicKey))
        ).isEmpty
    }
}
