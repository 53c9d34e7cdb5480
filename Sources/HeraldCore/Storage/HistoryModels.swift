public import Foundation

/// One row of a user's history, in the shape apps parse (openapi.yaml).
public struct HistoryItem: Sendable, Equatable {
    public var notificationID: ObjectID
    public var title: String
    public var body: String
    public var type: String
    public var url: String?
    public var timestamp: Date
    public var read: Bool

    public init(notificationID: ObjectID, title: String, body: String, type: String, url: String?, timestamp: Date, read: Bool) {
        self.notificationID = notificationID
        self.title = title
        self.body = body
        self.type = type
        self.url = url
        self.timestamp = timestamp
        self.read = read
    }
}

public struct HistoryPage: Sendable, Equatable {
    public var items: [HistoryItem]
    /// Pass as `before` to get the next (older) page; nil on the last page.
    public var next: String?

    public init(items: [HistoryItem], next: String?) {
        self.items = items
        self.next = next
    }
}
