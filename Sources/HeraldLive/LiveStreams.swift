import Synchronization

/// The live streams open in this process, by user: what a committed change wakes.
package final class LiveStreams: Sendable {
    struct Opened: Sendable {
        let id: Int
        let userID: String
        let inbox: StreamInbox
    }

    private struct State {
        var nextID = 0
        var total = 0
        /// Oldest first.
        var byUser: [String: [(id: Int, inbox: StreamInbox)]] = [:]
    }

    private let state = Mutex(State())
    let maxPerUser: Int
    /// Streams open at once, all users together (`stream.max_total`): each holds a connection,
    /// and users are many, so without it streams could take every connection the server has.
    let maxTotal: Int

    package init(maxPerUser: Int, maxTotal: Int = .max) {
        self.maxPerUser = max(1, maxPerUser)
        self.maxTotal = max(1, maxTotal)
    }

    /// Registers a stream for `userID`; past ``maxPerUser`` the user's oldest is closed.
    /// - Returns: nil when ``maxTotal`` streams are open and the user has none to replace: a
    ///   full server turns a new stream away rather than closing someone else's.
    func open(userID: String) -> Opened? {
        let inbox = StreamInbox()
        let opened = state.withLock { state -> (Int, [StreamInbox])? in
            guard admits(userID, state) else { return nil }
            var streams = state.byUser[userID] ?? []
            defer { state.nextID += 1 }
            streams.append((state.nextID, inbox))
            let excess = max(0, streams.count - maxPerUser)
            let evicted = streams.prefix(excess).map(\.inbox)
            streams.removeFirst(excess)
            state.byUser[userID] = streams
            state.total += 1 - excess
            return (state.nextID, evicted)
        }
        guard let (id, evicted) = opened else { return nil }
        for old in evicted { old.close() }
        return Opened(id: id, userID: userID, inbox: inbox)
    }

    /// Whether ``open(userID:)`` would open a stream for `userID` now.
    func hasRoom(userID: String) -> Bool {
        state.withLock { admits(userID, $0) }
    }

    /// Room under ``maxTotal``, or a stream of the user's own to make way.
    private func admits(_ userID: String, _ state: State) -> Bool {
        state.total < maxTotal || (state.byUser[userID]?.count ?? 0) >= maxPerUser
    }

    func close(_ stream: Opened) {
        state.withLock { state in
            guard var streams = state.byUser[stream.userID] else { return }
            let before = streams.count
            streams.removeAll { $0.id == stream.id }
            state.total -= before - streams.count
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
    package func closeAll() {
        let inboxes = state.withLock { state in
            defer { (state.byUser, state.total) = ([:], 0) }
            return state.byUser.values.flatMap { $0.map(\.inbox) }
        }
        for inbox in inboxes { inbox.close() }
    }

    var count: Int { state.withLock { $0.total } }
}
