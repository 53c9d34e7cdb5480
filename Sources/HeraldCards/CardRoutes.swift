import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// Cards for offline-first apps (docs/cards.md): backends store cards and score
/// them per user; apps pull what changed, report what was seen and promote the next card.
package struct CardRoutes {
    let store: any CardStore
    /// A pull carries the user's newest notifications too.
    let history: any HistoryStore
    let metrics: HeraldMetrics
    let timestamps: TimestampStyle

    package init(store: any CardStore, history: any HistoryStore, metrics: HeraldMetrics, timestamps: TimestampStyle) {
        self.store = store
        self.history = history
        self.metrics = metrics
        self.timestamps = timestamps
    }

    static let maxCardsPerRequest = 1_000
    static let maxSeenPerRequest = 1_000
    /// NDJSON score uploads may be far larger than JSON bodies: 100 000 lines is about 8 MiB.
    /// They are read whole before anything is applied, so they are bounded in bytes and lines.
    static let maxScoreUploadBytes = 128 * 1024 * 1024
    static let maxScoreLines = 1_000_000
    static let maxScoreLineBytes = 4 * 1024
    /// Updates per store transaction while applying a large upload.
    static let scoreChunk = 10_000
    static let defaultPullLimit = 100
    static let maxPullLimit = 1_000
    /// History items a pull carries at most.
    static let pullNotifications = 50

    package func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .put, "/api/cards/{id}", putCard)
        table.add(router, .delete, "/api/cards/{id}", deleteCard)
        table.add(router, .post, "/api/cards", putCards)
        table.add(router, .post, "/api/pool/scores", scores)
        table.add(router, .post, "/api/pool/seen", seen)
        table.add(router, .post, "/api/pool/promote", promote)
        table.add(router, .get, "/api/pull", pull)
    }

    // MARK: - Cards

    struct CardFields: Decodable {
        var id: String?
        var metadata: [String: JSONValue]?
        var posted_at: String?
        var hot: Double?

        func card(id: String, path: String) throws -> Card {
            guard let metadata else { throw HeraldError.missingField("\(path)metadata") }
            guard let posted = posted_at else { throw HeraldError.missingField("\(path)posted_at") }
            guard let postedAt = Timestamp.parse(posted) else { throw HeraldError.invalidField("\(path)posted_at", "must be an RFC 3339 date-time") }
            let card = Card(id: id, metadata: metadata, postedAt: postedAt, hot: hot)
            try card.validate(path: path)
            return card
        }
    }

    @Sendable func putCard(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let id = try context.parameters.require("id")
        try Card.validateID(id, field: "id")
        let body = try await JSONBody.decode(CardFields.self, from: request, context: context, knownFields: ["metadata", "posted_at", "hot"])
        let created = try await store.putCards([try body.card(id: id, path: "")])
        struct Answer: Encodable { var id: String }
        return try JSONBody.response(Answer(id: id), status: created.contains(id) ? .created : .ok)
    }

    @Sendable func deleteCard(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let id = try context.parameters.require("id")
        try Card.validateID(id, field: "id")
        guard try await store.deleteCard(id: id) else { throw HeraldError.notFound("card '\(id)'") }
        return Response(status: .noContent)
    }

    @Sendable func putCards(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        struct Body: Decodable { var cards: [CardFields]? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["cards"])
        guard let fields = body.cards else { throw HeraldError.missingField("cards") }
        guard fields.count <= Self.maxCardsPerRequest else { throw HeraldError.invalidField("cards", "must have at most \(Self.maxCardsPerRequest) entries") }
        var seen: Set<String> = []
        let cards = try fields.enumerated().map { index, card in
            guard let id = card.id else { throw HeraldError.missingField("cards[\(index)].id") }
            guard seen.insert(id).inserted else { throw HeraldError.invalidField("cards[\(index)].id", "repeats card '\(id)'") }
            return try card.card(id: id, path: "cards[\(index)].")
        }
        let created = try await store.putCards(cards)
        struct Answer: Encodable {
            var stored: Int
            var created: [String]
        }
        return try JSONBody.response(Answer(stored: cards.count, created: created.sorted()))
    }

    // MARK: - Scores

    @Sendable func scores(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let contentType = MediaType(request.headers[.contentType] ?? "application/json")
        var report = ScoreReport()
        let updates: [ScoreUpdate]
        if contentType.essence == "application/x-ndjson" {
            guard contentType.isUTF8 else { throw contentType.charsetRefusal }
            (updates, report.rejected) = try await Self.ndjsonUpdates(request)
        } else {
            (updates, report.rejected) = try await Self.jsonUpdates(request, context: context)
        }
        for start in stride(from: 0, to: updates.count, by: Self.scoreChunk) {
            report.add(try await store.applyScores(Array(updates[start..<min(start + Self.scoreChunk, updates.count)])))
        }
        metrics.scoreUpdates(outcome: "applied", count: report.applied)
        metrics.scoreUpdates(outcome: "ignored_seen", count: report.ignoredSeen)
        metrics.scoreUpdates(outcome: "stale", count: report.stale)
        metrics.scoreUpdates(outcome: "rejected", count: report.rejected.count)
        struct Rejection: Encodable {
            var user_id: String
            var card: String
            var reason: String
        }
        struct Answer: Encodable {
            var applied: Int
            var ignored_seen: Int
            var stale: Int
            var rejected: [Rejection]
        }
        return try JSONBody.response(
            Answer(
                applied: report.applied, ignored_seen: report.ignoredSeen, stale: report.stale,
                rejected: report.rejected.map { Rejection(user_id: $0.userID, card: $0.card, reason: $0.reason) }
            )
        )
    }

    /// An entry whose ids are malformed is rejected alone, like an unknown card.
    static func check(userID: String, card: String) -> String? {
        if (try? UserID.validate(userID, field: "user_id")) == nil { return "invalid_user_id" }
        if (try? Card.validateID(card, field: "card")) == nil { return "invalid_card" }
        return nil
    }

    static func jsonUpdates(_ request: Request, context: HeraldRequestContext) async throws -> ([ScoreUpdate], [ScoreReport.Rejection]) {
        struct Body: Decodable {
            var timestamp: Double?
            var users: [String: [String: Double]]?
        }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["timestamp", "users"])
        guard let timestamp = body.timestamp else { throw HeraldError.missingField("timestamp") }
        guard let users = body.users else { throw HeraldError.missingField("users") }
        var updates: [ScoreUpdate] = []
        var rejected: [ScoreReport.Rejection] = []
        for (userID, cards) in users.sorted(by: { $0.key < $1.key }) {
            for (card, score) in cards.sorted(by: { $0.key < $1.key }) {
                if let reason = check(userID: userID, card: card) {
                    rejected.append(.init(userID: userID, card: card, reason: reason))
                } else {
                    updates.append(ScoreUpdate(userID: userID, card: card, score: score, timestamp: timestamp))
                }
            }
        }
        return (updates, rejected)
    }

    /// One `{"user_id","card","score","timestamp"}` a line; a line that is not one is a 422
    /// naming it, before anything is applied.
    static func ndjsonUpdates(_ request: Request) async throws -> ([ScoreUpdate], [ScoreReport.Rejection]) {
        struct Line: Decodable {
            var user_id: String
            var card: String
            var score: Double
            var timestamp: Double
            static let fields = ["card", "score", "timestamp", "user_id"]

            /// One container for the values and the keys: a member a line should not have was
            /// ignored, where a JSON body's is refused.
            init(from decoder: any Decoder) throws {
                typealias Key = KeyedBody<Line>.Key
                let c = try decoder.container(keyedBy: Key.self)
                user_id = try c.decode(String.self, forKey: Key(stringValue: "user_id"))
                card = try c.decode(String.self, forKey: Key(stringValue: "card"))
                score = try c.decode(Double.self, forKey: Key(stringValue: "score"))
                timestamp = try c.decode(Double.self, forKey: Key(stringValue: "timestamp"))
                // Names are unique (JSONTextCheck), so more than four keys means another one.
                let keys = c.allKeys
                if keys.count > Self.fields.count, let unknown = keys.map({ $0.stringValue }).sorted().first(where: { !Self.fields.contains($0) }) {
                    throw HeraldError(.unprocessable, code: "unknown_field", "unknown field '\(unknown)'; known fields: \(Self.fields.joined(separator: ", "))")
                }
            }
        }
        var updates: [ScoreUpdate] = []
        var rejected: [ScoreReport.Rejection] = []
        var pending: [UInt8] = []
        var received = 0
        var lineNumber = 0
        let decoder = JSONDecoder()
        func take(_ bytes: ArraySlice<UInt8>) throws {
            lineNumber += 1
            guard lineNumber <= maxScoreLines else {
                throw HeraldError(.payloadTooLarge, code: "payload_too_large", "an NDJSON upload is limited to \(maxScoreLines) lines; send several")
            }
            let line = bytes.last == UInt8(ascii: "\r") ? bytes.dropLast() : bytes
            guard line.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { return }
            let data = Data(line)
            if let problem = JSONTextCheck.firstProblem(in: data) { throw JSONTextCheck.error(for: problem, prefix: "line \(lineNumber): ") }
            let parsed: Line
            do {
                parsed = try decoder.decode(Line.self, from: data)
            } catch {
                let problem = JSONBody.decodingFailure(error)
                throw HeraldError(.unprocessable, code: problem.code, "line \(lineNumber): \(problem.message)")
            }
            if let reason = check(userID: parsed.user_id, card: parsed.card) {
                rejected.append(.init(userID: parsed.user_id, card: parsed.card, reason: reason))
            } else {
                updates.append(ScoreUpdate(userID: parsed.user_id, card: parsed.card, score: parsed.score, timestamp: parsed.timestamp))
            }
        }
        let tooLarge = HeraldError(.payloadTooLarge, code: "payload_too_large", "an NDJSON upload is limited to \(maxScoreUploadBytes / 1024 / 1024) MiB")
        guard !AnnouncedLength.exceeds(request, maxScoreUploadBytes) else { throw tooLarge }
        for try await buffer in request.body {
            received += buffer.readableBytes
            guard received <= maxScoreUploadBytes else { throw tooLarge }
            pending.append(contentsOf: buffer.readableBytesView)
            var start = pending.startIndex
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try take(pending[start..<newline])
                start = newline + 1
            }
            pending.removeSubrange(pending.startIndex..<start)
            guard pending.count <= maxScoreLineBytes else {
                throw HeraldError(.unprocessable, code: "invalid_field", "line \(lineNumber + 1): longer than \(maxScoreLineBytes) bytes")
            }
        }
        if !pending.isEmpty { try take(pending[...]) }
        return (updates, rejected)
    }

    // MARK: - Seen and promote

    @Sendable func seen(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        struct Report: Decodable {
            var card: String?
            var at: String?
        }
        struct Body: Decodable { var seen: [Report]? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["seen"])
        guard let reports = body.seen else { throw HeraldError.missingField("seen") }
        guard reports.count <= Self.maxSeenPerRequest else { throw HeraldError.invalidField("seen", "must have at most \(Self.maxSeenPerRequest) entries") }
        let seen = try reports.enumerated().map { index, report in
            guard let card = report.card else { throw HeraldError.missingField("seen[\(index)].card") }
            try Card.validateID(card, field: "seen[\(index)].card")
            guard let text = report.at else { throw HeraldError.missingField("seen[\(index)].at") }
            guard let at = Timestamp.parse(text) else { throw HeraldError.invalidField("seen[\(index)].at", "must be an RFC 3339 date-time") }
            return SeenReport(card: card, at: at)
        }
        let entries = try await store.markSeen(userID: userID, seen)
        struct Answer: Encodable { var history: [HistoryEntryBody] }
        return try JSONBody.response(Answer(history: entries.map(HistoryEntryBody.init)))
    }

    @Sendable func promote(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        guard let (entry, card) = try await store.promote(userID: userID, at: Date()) else { return Response(status: .noContent) }
        struct Answer: Encodable {
            var index: String
            var card: String
            var metadata: [String: JSONValue]
        }
        return try JSONBody.response(Answer(index: String(entry.index), card: card.id, metadata: card.metadata))
    }

    // MARK: - Pull

    @Sendable func pull(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let order: PoolOrder
        switch try request.nonEmptyQueryText("mode") {
        case nil: order = .hot
        case let text?:
            guard let mode = PoolOrder(rawValue: text) else { throw HeraldError.invalidField("mode", "must be 'hot' or 'recent'") }
            order = mode
        }
        var limit = Self.defaultPullLimit
        if let text = try request.queryText("limit") {
            guard let value = Int(text), (1...Self.maxPullLimit).contains(value) else {
                throw HeraldError.invalidField("limit", "must be an integer from 1 to \(Self.maxPullLimit)")
            }
            limit = value
        }
        let given = try request.nonEmptyQueryText("cache_key").flatMap { CardCacheKey.parse($0, userID: userID) }

        let state = try await store.cardState(userID: userID)
        let current = CardCacheKey.text(userID: userID, state: state)
        if EntityTag.matches(request, "\"\(current)\"") {
            return Response(status: .notModified, headers: [.eTag: "\"\(current)\""])
        }
        let pull = try await store.pull(userID: userID, since: given?.mark, order: order, limit: limit)
        // A change between the two reads: the key names what this answer holds.
        var answered = state
        answered.mark = pull.mark
        let key = answered == state ? current : CardCacheKey.text(userID: userID, state: answered)

        let recent = try await history.history(userID: userID, limit: Self.pullNotifications, before: nil).items
        var notifications = recent
        if !pull.full, let given {
            if let known = given.newestNotification, let position = recent.firstIndex(where: { $0.notificationID.hex == known }) {
                notifications = Array(recent[..<position])
            }
        }

        // The pool keeps the order asked for (`hot` or `recent`), which a keyed encoder would
        // sort away, and card metadata is stored as JSON: the answer is written, not encoded.
        struct User: Encodable {
            var settings: UserSettings
            var unread: Int
        }
        let user = try JSONBody.encoder().encode(User(settings: try state.settings(), unread: state.unread))
        var json = JSONWriter(capacity: 64 * (pull.cards.count + pull.pool.count) + 4_096)
        json.object { body in
            body.member("cache_key", key)
            body.key("full")
            body.bool(pull.full)
            body.key("cards")
            body.object { cards in
                for card in pull.cards {
                    cards.key(card.id)
                    cards.raw(card.metadataJSON)
                }
            }
            body.key("cards_removed")
            body.stringArray(pull.cardsRemoved)
            body.key("pool")
            body.object { pool in
                for entry in pull.pool {
                    pool.key(entry.card)
                    pool.raw(String(entry.score))
                }
            }
            body.key("pool_removed")
            body.stringArray(pull.poolRemoved)
            body.key("history")
            body.array { history in
                for entry in pull.history {
                    history.object { item in
                        item.member("card", entry.card)
                        item.member("index", String(entry.index))
                    }
                }
            }
            body.key("user")
            body.raw(user)
            body.key("notifications")
            body.array { list in
                for item in notifications { HistoryResponse.Item(item, timestamps: timestamps).write(to: &list) }
            }
        }
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .eTag: "\"\(key)\"", .cacheControl: "private, no-cache"],
            body: .init(byteBuffer: ByteBuffer(bytes: json.bytes))
        )
    }

}

/// `{"index": "17", "card": "…"}`: indexes are strings, as the app's history keys are.
struct HistoryEntryBody: Encodable {
    var index: String
    var card: String

    init(_ entry: CardHistoryEntry) {
        index = String(entry.index)
        card = entry.card
    }
}
