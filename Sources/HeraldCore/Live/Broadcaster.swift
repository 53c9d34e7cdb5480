import Synchronization

/// Hands each value to every listener registered at the time, in this process. Listeners are
/// called on the sender's task and must return quickly (yield to a stream, set a flag).
public final class Broadcaster<Value: Sendable>: Sendable {
    private struct State {
        var nextID = 0
        var listeners: [Int: @Sendable (Value) -> Void] = [:]
    }

    private let state = Mutex(State())

    /// A broadcaster with no listeners.
    public init() {}

    /// Calls every listener registered now with `value`, on this task.
    public func send(_ value: Value) {
        let listeners = state.withLock { Array($0.listeners.values) }
        for listener in listeners { listener(value) }
    }

    /// Calls `listener` with every value sent until the task is cancelled.
    public func listen(_ listener: @escaping @Sendable (Value) -> Void) async {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.listeners[state.nextID] = listener
            return state.nextID
        }
        defer { _ = state.withLock { $0.listeners.removeValue(forKey: id) } }
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
    }

    /// How many listeners are registered now (for tests that wait until one listens).
    public var listenerCount: Int { state.withLock { $0.listeners.count } }
}
