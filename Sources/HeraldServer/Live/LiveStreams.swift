import Synchronization

/// The live streams open in this process, by user: what a committed change wakes.
final class LiveStreams: Sendable {
    struct Opened: Sendable {
        let id: Int
        let userID: String
        let inbox: StreamInbox
    }

    private struct State {
        var nextID = 0
        /// Oldest first.
        var byUser: [String: [(id: Int, inbox: StreamInbox)]] = [:]
    }

    private let state = Mutex(State())
    let maxPerUser: Int

    init(maxPerUser: Int) {
        self.maxPerUser = max(1, maxPerUser)
    }

    /// Registers a stream for `userID`; past ``maxPerUser`` the user's oldest is closed.
    func open(userID: String) -> Opened {
        let inbox = StreamInbox()
        let (id, evicted) = state.withLock { state -> (Int, [StreamInbox]) in
            defer { state.nextID += 1 }
            var streams = state.byUser[userID] ?? []
            streams.append((state.nextID, inbox))
            let excess = max(0, streams.count - maxPerUser)
            let evicted = streams.prefix(excess).map(\.inbox)
            streams.removeFirst(excess)
            state.byUser[userID] = streams
            return (state.nextID, evicted)
        }
        for old in evicted { old.close() }
        return Opened(id: id, userID: userID, inbox: inbox)
    }

    func close(_ stream: Opened) {
        state.withLock { state in
            guard var streams = state.byUser[stream.userID] else { return }
            streams.removeAll { $0.id == stream.id }
            state.byUser[stream.userID] = streams.isEmpty ? nil : streams
        }
        stream.inbox.close()
    }

    func post(_ kind: StreamInbox.Kind, users: [String]) {
        let inboxes = state.withLock { state in users.flatMap { state.byUser[$0]?.map(\.inbox) ?? [] } }
        for inbox in inboxes { inbox.post(kind) }
    }

    func postAll(_ kind: StreamInbox.Kind) {
        for inbox in state.withLock({ $0.byUser.values.flatMap { $0.map(\.inbox) } }) { inbox.post(kind) }
    }

    /// Ends every stream (a shutdown).
    func closeAll() {
        let inboxes = state.withLock { state in
            defer { state.byUser = [:] }
            return state.byUser.values.flatMap { $0.map(\.inbox) }
        }
        for inbox in inboxes { inbox.close() }
    }

    var count: Int { state.withLock { $0.byUser.values.reduce(0) { $0 + $1.count } } }
}
