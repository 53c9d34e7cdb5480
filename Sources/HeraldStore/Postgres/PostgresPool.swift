import Foundation
import HeraldCore
import Logging
import PostgresNIO
import Synchronization

/// PostgresNIO's pool, kept answerable while the database comes and goes.
///
/// The pool alone makes a request wait for a connection while the database is away, and after
/// repeated failures backs off for seconds before trying again: requests hung during an outage
/// and for a while after it. Here:
/// - a request whose connection fails marks the database unreachable; one that cannot get a
///   connection within `acquireTimeout` starts a direct check (a busy pool is not an outage);
///   either is answered 503 (`storage_unavailable`) with Retry-After;
/// - while unreachable, requests fail at once, and a probe opens a connection of its own every
///   `probeInterval`;
/// - when the probe connects, a fresh pool replaces the backed-off one, so work resumes within
///   a probe interval of the database's return.
final class PostgresPool: Sendable {
    private struct State {
        var client: PostgresClient
        var runner: Task<Void, Never>
        var unreachableSince: Date?
        var probe: Task<Void, Never>?
        var checking = false
        var closed = false
    }

    let configuration: PostgresClient.Configuration
    let logger: Logger
    let acquireTimeout: Duration
    let probeInterval: Duration
    private let state: Mutex<State>

    init(configuration: PostgresClient.Configuration, logger: Logger, acquireTimeout: Duration = .seconds(2), probeInterval: Duration = .milliseconds(200)) {
        self.configuration = configuration
        self.logger = logger
        self.acquireTimeout = acquireTimeout
        self.probeInterval = probeInterval
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        // The pool works only while `run()` does; it ends when the store is closed.
        state = Mutex(State(client: client, runner: Task { await client.run() }))
    }

    var isReachable: Bool { state.withLock { $0.unreachableSince == nil } }

    /// Runs `operation` on the current pool, within the rules above.
    func run<Result: Sendable>(_ operation: @escaping @Sendable (PostgresClient, _ acquired: @escaping @Sendable () -> Void) async throws -> Result) async throws -> Result {
        let client = try state.withLock { state -> PostgresClient in
            if state.closed { throw HeraldError(.unavailable, code: "storage_unavailable", "storage is closed") }
            if let since = state.unreachableSince {
                throw HeraldError(.unavailable, code: "storage_unavailable", "the database has been unreachable since \(Timestamp.format(since))")
            }
            return state.client
        }
        let acquired = Flag()
        do {
            return try await Self.withDeadline(acquireTimeout, acquired: acquired) {
                try await operation(client, { acquired.set() })
            }
        } catch is AcquireTimeout {
            checkReachability()
            throw HeraldError(.unavailable, code: "storage_unavailable", "no database connection could be had in time; retry shortly")
        } catch {
            guard Self.isConnectionFailure(error) else { throw error }
            markUnreachable(because: error)
            throw HeraldError(.unavailable, code: "storage_unavailable", "the database is unreachable; retry shortly")
        }
    }

    /// Runs `body` on one pooled connection.
    func withConnection<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
        try await run { client, acquired in
            try await client.withConnection { connection in
                acquired()
                return try await body(connection)
            }
        }
    }

    /// Closes the pool and stops probing; the store is not used afterwards.
    func close() async {
        let (runner, probe) = state.withLock { state -> (Task<Void, Never>, Task<Void, Never>?) in
            state.closed = true
            return (state.runner, state.probe)
        }
        probe?.cancel()
        runner.cancel()
        await runner.value
        await probe?.value
    }

    struct AcquireTimeout: Error {}

    /// Set once an operation holds a connection: from then on the deadline no longer applies.
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    /// Errors that mean "no database here now", as opposed to a statement's own failure.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        // The pool's own errors (its circuit breaker, a closed pool) are not public types.
        if String(reflecting: type(of: error)).contains("ConnectionPoolError") { return true }
        if let error = error as? PostgresTransactionError {
            return [error.closureError, error.beginError, error.commitError, error.rollbackError].compactMap { $0 }.contains(where: isConnectionFailure)
        }
        guard let error = error as? PSQLError else { return false }
        if let state = error.serverInfo?[.sqlState] {
            // 08: connection exception; 57P01-57P03: the server is shutting down or starting.
            return state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state)
        }
        switch error.code {
        case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection, .poolClosed: return true
        default: return false
        }
    }

    /// Tells a busy pool from an unreachable database: a fresh connection either comes at once
    /// (then only this pool is busy) or not (then the database is marked unreachable).
    private func checkReachability() {
        let start = state.withLock { state -> Bool in
            guard !state.closed, !state.checking, state.unreachableSince == nil else { return false }
            state.checking = true
            return true
        }
        guard start else { return }
        Task {
            let reachable = await self.connectsFresh() != nil
            self.state.withLock { $0.checking = false }
            if !reachable { self.markUnreachable(because: AcquireTimeout()) }
        }
    }

    /// A fresh pool that has connected once, with its runner, or nil when none connects in time.
    private func connectsFresh() async -> (PostgresClient, Task<Void, Never>)? {
        let candidate = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let runner = Task { await candidate.run() }
        let acquired = Flag()
        do {
            try await Self.withDeadline(acquireTimeout, acquired: acquired) {
                try await candidate.withConnection { connection in
                    acquired.set()
                    _ = try await connection.query("SELECT 1", logger: self.logger).collect()
                }
            }
            return (candidate, runner)
        } catch {
            runner.cancel()
            await runner.value
            return nil
        }
    }

    private func markUnreachable(because error: any Error) {
        let startProbe = state.withLock { state -> Bool in
            guard !state.closed, state.unreachableSince == nil else { return false }
            state.unreachableSince = Date()
            return true
        }
        guard startProbe else { return }
        logger.error("the database is unreachable; answering 503 until it is back: \(String(describing: error))")
        let probe = Task { await self.probeUntilReachable() }
        state.withLock { $0.probe = probe }
    }

    /// Tries a fresh pool (whose first connection is attempted at once, with none of the old
    /// pool's back-off) every `probeInterval` until one connects, then swaps it in.
    private func probeUntilReachable() async {
        while !Task.isCancelled {
            if let (fresh, runner) = await connectsFresh() {
                replacePool(with: fresh, runner: runner)
                return
            }
            try? await Task.sleep(for: probeInterval)
        }
    }

    /// Runs `operation`, throwing ``AcquireTimeout`` when it has not set `acquired` within `timeout`.
    static func withDeadline<Result: Sendable>(
        _ timeout: Duration, acquired: Flag, _ operation: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: timeout)
                if acquired.isSet { return nil }
                throw AcquireTimeout()
            }
            while let next = try await group.next() {
                if let result = next {
                    group.cancelAll()
                    return result
                }
            }
            throw CancellationError()
        }
    }

    private func replacePool(with fresh: PostgresClient, runner: Task<Void, Never>) {
        let old = state.withLock { state -> Task<Void, Never>? in
            guard !state.closed else { return runner }
            let old = state.runner
            state.client = fresh
            state.runner = runner
            state.unreachableSince = nil
            state.probe = nil
            return old
        }
        old?.cancel()
        logger.notice("the database is reachable again")
    }
}
