public import Foundation
import HeraldCore
public import ServiceLifecycle
import Synchronization

/// The silent push that brings a user's other devices in step after an inbox change
/// (`inbox.sync_push`, docs/inbox.md), coalesced: a user's changes within `interval` of the last
/// push are one push, carrying the unread count read when it is sent. The installation that
/// made every change in the window is skipped (it knows already); changes from several devices
/// reach them all, each lacking the others'.
public final class InboxSync: Service, Sendable {
    /// Sends the push to the user's devices but the skipped installation's; the unread count is
    /// the caller's to read when it sends.
    public typealias Send = @Sendable (_ userID: String, _ skipping: String?) async -> Void

    private struct Pending {
        var due: Date
        /// The installations whose changes the push reports; nil stands for a change made
        /// without a device token.
        var makers: Set<String?>
    }

    private struct State {
        var pending: [String: Pending] = [:]
        var lastSent: [String: Date] = [:]
    }

    private let state = Mutex(State())
    /// `inbox.sync_push_interval`, in seconds.
    let interval: TimeInterval
    let send: Send
    let clock: @Sendable () -> Date
    /// Pushes sent at once.
    static let parallel = 16
    /// How often due pushes are looked for.
    let tick: Duration

    public init(interval: Duration, tick: Duration = .milliseconds(100), clock: @escaping @Sendable () -> Date = { Date() }, send: @escaping Send) {
        self.interval = interval.seconds
        self.tick = tick
        self.clock = clock
        self.send = send
    }

    /// A change to `userID`'s inbox, made by the installation `madeBy` (nil: no device token).
    public func changed(userID: String, madeBy: String?) {
        let now = clock()
        state.withLock { state in
            if var pending = state.pending[userID] {
                pending.makers.insert(madeBy)
                state.pending[userID] = pending
                return
            }
            let earliest = state.lastSent[userID].map { $0.addingTimeInterval(interval) } ?? now
            state.pending[userID] = Pending(due: max(now, earliest), makers: [madeBy])
        }
    }

    /// Takes the pushes due by `now`, and forgets when users were last sent one long ago.
    func takeDue(now: Date) -> [(userID: String, skipping: String?)] {
        state.withLock { state in
            let due = state.pending.filter { $0.value.due <= now }
            for (user, _) in due {
                state.pending[user] = nil
                state.lastSent[user] = now
            }
            state.lastSent = state.lastSent.filter { now.timeIntervalSince($0.value) < interval }
            return due.map { user, pending in
                let only = pending.makers.count == 1 ? pending.makers.first ?? nil : nil
                return (user, only)
            }
        }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let due = self.takeDue(now: self.clock())
                // A few at a time: each reads a count and its devices, then sends.
                for chunk in stride(from: 0, to: due.count, by: Self.parallel).map({ due[$0..<min($0 + Self.parallel, due.count)] }) {
                    await withTaskGroup(of: Void.self) { group in
                        for push in chunk { group.addTask { await self.send(push.userID, push.skipping) } }
                    }
                }
                try? await Task.sleep(for: self.tick)
            }
        }
    }
}
