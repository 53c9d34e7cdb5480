public import Foundation
import GRDB
import HeraldAPI
public import HeraldFeedRules

/// A message of the pull feed, as the device keeps it.
public struct FeedMessage: Sendable, Equatable, Codable, FeedCandidate {
    /// Its id (24 hex characters).
    public var id: String
    /// Its title.
    public var title: String
    /// Its text.
    public var body: String
    /// Where opening it leads.
    public var url: String?
    /// When it was posted.
    public var postedAt: Date
    /// When it leaves the feed.
    public var expiresAt: Date
    /// Higher first.
    public var priority: Int
    /// Region codes; `"CA"` is every region.
    public var targetRegions: [String]
    /// A semver range; nil for every version.
    public var targetVersion: String?

    public var feedID: String { id }
    public var feedPriority: Int { priority }
    public var feedPostedAt: Date { postedAt }
    public var feedExpiresAt: Date { expiresAt }
    public var feedAudience: FeedAudience { FeedAudience(targetRegions: targetRegions, targetVersion: targetVersion) }
}

/// The private pull feed (docs/feed.md, docs/heraldkit.md "Pull feed"): the whole `index.json`
/// is fetched with its entity tag, sending neither region nor version, and the device decides
/// what to show with the server's own rules (``FeedEligibility``) and its own read receipts,
/// which never leave it.
extension Herald {
    /// Fetches the feed unless unchanged since the last fetch (304). Returns whether it changed.
    /// Receipts of messages no longer in the feed are dropped: they can never be shown again.
    @discardableResult
    public func refreshFeed() async throws(HeraldKitError) -> Bool {
        let etag = try database.value("feed_etag")
        let output = try await calling { try await client.feedIndex(headers: .init(ifNoneMatch: etag)) }
        switch output {
        case .notModified:
            return false
        case .ok(let ok):
            guard case .json(let document) = ok.body else { throw .unexpectedAnswer("GET /feed/index.json") }
            let messages = document.messages.map {
                FeedMessage(
                    id: $0.id, title: $0.title, body: $0.body, url: $0.url, postedAt: $0.postedAt, expiresAt: $0.expiresAt, priority: $0.priority,
                    targetRegions: $0.targetRegions, targetVersion: $0.targetVersion)
            }
            try storeFeed(messages, etag: ok.headers.eTag)
            return true
        default:
            throw .unexpectedAnswer("GET /feed/index.json")
        }
    }

    /// Every message eligible on this device now, in display order (works offline, from the
    /// last fetch).
    public func eligibleFeedMessages() throws(HeraldKitError) -> [FeedMessage] {
        FeedEligibility.eligible(try storedFeedMessages(), at: now(), region: app.region, version: appVersion)
    }

    /// The one message to show now: eligible and not yet read on this device; nil for none.
    public func nextFeedMessage() throws(HeraldKitError) -> FeedMessage? {
        let read = try database.read { db in Set(try String.fetchAll(db, sql: "SELECT message_id FROM feed_receipt")) }
        return FeedEligibility.next(try storedFeedMessages(), at: now(), region: app.region, version: appVersion, read: read)
    }

    /// Records that the message was shown; it is not offered again.
    public func markFeedMessageRead(_ id: String) throws(HeraldKitError) {
        let at = now().timeIntervalSince1970
        try database.write { db in
            try db.execute(sql: "INSERT INTO feed_receipt (message_id, read_at) VALUES (?, ?) ON CONFLICT DO NOTHING", arguments: [id, at])
        }
    }

    /// Replaces the kept feed with `messages` and drops the receipts of messages gone from it.
    func storeFeed(_ messages: [FeedMessage], etag: String?) throws(HeraldKitError) {
        try database.write { db in
            try db.execute(sql: "DELETE FROM feed_message")
            for m in messages {
                try db.execute(
                    sql: """
                        INSERT INTO feed_message (id, title, body, url, posted_at, expires_at, priority, target_regions, target_version)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        m.id, m.title, m.body, m.url, m.postedAt.timeIntervalSince1970, m.expiresAt.timeIntervalSince1970, m.priority,
                        String(decoding: try JSONEncoder().encode(m.targetRegions), as: UTF8.self), m.targetVersion,
                    ])
            }
            try db.execute(sql: "DELETE FROM feed_receipt WHERE message_id NOT IN (SELECT id FROM feed_message)")
            try LocalDatabase.setValue(etag, for: "feed_etag", in: db)
        }
    }

    /// The read receipts kept (they never leave the device).
    func feedReceiptCount() throws(HeraldKitError) -> Int {
        try database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM feed_receipt") ?? 0 }
    }

    /// The app's version as the feed's ranges read it (`2.1` is 2.1.0); nil when it does not
    /// read, which skips the version filter as the server does.
    var appVersion: SemanticVersion? {
        app.version.flatMap { SemanticVersion(coercing: $0) }
    }

    private func storedFeedMessages() throws(HeraldKitError) -> [FeedMessage] {
        try database.read { db in
            // Decoded with throwing reads: a damaged file is an error, never a trap.
            try Row.fetchAll(db, sql: "SELECT * FROM feed_message").map { row in
                let regions = try JSONDecoder().decode([String].self, from: Data(try row.decode(String.self, forColumn: "target_regions").utf8))
                return FeedMessage(
                    id: try row.decode(forColumn: "id"), title: try row.decode(forColumn: "title"), body: try row.decode(forColumn: "body"),
                    url: try row.decode(forColumn: "url"), postedAt: Date(timeIntervalSince1970: try row.decode(forColumn: "posted_at")),
                    expiresAt: Date(timeIntervalSince1970: try row.decode(forColumn: "expires_at")), priority: try row.decode(forColumn: "priority"),
                    targetRegions: regions, targetVersion: try row.decode(forColumn: "target_version"))
            }
        }
    }
}
