public import Foundation
public import HeraldAPI
import OpenAPIRuntime

/// A history item, as `GET /api/notifications/history` answers it (docs/inbox.md).
public typealias HistoryItem = Components.Schemas.HistoryItem
/// The inbox counts (`GET /api/inbox/counts`).
public typealias InboxCounts = Components.Schemas.InboxCounts

/// A page of history and where the next one starts.
public struct HistoryPage: Sendable {
    /// Newest first.
    public var items: [HistoryItem]
    /// Pass it as `before` for the next page; nil on the last.
    public var next: String?
}

/// A change to inbox items (docs/inbox.md "Marks").
public enum InboxChange: Sendable, Equatable {
    /// Seen (the badge's `unseen` drops).
    case seen
    /// Read.
    case read
    /// Unread again.
    case unread
    /// Archived (out of the inbox).
    case archived
    /// Back in the inbox.
    case unarchived
    /// Hidden until the instant, then back as unread.
    case snoozed(until: Date)
}

/// History, the inbox and the app icon's badge (docs/inbox.md, docs/heraldkit.md "Inbox"). The
/// last counts Herald answered are kept, so the badge is right at launch, offline.
extension Herald {
    /// A page of the user's history, newest first; `state` and `type` filter as the endpoint does.
    public func history(
        limit: Int = 50, before: String? = nil, state: Operations.GetHistory.Input.Query.StatePayload? = nil, type: String? = nil
    ) async throws(HeraldKitError) -> HistoryPage {
        let typeFilter = type.map { Operations.GetHistory.Input.Query._TypePayload(value1: Components.Schemas.NotificationType(rawValue: $0), value2: $0) }
        let output = try await calling { try await client.getHistory(query: .init(limit: limit, before: before, state: state, _type: typeFilter)) }
        guard case .ok(let ok) = output, case .json(let page) = ok.body else { throw .unexpectedAnswer("GET /api/notifications/history") }
        return HistoryPage(items: page.history, next: page.next)
    }

    /// Changes the items with these ids (at most Herald's limit a call); returns the new counts.
    @discardableResult
    public func mark(_ ids: [String], _ change: InboxChange) async throws(HeraldKitError) -> InboxCounts {
        let body: Operations.MarkInbox.Input.Body.JsonPayload
        switch change {
        case .snoozed(let until): body = .case2(.init(ids: ids, change: "snoozed", until: until))
        default: body = .case1(.init(ids: ids, change: try Self.plain(change)))
        }
        return try await mark(body)
    }

    /// Changes every item (of `type`, posted before `before`, when given); returns the new counts.
    @discardableResult
    public func markAll(_ change: InboxChange, type: String? = nil, before: Date? = nil) async throws(HeraldKitError) -> InboxCounts {
        let kind = try type.map { text throws(HeraldKitError) in
            guard let kind = Components.Schemas.NotificationType(rawValue: text) else { throw .invalidArgument("'\(text)' is not a notification type") }
            return kind
        }
        let body: Operations.MarkInbox.Input.Body.JsonPayload
        switch change {
        case .snoozed(let until): body = .case4(.init(all: true, _type: kind, before: before, change: "snoozed", until: until))
        default: body = .case3(.init(all: true, _type: kind, before: before, change: try Self.plain(change)))
        }
        return try await mark(body)
    }

    /// The counts now, kept for ``badge``.
    @discardableResult
    public func inboxCounts() async throws(HeraldKitError) -> InboxCounts {
        let output = try await calling { try await client.getInboxCounts() }
        guard case .ok(let ok) = output, case .json(let counts) = ok.body else { throw .unexpectedAnswer("GET /api/inbox/counts") }
        try keep(counts)
        return counts
    }

    /// The number for the app icon: unread items in the inbox, as last heard from Herald (a
    /// mark's answer, the counts, or the live stream); 0 before the first.
    public func badge() throws(HeraldKitError) -> Int {
        try database.value("badge").flatMap(Int.init) ?? 0
    }

    func keep(_ counts: InboxCounts) throws(HeraldKitError) {
        try database.setValue(String(counts.unread), for: "badge")
    }

    private func mark(_ body: Operations.MarkInbox.Input.Body.JsonPayload) async throws(HeraldKitError) -> InboxCounts {
        let output = try await calling { try await client.markInbox(body: .json(body)) }
        guard case .ok(let ok) = output, case .json(let counts) = ok.body else { throw .unexpectedAnswer("POST /api/inbox/mark") }
        try keep(counts)
        return counts
    }

    private static func plain(_ change: InboxChange) throws(HeraldKitError) -> Components.Schemas.InboxPlainChange {
        switch change {
        case .seen: .seen
        case .read: .read
        case .unread: .unread
        case .archived: .archived
        case .unarchived: .unarchived
        case .snoozed: throw .invalidArgument("a snooze has an instant")
        }
    }
}
