/// Draft and published personalised content. Each set is replaced whole, in one statement, so
/// a reader sees the old set or the new one, never a mix or nothing in between.
public protocol ContentStore: Sendable {
    func setPendingContent(_ items: [ContentItem]) async throws
    func pendingContent() async throws -> ContentSet
    func publishedContent() async throws -> ContentSet
    /// Makes the pending set the published one, stamping `last_published_at`. - Returns: the published set.
    func publishContent(at milliseconds: Int64) async throws -> ContentSet
    /// Replaces pending with published. - Returns: the pending set.
    func revertContent() async throws -> ContentSet
}
