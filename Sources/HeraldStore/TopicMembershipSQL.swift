/// The record of provider-side topic membership (the topics module's
/// SharedTopicMembershipStore), created the same on both engines.
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
}
