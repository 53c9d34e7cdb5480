import Foundation
import HeraldAPI
import OpenAPIRuntime

/// A reaction to a card (docs/cards.md "Engagement events").
public enum Reaction: String, Sendable, CaseIterable {
    /// Clicked through.
    case ctfo
    /// Thumbs up.
    case tfu
    /// Thumbs down.
    case tifb
}

/// Engagement events in Mixpanel's shape (docs/heraldkit.md "Analytics"): each call queues one
/// event with a fresh id in the local database and returns at once, online or not; ``Herald/upload()``
/// sends them in batches, and Herald counts an id once however often it arrives.
extension Herald {
    /// Who the user is, as properties (`plan`, `cohort`…).
    public func identify(_ properties: [String: (any Sendable)?] = [:]) throws(HeraldKitError) {
        try queue(.PlainEngagementEvent(.init(eventId: newEventID(), _type: .identify, properties: try container(properties), at: now())))
    }

    /// The user looked at `card` (or at the app, without one).
    public func focus(card: String? = nil) throws(HeraldKitError) {
        try queue(.PlainEngagementEvent(.init(eventId: newEventID(), _type: .focus, card: card, at: now())))
    }

    /// The user reacted to `card`; Herald marks it seen.
    public func react(_ reaction: Reaction, card: String) throws(HeraldKitError) {
        let payload = Components.Schemas.ReactionEvent.ReactionPayload(rawValue: reaction.rawValue) ?? .ctfo
        try queue(.ReactionEvent(.init(eventId: newEventID(), _type: .reaction, reaction: payload, card: card, at: now())))
    }

    /// A named event with properties (`opened_settings`, `{"from": "menu"}`).
    public func track(_ name: String, properties: [String: (any Sendable)?] = [:]) throws(HeraldKitError) {
        guard (1...128).contains(name.count) else { throw .invalidArgument("an event name must be 1-128 characters") }
        try queue(.TrackEvent(.init(eventId: newEventID(), _type: .track, name: name, properties: try container(properties), at: now())))
    }

    private func newEventID() -> String {
        UUID().uuidString.lowercased()
    }

    private func container(_ properties: [String: (any Sendable)?]) throws(HeraldKitError) -> OpenAPIObjectContainer? {
        guard !properties.isEmpty else { return nil }
        do {
            return try OpenAPIObjectContainer(unvalidatedValue: properties)
        } catch {
            throw .invalidArgument("event properties must be JSON values: \(error)")
        }
    }

    private func queue(_ event: Components.Schemas.EngagementEvent) throws(HeraldKitError) {
        let id: String
        let at: Date
        switch event {
        case .PlainEngagementEvent(let e): (id, at) = (e.eventId, e.at)
        case .ReactionEvent(let e): (id, at) = (e.eventId, e.at)
        case .TrackEvent(let e): (id, at) = (e.eventId, e.at)
        }
        try database.write { db in try Outbox.enqueue(id: id, kind: .event, body: try JSONEncoder.herald.encode(event), at: at, in: db) }
    }
}
