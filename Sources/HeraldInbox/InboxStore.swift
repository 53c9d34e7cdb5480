public import Foundation
public import HeraldCore

/// Where the inbox keeps its states and counts: the history rows and the counters beside them
/// (docs/inbox.md). Counts are read from counters kept in the writing transaction, never by
/// counting history; every read goes to the primary database.
public protocol InboxStore: BadgeCounts {
    /// Applies `change` to the user's selected items in one transaction and answers the counts
    /// after it; every process's live streams hear of it.
    func mark(userID: String, _ selection: InboxSelection, _ change: InboxChange, at now: Date) async throws -> InboxMarkResult
    func counts(userID: String) async throws -> InboxCounts
    /// A page of the user's history, newest first, narrowed by state and type; `before` is a
    /// cursor the history endpoint returned.
    func items(userID: String, state: InboxState?, type: String?, limit: Int, before: String?) async throws -> HistoryPage
    /// Ends the snoozes due by `now` (at most `limit`), announcing them to live streams.
    /// - Returns: the users whose items came back, one entry per item.
    func endSnoozes(dueBy now: Date, limit: Int) async throws -> [String]
    /// Removes at most `limit` items written before `before` that are archived
    /// (`retention.inbox_archived`), or read (`retention.inbox_read`).
    func purge(archived: Bool, before: Date, limit: Int) async throws -> Int
}
