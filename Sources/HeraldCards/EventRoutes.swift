import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird
import Logging

/// Engagement events (docs/cards.md): apps report them in batches, idempotently by `event_id`;
/// backends read per-card counts; sinks that take events get them forwarded.
package struct EventRoutes {
    let store: any CardStore
    let forwarder: EventForwarder
    let metrics: HeraldMetrics
    /// Events per user token: the one store an app's user (or, with `auth.device_sign_up`, anyone)
    /// could otherwise grow without bound. Keys acting for a user are the operator's own
    /// backends and are not counted.
    let limiter: TokenBuckets

    package init(store: any CardStore, forwarder: EventForwarder, metrics: HeraldMetrics, limiter: TokenBuckets) {
        self.store = store
        self.forwarder = forwarder
        self.metrics = metrics
        self.limiter = limiter
    }

    package static let maxEventsPerRequest = 500

    package func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/events", post)
        table.add(router, .get, "/api/events/stats", stats)
    }

    struct EventFields: Decodable {
        var event_id: String?
        var type: String?
        var reaction: String?
        var card: String?
        var name: String?
        var properties: [String: JSONValue]?
        var at: String?

        func event(userID: String, path: String) throws -> EngagementEvent {
            guard let id = event_id else { throw HeraldError.missingField("\(path).event_id") }
            guard !id.isEmpty, id.unicodeScalars.count <= EngagementEvent.maxIDLength, id.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f })
            else {
                throw HeraldError.invalidField("\(path).event_id", "must be 1-\(EngagementEvent.maxIDLength) characters without control characters")
            }
            guard let type else { throw HeraldError.missingField("\(path).type") }
            guard EngagementEvent.types.contains(type) else {
                throw HeraldError.invalidField("\(path).type", "must be one of \(EngagementEvent.types.sorted().joined(separator: ", "))")
            }
            if type == "reaction" {
                guard let reaction else { throw HeraldError.missingField("\(path).reaction") }
                guard EngagementEvent.reactions.contains(reaction) else {
                    throw HeraldError.invalidField("\(path).reaction", "must be one of \(EngagementEvent.reactions.sorted().joined(separator: ", "))")
                }
                guard card != nil else { throw HeraldError.missingField("\(path).card") }
            } else if reaction != nil {
                throw HeraldError.invalidField("\(path).reaction", "is only for events of type 'reaction'")
            }
            if type == "track" {
                guard let name, !name.isEmpty, name.unicodeScalars.count <= 128 else {
                    throw HeraldError.invalidField("\(path).name", "must be 1-128 characters for 'track' events")
                }
            }
            if let card { try Card.validateID(card, field: "\(path).card") }
            if let properties, JSONValue.object(properties).canonicalText.utf8.count > 8 * 1024 {
                throw HeraldError.invalidField("\(path).properties", "must be at most 8 KiB as JSON")
            }
            guard let text = at else { throw HeraldError.missingField("\(path).at") }
            guard let date = Timestamp.parse(text) else { throw HeraldError.invalidField("\(path).at", "must be an RFC 3339 date-time") }
            return EngagementEvent(
                eventID: id, userID: userID, type: type, reaction: reaction, card: card, name: name, properties: properties ?? [:], at: date
            )
        }
    }

    @Sendable func post(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        struct Body: Decodable { var events: [EventFields]? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["events"])
        guard let fields = body.events else { throw HeraldError.missingField("events") }
        guard fields.count <= Self.maxEventsPerRequest else {
            throw HeraldError.invalidField("events", "must have at most \(Self.maxEventsPerRequest) entries")
        }
        let events = try fields.enumerated().map { index, event in try event.event(userID: userID, path: "events[\(index)]") }
        let counted = context.caller?.isUserToken == true
        if counted, let wait = limiter.take(events.count, for: userID) {
            return RateLimitedAnswer.response(
                wait: wait, "this user may post \(limiter.capacity) engagement events an hour; none of these \(events.count) was stored; retry in \(wait) s")
        }
        let stored: [EngagementEvent]
        do {
            stored = try await store.storeEvents(events, at: Date())
        } catch {
            if counted { limiter.giveBack(events.count, for: userID) }
            throw error
        }
        // Duplicates of events already stored (an app resending a batch whose answer it lost)
        // do not count.
        if counted { limiter.giveBack(events.count - stored.count, for: userID) }
        for (type, group) in Dictionary(grouping: stored, by: \.type) { metrics.eventsStored(type: type, count: group.count) }
        forwarder.forward(stored)
        struct Answer: Encodable {
            var accepted: Int
            var duplicates: Int
        }
        return try JSONBody.response(Answer(accepted: stored.count, duplicates: events.count - stored.count), status: .accepted)
    }

    @Sendable func stats(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        guard let card = try request.nonEmptyQueryText("card") else { throw HeraldError.missingField("card") }
        try Card.validateID(card, field: "card")
        let stats = try await store.eventStats(card: card)
        struct Reactions: Encodable {
            var ctfo: Int
            var tfu: Int
            var tifb: Int
        }
        struct Answer: Encodable {
            var card: String
            var reactions: Reactions
            var focus: Int
        }
        return try JSONBody.response(Answer(card: card, reactions: .init(ctfo: stats.ctfo, tfu: stats.tfu, tifb: stats.tifb), focus: stats.focus))
    }
}
