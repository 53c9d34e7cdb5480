public import Foundation

/// Something a user did in an app (identify, focus, a reaction, a named event), reported by the
/// app and forwarded to sinks that take events (a team's own analytics tool behind a webhook).
public struct EngagementEvent: Sendable, Equatable {
    /// The event types apps may report.
    public static let types: Set<String> = ["identify", "focus", "reaction", "track"]
    /// The reactions a `reaction` event may carry.
    public static let reactions: Set<String> = ["ctfo", "tfu", "tifb"]
    /// Longest `event_id`.
    public static let maxIDLength = 128

    /// The app's own id for the event; the same id twice for one user is one event.
    public var eventID: String
    /// The user it happened to.
    public var userID: String
    /// `identify`, `focus`, `reaction` or `track`.
    public var type: String
    /// For reactions: `ctfo`, `tfu` or `tifb`.
    public var reaction: String?
    /// The card the event is about, if any.
    public var card: String?
    /// For `track` events: the event's name.
    public var name: String?
    /// The app's own properties, forwarded as they came.
    public var properties: [String: JSONValue]
    /// When it happened on the device.
    public var at: Date

    /// An event as reported; the events route validates the fields first.
    public init(
        eventID: String, userID: String, type: String, reaction: String? = nil, card: String? = nil, name: String? = nil,
        properties: [String: JSONValue] = [:], at: Date
    ) {
        self.eventID = eventID
        self.userID = userID
        self.type = type
        self.reaction = reaction
        self.card = card
        self.name = name
        self.properties = properties
        self.at = at
    }
}
