public import Foundation
public import HeraldCore

/// Writes every user recipient's notification into their history (docs/routing.md).
///
/// Exactly once per (notification, user): the store ignores a second write of the same pair,
/// so a retried batch never duplicates a row.
public struct HistorySink: NotificationSink {
    public let name = NotificationRouter.historySink
    public let capabilities: SinkCapabilities = .perUser
    private let store: any HistoryStore
    private let clock: @Sendable () -> Date

    /// A sink appending to `store`; `clock` stamps the rows (tests pass their own).
    public init(store: any HistoryStore, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.clock = clock
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        do {
            try await store.appendHistory(
                batch.map { ($0.notification.id, $0.recipient.userID) }, at: clock(),
                leases: batch.map { DeliveryLease(id: $0.id, attempt: $0.attempt) })
            return batch.map { _ in .delivered }
        } catch {
            return batch.map { _ in .retry(after: nil, reason: "history write failed: \(error)") }
        }
    }
}
