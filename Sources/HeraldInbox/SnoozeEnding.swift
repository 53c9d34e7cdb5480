import Foundation
public import Logging
public import ServiceLifecycle

/// Brings snoozed items back when their time comes (docs/inbox.md): unread again, announced on
/// the users' streams and, through `ended`, to their devices.
public struct SnoozeEnding: Service {
    let store: any InboxStore
    let ended: @Sendable (_ userIDs: Set<String>) -> Void
    let interval: Duration
    let logger: Logger

    /// Items ended per statement.
    static let batch = 500

    public init(store: any InboxStore, interval: Duration = .seconds(1), logger: Logger, ended: @escaping @Sendable (_ userIDs: Set<String>) -> Void) {
        self.store = store
        self.interval = interval
        self.logger = logger
        self.ended = ended
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                await self.endDue(now: Date())
                try? await Task.sleep(for: self.interval)
            }
        }
    }

    /// Ends every snooze due by `now`, a batch at a time.
    func endDue(now: Date) async {
        do {
            while !Task.isCancelled {
                let users = try await store.endSnoozes(dueBy: now, limit: Self.batch)
                if !users.isEmpty { ended(Set(users)) }
                if users.count < Self.batch { return }
            }
        } catch _ where Task.isCancelled || Task.isShuttingDownGracefully {
            return // ending, not a failure
        } catch {
            // The next pass looks again: an item stays snoozed a second longer.
            logger.warning("could not end due snoozes: \(error)")
        }
    }
}
