public import Foundation
import GRDB
import HeraldAPI
public import OpenAPIRuntime

/// A card as the device keeps it.
public struct Card: Sendable, Equatable {
    /// Its id.
    public var id: String
    /// Whatever the backend stored with it.
    public var metadata: OpenAPIObjectContainer
}

/// A card in the device's history: seen, in the order seen.
public struct SeenCard: Sendable, Equatable {
    /// The card.
    public var card: Card
    /// When the device saw it.
    public var seenAt: Date
    /// Herald's history index, once Herald has the seen report; nil while it is queued.
    public var serverIndex: String?
}

/// The offline card pool (docs/cards.md, docs/heraldkit.md "Cards"): pulled with the cache key,
/// kept locally with the server's rules (the latest score wins, a seen card ignores scores), and
/// promoted with no network; each promotion queues its seen report.
extension Herald {
    /// Pulls what changed since the last pull (everything the first time); returns false when
    /// nothing did (304).
    @discardableResult
    public func refreshCards(limit: Int = 100) async throws(HeraldKitError) -> Bool {
        // The key goes in the query; the ETag Herald answered is the same key, quoted.
        let key = try database.value("pull_cache_key")
        let tag = key.map { "\"\($0)\"" }
        let output = try await calling { try await client.pull(query: .init(cacheKey: key, limit: limit), headers: .init(ifNoneMatch: tag)) }
        switch output {
        case .notModified:
            return false
        case .ok(let ok):
            guard case .json(let answer) = ok.body else { throw .unexpectedAnswer("GET /api/pull") }
            let at = now()
            try database.write { db in
                if answer.full {
                    try db.execute(sql: "DELETE FROM card WHERE id NOT IN (SELECT card FROM card_history)")
                    try db.execute(sql: "DELETE FROM pool")
                }
                for (id, metadata) in answer.cards.additionalProperties {
                    let json = String(decoding: try JSONEncoder().encode(metadata), as: UTF8.self)
                    try db.execute(
                        sql: "INSERT INTO card (id, metadata) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata", arguments: [id, json])
                }
                for id in answer.cardsRemoved {
                    try db.execute(sql: "DELETE FROM pool WHERE card = ?", arguments: [id])
                    try db.execute(sql: "DELETE FROM card WHERE id = ? AND id NOT IN (SELECT card FROM card_history)", arguments: [id])
                }
                for id in answer.poolRemoved { try db.execute(sql: "DELETE FROM pool WHERE card = ?", arguments: [id]) }
                for entry in answer.history {
                    try db.execute(sql: "DELETE FROM pool WHERE card = ?", arguments: [entry.card])
                    try db.execute(
                        sql: """
                            INSERT INTO card_history (card, seen_at, server_index) VALUES (?, ?, ?)
                            ON CONFLICT (card) DO UPDATE SET server_index = excluded.server_index
                            """, arguments: [entry.card, at.timeIntervalSince1970, entry.index])
                }
                for (card, score) in answer.pool.additionalProperties { try Self.score(card, score, at: at, in: db) }
                try LocalDatabase.setValue(answer.cacheKey, for: "pull_cache_key", in: db)
            }
            return true
        default:
            throw .unexpectedAnswer("GET /api/pull")
        }
    }

    /// Sets a card's score on the device, as of `at`: a later score wins (an earlier one is
    /// ignored), and a card already seen keeps no score.
    public func setScore(_ score: Double, forCard card: String, at: Date) throws(HeraldKitError) {
        try database.write { db in try Self.score(card, score, at: at, in: db) }
    }

    /// Moves the top-scored unseen card (ties by card id) to the end of the device's history and
    /// queues its seen report; nil when the pool is empty. Needs no network.
    public func promote() throws(HeraldKitError) -> SeenCard? {
        let at = now()
        return try database.write { db -> SeenCard? in
            guard let card = try String.fetchOne(db, sql: "SELECT card FROM pool ORDER BY score DESC, card ASC LIMIT 1") else { return nil }
            return try Self.see(card, at: at, in: db)
        }
    }

    /// Records that the app showed `card` (by other means than ``promote()``): it leaves the
    /// pool and its seen report is queued. Seeing a card twice changes nothing.
    @discardableResult
    public func markSeen(card: String) throws(HeraldKitError) -> SeenCard {
        let at = now()
        return try database.write { db in try Self.see(card, at: at, in: db) }
    }

    /// The unseen cards with their scores, highest first.
    public func pool() throws(HeraldKitError) -> [(card: String, score: Double)] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT card, score FROM pool ORDER BY score DESC, card ASC").map {
                (card: try $0.decode(forColumn: "card"), score: try $0.decode(forColumn: "score"))
            }
        }
    }

    /// The cards seen on this device (and those Herald's history had), oldest first.
    public func seenCards() throws(HeraldKitError) -> [SeenCard] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT card, seen_at, server_index FROM card_history ORDER BY position").map { row in
                let id: String = try row.decode(forColumn: "card")
                return SeenCard(
                    card: try Self.card(id, in: db), seenAt: Date(timeIntervalSince1970: try row.decode(forColumn: "seen_at")),
                    serverIndex: try row.decode(forColumn: "server_index"))
            }
        }
    }

    static func score(_ card: String, _ score: Double, at: Date, in db: Database) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM card_history WHERE card = ?", arguments: [card]) == nil else { return }
        try db.execute(
            sql: """
                INSERT INTO pool (card, score, scored_at) VALUES (?, ?, ?)
                ON CONFLICT (card) DO UPDATE SET score = excluded.score, scored_at = excluded.scored_at
                WHERE excluded.scored_at >= pool.scored_at
                """, arguments: [card, score, at.timeIntervalSince1970])
    }

    private static func see(_ card: String, at: Date, in db: Database) throws -> SeenCard {
        if let row = try Row.fetchOne(db, sql: "SELECT seen_at, server_index FROM card_history WHERE card = ?", arguments: [card]) {
            return SeenCard(
                card: try self.card(card, in: db), seenAt: Date(timeIntervalSince1970: try row.decode(forColumn: "seen_at")),
                serverIndex: try row.decode(forColumn: "server_index"))
        }
        try db.execute(sql: "DELETE FROM pool WHERE card = ?", arguments: [card])
        try db.execute(sql: "INSERT INTO card_history (card, seen_at) VALUES (?, ?)", arguments: [card, at.timeIntervalSince1970])
        let report = Operations.PostSeen.Input.Body.JsonPayload.SeenPayloadPayload(card: card, at: at)
        try Outbox.enqueue(id: "seen:\(card)", kind: .seen, body: try JSONEncoder.herald.encode(report), at: at, in: db)
        return SeenCard(card: try self.card(card, in: db), seenAt: at, serverIndex: nil)
    }

    private static func card(_ id: String, in db: Database) throws -> Card {
        let json = try String.fetchOne(db, sql: "SELECT metadata FROM card WHERE id = ?", arguments: [id]) ?? "{}"
        return Card(id: id, metadata: try JSONDecoder().decode(OpenAPIObjectContainer.self, from: Data(json.utf8)))
    }
}
