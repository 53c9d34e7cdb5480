public import Foundation

/// One row of a user's history, in the shape apps parse (openapi.yaml).
public struct HistoryItem: Sendable, Equatable {
    /// The notification the row is for.
    public var notificationID: ObjectID
    /// Its title.
    public var title: String
    /// Its text.
    public var body: String
    /// Its type.
    public var type: String
    /// Where opening it leads; nil for nowhere.
    public var url: String?
    /// When it was accepted.
    public var timestamp: Date
    /// Whether the user marked it read.
    public var read: Bool
    /// Whether a list showing it was shown (docs/inbox.md); reading implies it.
    public var seen: Bool
    /// Whether the user archived it.
    public var archived: Bool
    /// Until when it is snoozed; nil when it is not.
    public var snoozedUntil: Date?

    /// A row as stored.
    public init(
        notificationID: ObjectID, title: String, body: String, type: String, url: String?, timestamp: Date, read: Bool, seen: Bool = false,
        archived: Bool = false, snoozedUntil: Date? = nil
    ) {
        self.notificationID = notificationID
        self.title = title
        self.body = body
        self.type = type
        self.url = url
        self.timestamp = timestamp
        self.read = read
        self.seen = seen
        self.archived = archived
        self.snoozedUntil = snoozedUntil
    }
}

/// One page of a user's history, newest first.
public struct HistoryPage: Sendable, Equatable {
    /// The rows, newest first.
    public var items: [HistoryItem]
    /// Pass as `before` to get the next (older) page; nil on the last page.
    public var next: String?

    /// A page and the cursor to the next.
    public init(items: [HistoryItem], next: String?) {
        self.items = items
        self.next = next
    }
}
