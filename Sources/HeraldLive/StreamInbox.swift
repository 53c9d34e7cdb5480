import Synchronization

/// What a live stream has to look at again: kinds of change, coalesced, so a burst of writes
/// costs one re-read and nothing queues behind a slow client.
final class StreamInbox: Sendable {
    enum Kind: Sendable, Hashable {
        case history, content, feed, inbox, heartbeat
    }

    private struct State {
        var pending: Set<Kind> = []
        var waiter: CheckedContinuation<Set<Kind>?, Never>?
        var closed = false
    }

    private let state = Mutex(State())

    func post(_ kind: Kind) {
        let waiter = state.withLock { state -> (CheckedContinuation<Set<Kind>?, Never>, Set<Kind>)? in
            guard !state.closed else { return nil }
            state.pending.insert(kind)
            guard let waiter = state.waiter else { return nil }
            state.waiter = nil
            defer { state.pending = [] }
            return (waiter, state.pending)
        }
        waiter.map { $0.0.resume(returning: $0.1) }
    }

    /// Ends the stream: the next (or current) ``next()`` returns nil.
    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<Set<Kind>?, Never>? in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Everything posted since the last call, waiting for at least one; nil once closed or
    /// when the task is cancelled.
    func next() async -> Set<Kind>? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Set<Kind>?, Never>) in
                let ready = state.withLock { state -> Set<Kind>?? in
                    if state.closed || Task.isCancelled { return .some(nil) }
                    if !state.pending.isEmpty {
                        defer { state.pending = [] }
                        return .some(state.pending)
                    }
                    state.waiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            close()
        }
    }
}
