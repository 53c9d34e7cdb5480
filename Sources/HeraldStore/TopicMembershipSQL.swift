import HeraldCore

/// The record of provider-side topic membership, the same on both engines.
enum TopicMembershipSQL {
    static let table = """
        CREATE TABLE topic_members (
            sink TEXT NOT NULL,
            token TEXT NOT NULL,
            topic TEXT NOT NULL,
            refused TEXT,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (sink, token, topic)
        )
        """

    static func counts(_ rows: [some StoredRow]) throws -> [String: (members: Int, refused: Int)] {
        var counts: [String: (members: Int, refused: Int)] = [:]
        for row in rows {
            counts[try row.text("topic")] = (try row.int("members"), try row.int("refused"))
        }
        return counts
    }

    static func change(_ row: some StoredRow, _ action: TopicMembershipChange.Action) throws -> TopicMembershipChange {
        TopicMembershipChange(action, token: try row.text("token"), topic: try row.text("topic"))
    }
}
