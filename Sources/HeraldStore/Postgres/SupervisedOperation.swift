import PostgresNIO
import Synchronization

/// One store operation on a pooled connection, watched so that its caller always gets an answer.
///
/// PostgresNIO can leave a query waiting forever when its connection closes at the wrong moment
/// (a statement sent just as the database went away): the caller, a delivery worker recording
/// outcomes say, then never returns and a graceful shutdown hangs. The operation runs in a task
/// of its own; its caller is answered by whichever comes first:
/// - the operation's own result or error;
/// - ``PostgresPool/AcquireTimeout`` when no connection was lent to it within `acquireTimeout`
///   (it is cancelled, and if it gets a connection later anyway it stops before using it);
/// - ``PostgresPool/ConnectionLost`` when its connection closed and the operation still had no answer
///   `closeGrace` later (it is cancelled and left to end whenever PostgresNIO lets it).
///
/// Cancelling the caller cancels the operation, and its answer is still awaited, so a
/// transaction's outcome is known whenever the connection can tell it.
final class SupervisedOperation<Result: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result, any Error>?
        var answered = false
        var connection: (any LentConnection)?
        var work: Task<Void, Never>?
        var watch: Task<Void, Never>?
    }

    private let state = Mutex(State())

    static func run(
        acquireTimeout: Duration, closeGrace: Duration,
        _ operation: @escaping @Sendable (_ acquired: @escaping @Sendable (any LentConnection) throws -> Void) async throws -> Result
    ) async throws -> Result {
        let supervised = SupervisedOperation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                supervised.state.withLock { $0.continuation = continuation }
                let work = Task {
                    do {
                        supervised.answer(.success(try await operation { connection in try supervised.acquired(connection) }))
                    } catch {
                        supervised.answer(.failure(error))
                    }
                }
                let watch = Task { await supervised.watch(acquireTimeout: acquireTimeout, closeGrace: closeGrace) }
                // Kept only until the answer: each task holds `supervised`, so a handle kept
                // after it would be a cycle, and every operation's state would stay in memory.
                supervised.state.withLock { state in
                    guard !state.answered else { return }
                    state.work = work
                    state.watch = watch
                }
                // The operation may have answered before the watch was stored, and the caller may
                // have been cancelled before the operation was.
                if supervised.state.withLock({ $0.answered }) { watch.cancel() }
                if Task.isCancelled { work.cancel() }
            }
        } onCancel: {
            supervised.state.withLock { $0.work }?.cancel()
        }
    }

    /// Called by the operation once it holds its connection; throws when its caller has
    /// already been answered (the acquire deadline passed), so nothing runs unobserved.
    private func acquired(_ connection: any LentConnection) throws {
        let late = state.withLock { state -> Bool in
            if state.answered { return true }
            state.connection = connection
            return false
        }
        if late { throw CancellationError() }
    }

    private func answer(_ result: Swift.Result<Result, any Error>) {
        let (continuation, watch) = state.withLock { state -> (CheckedContinuation<Result, any Error>?, Task<Void, Never>?) in
            guard !state.answered else { return (nil, nil) }
            state.answered = true
            defer {
                state.continuation = nil
                state.watch = nil
                state.work = nil
                state.connection = nil
            }
            return (state.continuation, state.watch)
        }
        watch?.cancel()
        continuation?.resume(with: result)
    }

    /// Gives up on the operation, answering its caller with `error`.
    private func abandon(with error: any Error) {
        let work = state.withLock { $0.answered ? nil : $0.work }
        answer(.failure(error))
        work?.cancel()
    }

    private func watch(acquireTimeout: Duration, closeGrace: Duration) async {
        do {
            try await Task.sleep(for: acquireTimeout)
            guard let connection = state.withLock({ $0.answered ? nil : $0.connection }) else {
                if !state.withLock({ $0.answered }) { abandon(with: PostgresPool.AcquireTimeout()) }
                return
            }
            // Statements are short; checking twice a second costs nothing and bounds the wait.
            while !connection.isClosed {
                try await Task.sleep(for: closeGrace)
            }
            try await Task.sleep(for: closeGrace)
            abandon(with: PostgresPool.ConnectionLost())
        } catch {
            // Cancelled: the operation answered.
        }
    }
}

/// What the supervision needs to know of a connection lent to an operation.
protocol LentConnection: Sendable {
    var isClosed: Bool { get }
}

extension PostgresConnection: LentConnection {}
