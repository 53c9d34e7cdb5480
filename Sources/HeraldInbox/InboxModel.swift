public import Foundation
public import HeraldCore

/// A user's inbox counts (docs/inbox.md): unseen and unread count items in the inbox (neither
/// archived nor snoozed); archived counts archived ones.
public struct InboxCounts: Sendable, Equatable {
    public struct Tally: Sendable, Equatable {
        public var unseen = 0
        public var unread = 0
        public var archived = 0

        public init(unseen: Int = 0, unread: Int = 0, archived: Int = 0) {
            (self.unseen, self.unread, self.archived) = (unseen, unread, archived)
        }

        var isZero: Bool { unseen == 0 && unread == 0 && archived == 0 }
    }

    /// All types together.
    public var total = Tally()
    /// Per notification type; a type with nothing to count is left out.
    public var byType: [String: Tally] = [:]

    public init(total: Tally = Tally(), byType: [String: Tally] = [:]) {
        self.total = total
        self.byType = byType
    }

    /// `{"archived":…,"by_type":{…},"unread":…,"unseen":…}`, keys sorted as the API writes them.
    public var json: [UInt8] {
        var writer = JSONWriter(capacity: 96 + 64 * byType.count)
        writer.object { counts in
            counts.key("archived")
            counts.integer(total.archived)
            counts.key("by_type")
            counts.object { types in
                for (type, tally) in byType.sorted(by: { $0.key < $1.key }) {
                    types.key(type)
                    types.object { Self.write(tally, to: &$0) }
                }
            }
            counts.key("unread")
            counts.integer(total.unread)
            counts.key("unseen")
            counts.integer(total.unseen)
        }
        return writer.bytes
    }

    private static func write(_ tally: Tally, to object: inout JSONWriter) {
        object.key("archived")
        object.integer(tally.archived)
        object.key("unread")
        object.integer(tally.unread)
        object.key("unseen")
        object.integer(tally.unseen)
    }
}

/// What `POST /api/inbox/mark` does to the items it selects.
public enum InboxChange: Sendable, Equatable {
    case seen, read, unread, archived, unarchived
    /// Out of the inbox until then; unread again after.
    case snooze(until: Date)

    /// The names the API takes (`snooze` with `until`).
    public static let names = ["seen", "read", "unread", "archived", "unarchived", "snooze"]
}

/// The items a mark applies to: listed ones, or all of a user's (narrowed by type and age).
public enum InboxSelection: Sendable, Equatable {
    case ids([ObjectID])
    /// Every item, or those of `type`, or those written before `before`.
    case all(type: String?, before: Date?)
}

/// The states a history read may filter by (`GET /api/notifications/history?state=`).
public enum InboxState: String, Sendable, CaseIterable {
    /// Every item, as without a filter, but with each item's states.
    case all
    /// Neither archived nor snoozed.
    case inbox
    /// In the inbox and not yet seen.
    case unseen
    /// In the inbox and seen.
    case seen
    /// In the inbox and not read: what `unread` counts.
    case unread
    /// In the inbox and read.
    case read
    case archived
    case snoozed
}

/// What a mark did: the counts after it, and how many items it changed.
public struct InboxMarkResult: Sendable, Equatable {
    public var counts: InboxCounts
    public var changed: Int
}
