import Foundation
import HeraldCore
import Logging
import NIOCore
import NIOPosix
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
        /// Why, when the check was turned away for good (``PostgresPool/refusalReason(_:)``).
        /// Nil while unreachable means no reason is known yet: nothing answered in time, or the
        /// failure named none (PostgresNIO's tripped circuit breaker, a connection that broke).
        /// On a loaded machine that is more likely slowness, or a refusal whose answer came
        /// late, than an outage; a refused connection or login names itself.
        var unreachableReason: String?
        var probe: Task<Void, Never>?
        var checking = false
        var closed = false
    }

    /// Which database the pool is for, as its log lines say.
    enum Role: Sendable {
        /// `database`: an outage fails requests.
        case primary
        /// `database_read_url`: an outage sends its reads to the primary.
        case readReplica

        var name: String { self == .primary ? "the database" : "the read replica" }
        /// What requests get while it is unreachable.
        var outage: String { self == .primary ? "answering 503 until it is back" : "history pages are read on the primary until it is back" }
        var outageLevel: Logger.Level { self == .primary ? .error : .warning }
    }

    let role: Role
    let configuration: PostgresClient.Configuration
    /// The same settings for one connection of its own (nil: no login check).
    let direct: PostgresConnection.Configuration?
    let logger: Logger
    let acquireTimeout: Duration
    let probeInterval: Duration
    /// How long an operation whose connection closed may still take to fail by itself.
    let closeGrace: Duration
    private let state: Mutex<State>

    init(
        configuration: PostgresClient.Configuration, logger: Logger, acquireTimeout: Duration = PostgresStore.defaultAcquireTimeout,
        probeInterval: Duration = .milliseconds(200),
        closeGrace: Duration = .milliseconds(500), direct: PostgresConnection.Configuration? = nil, role: Role = .primary
    ) {
        self.role = role
        self.configuration = configuration
        self.direct = direct
        self.logger = logger
        self.acquireTimeout = acquireTimeout
        self.probeInterval = probeInterval
        self.closeGrace = closeGrace
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        // The pool works only while `run()` does; it ends when the store is closed.
        state = Mutex(State(client: client, runner: Task { await client.run() }))
    }

    var isReachable: Bool { state.withLock { $0.unreachableSince == nil } }

    /// Whether the database is marked unreachable with no reason named yet (no connection came
    /// in time, or the failure said nothing): at startup, on a loaded machine, more likely slow
    /// than down (see ``PostgresStore/migrate()``).
    var isUnreachableForSlowness: Bool { state.withLock { $0.unreachableSince != nil && $0.unreachableReason == nil } }

    /// Why the database is marked unreachable, when the check was turned away for good rather
    /// than left without an answer: for start-up's error message.
    var unreachableReason: String? { state.withLock { $0.unreachableSince == nil ? nil : $0.unreachableReason } }

    /// The pool requests go to now; a fresh one after an outage.
    var client: PostgresClient { state.withLock { $0.client } }

    /// The error for an operation that got no connection within `acquireTimeout` while the
    /// database was not known to be unreachable: busy (or slow to connect), not down. One value,
    /// so a caller that waits out a busy pool (``PostgresStore/migrate()``) compares the error,
    /// not its wording.
    static let busy = HeraldError(.unavailable, code: "storage_unavailable", "no database connection could be had in time; retry shortly")

    /// The error for an operation whose connection closed because a fresh pool replaced its
    /// own after an outage: the database is back, the operation may be tried again.
    static let replaced = HeraldError(.unavailable, code: "storage_unavailable", "the database connection was replaced after an outage; retry shortly")

    /// Runs `operation` on the current pool, within the rules above. The operation calls
    /// `acquired` with its connection as soon as it holds one (see ``SupervisedOperation``).
    func run<Result: Sendable>(
        _ operation: @escaping @Sendable (PostgresClient, _ acquired: @escaping @Sendable (any LentConnection) throws -> Void) async throws -> Result
    ) async throws -> Result {
        let client = try state.withLock { state -> PostgresClient in
            if state.closed { throw HeraldError(.unavailable, code: "storage_unavailable", "storage is closed") }
            if let since = state.unreachableSince {
                throw HeraldError(.unavailable, code: "storage_unavailable", "the database has been unreachable since \(Timestamp.format(since))")
            }
            return state.client
        }
        do {
            return try await SupervisedOperation.run(acquireTimeout: acquireTimeout, closeGrace: closeGrace) { acquired in
                try await operation(client, acquired)
            }
        } catch is AcquireTimeout {
            checkReachability(of: client)
            throw Self.busy
        } catch {
            guard Self.isConnectionFailure(error) else { throw error }
            // A pool replaced meanwhile closes its connections under whatever still ran on it
            // (a request that waited through the outage): that says nothing of the database.
            guard markUnreachable(because: error, using: client) else { throw Self.replaced }
            throw HeraldError(.unavailable, code: "storage_unavailable", "the database is unreachable; retry shortly")
        }
    }

    /// Runs `body` on one pooled connection.
    func withConnection<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
        try await run { client, acquired in
            try await client.withConnection { connection in
                try acquired(connection)
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
        // An operation PostgresNIO never answered (see SupervisedOperation) may keep its lease,
        // and with it the pool, forever: closing waits a while, not for ever.
        let closed = await Self.waitAtMost(.seconds(5), for: runner)
        if !closed { logger.warning("the pool of \(role.name) did not close within 5 s; leaving it") }
        await probe?.value
    }

    /// Waits for `task` to end, or `timeout`, whichever comes first; true when the task ended.
    static func waitAtMost(_ timeout: Duration, for task: Task<Void, Never>) async -> Bool {
        let answered = Mutex(false)
        return await withCheckedContinuation { continuation in
            let resume = { @Sendable (ended: Bool) in
                if answered.withLock({ done in
                    defer { done = true }
                    return !done
                }) {
                    continuation.resume(returning: ended)
                }
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                resume(false)
            }
            Task {
                await task.value
                timer.cancel()
                resume(true)
            }
        }
    }

    struct AcquireTimeout: Error {}

    /// The connection closed under an operation that never answered.
    struct ConnectionLost: Error, CustomStringConvertible {
        var description: String { "the database connection closed while a statement was in flight" }
    }

    /// Errors that mean "no database here now", as opposed to a statement's own failure.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        // The pool's own errors (its circuit breaker, a closed pool) are not public types.
        if String(reflecting: type(of: error)).contains("ConnectionPoolError") { return true }
        if error is ConnectionLost { return true }
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

    /// What a statement's failure says of the database now, when it says "not now": the
    /// transaction lost a race (class 40: a deadlock, a serialization failure), waited too long
    /// (55P03, 57014: `lock_timeout`, `statement_timeout`) or the server ran short (class 53: disk,
    /// memory, connections; class 58: I/O). Retrying later may succeed, so these are 503s, as
    /// SQLite's `SQLITE_BUSY` is; any other state is the statement's own fault.
    enum TransientFailure {
        case busy(String)
        case exhausted(String)
    }

    static func transientFailure(_ error: any Error) -> TransientFailure? {
        guard let state = sqlState(error) else { return nil }
        if state.hasPrefix("40") || state == "55P03" || state == "57014" { return .busy(state) }
        if state.hasPrefix("53") || state.hasPrefix("58") { return .exhausted(state) }
        return nil
    }

    /// Whether PostgreSQL rolled the transaction back to break a deadlock or a serialization
    /// conflict, so that running it again may succeed.
    static func isConflict(_ error: any Error) -> Bool {
        sqlState(error).map { ["40P01", "40001"].contains($0) } ?? false
    }

    /// The SQLSTATE the server answered, when `error` is a server's answer.
    static func sqlState(_ error: any Error) -> String? {
        if let error = error as? PostgresTransactionError {
            return [error.closureError, error.beginError, error.commitError].compactMap { $0 }.lazy.compactMap(sqlState).first
        }
        return (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// Tells a busy pool from an unreachable database: a fresh connection either comes at once
    /// (then only this pool is busy) or not (then the database is marked unreachable).
    private func checkReachability(of client: PostgresClient) {
        let start = state.withLock { state -> Bool in
            // A pool replaced meanwhile: the fresh one's database answered the probe.
            guard !state.closed, !state.checking, state.unreachableSince == nil, state.client === client else { return false }
            state.checking = true
            return true
        }
        guard start else { return }
        Task {
            // PostgresNIO's pool keeps a request waiting while its connections are refused, so
            // without the refusal a closed port would look like a slow server.
            var failure = await self.refusesConnections(within: self.acquireTimeout)
            if failure == nil {
                switch await self.connectsFresh() {
                case .success(let (_, runner)):
                    // Only the answer was wanted: the check's pool closes with its connection.
                    runner.cancel()
                    await runner.value
                case .failure(let error):
                    // One that names no reason (PostgresNIO's circuit breaker, tripped by refused
                    // logins) marks the database slow, and `nameRefusalWhileSlow` asks why.
                    failure = error
                }
            }
            self.state.withLock { $0.checking = false }
            if let failure { self.markUnreachable(because: failure) }
        }
    }

    /// A fresh pool that has connected once, with its runner, or why none did: its connection's
    /// error, or ``AcquireTimeout`` when nothing answered in time.
    private func connectsFresh() async -> Result<(PostgresClient, Task<Void, Never>), any Error> {
        let candidate = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let runner = Task { await candidate.run() }
        do {
            try await SupervisedOperation.run(acquireTimeout: acquireTimeout, closeGrace: closeGrace) { acquired in
                try await candidate.withConnection { connection in
                    try acquired(connection)
                    _ = try await connection.query("SELECT 1", logger: self.logger).collect()
                }
            }
            return .success((candidate, runner))
        } catch {
            runner.cancel()
            await runner.value
            return .failure(error)
        }
    }

    /// Why the database refuses this process, if it does: its address refuses a TCP connection,
    /// or the server refuses the login (an answer awaited for `patience`).
    private func refusesConnections(within patience: Duration) async -> (any Error)? {
        if let refused = await refusal() { return refused }
        return await loginRefusal(within: patience)
    }

    /// Why the database's address refuses a TCP connection, if it does: nothing listening
    /// there is an outage, where a handshake that does not finish in time may be a loaded
    /// machine. Nil when a connection opens or does not within `acquireTimeout`, and for a Unix
    /// socket.
    private func refusal() async -> (any Error)? {
        guard let host = configuration.host, let port = configuration.port else { return nil }
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(TimeAmount(acquireTimeout))
                .connect(host: host, port: port).get()
            try? await channel.close()
            return nil
        } catch ChannelError.connectTimeout {
            return nil
        } catch {
            return error
        }
    }

    /// What the server answers a connection of its own when it refuses the login: a database
    /// that does not exist, a role or password it does not take, no TLS where it is required.
    /// PostgresNIO's pool logs that answer and keeps the request waiting, so without this a
    /// mistyped database name looked like a slow server: `herald serve` waited out its start-up
    /// patience and then said only that the database was unreachable. Nil when the login
    /// succeeds, fails for a passing reason (``isLoginRefusal(_:)``), or no answer comes in
    /// `patience`.
    private func loginRefusal(within patience: Duration) async -> (any Error)? {
        guard var direct else { return nil }
        direct.options.connectTimeout = TimeAmount(patience)
        // The connect timeout covers the TCP connect alone; a server that takes the connection
        // and never answers the login must not hold up the check, which waits no longer than
        // `patience`. A connection that comes after that is closed.
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let answer = loop.makePromise(of: (any Error)?.self)
        let answered = NIOLoopBoundBox.makeBoxSendingValue(false, eventLoop: loop)
        let finish: @Sendable ((any Error)?) -> Void = { refusal in
            guard !answered.value else { return }
            answered.value = true
            answer.succeed(refusal)
        }
        let timer = loop.scheduleTask(in: TimeAmount(patience)) { finish(nil) }
        PostgresConnection.connect(on: loop, configuration: direct, id: 0, logger: logger).hop(to: loop).whenComplete { result in
            timer.cancel()
            switch result {
            case .success(let connection):
                finish(nil)
                let _: EventLoopFuture<Void> = connection.close()
            case .failure(let error):
                finish(Self.isLoginRefusal(error) ? error : nil)
            }
        }
        return (try? await answer.futureResult.get()) ?? nil
    }

    /// Why the database turned the check away, in words for the operator: the server's own, or
    /// what the address did. Nil when nothing answered in time.
    static func refusalReason(_ error: any Error) -> String? {
        if let error = error as? PSQLError {
            if error.code == .sslUnsupported { return "the server does not offer TLS, which sslmode=require asks for" }
            return error.serverInfo?[.message].map { "the server refused the connection: \($0)" }
        }
        if let error = error as? NIOConnectionError {
            if let lookup = error.dnsAError ?? error.dnsAAAAError { return "the host name \(error.host) does not resolve (\(lookup))" }
            if let first = error.connectionErrors.first {
                let why = (first.error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(first.error)"
                return "nothing accepts connections at \(error.host):\(error.port) (\(why))"
            }
        }
        return nil
    }

    /// Whether the server refused a login for good: an unknown or unauthenticated role (class
    /// 28), a database that does not exist (3D000) or may not be connected to (42501), no TLS
    /// where `sslmode=require` asks for it. Not a server starting up or shutting down (57P03,
    /// 57P01) or out of connection slots (53300), which start-up waits out.
    static func isLoginRefusal(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        if error.code == .sslUnsupported { return true }
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("28") || state == "3D000" || state == "42501"
    }

    /// Marks the database unreachable and starts the probe, unless `client` (the pool an
    /// operation failed on) has been replaced since: false then.
    @discardableResult
    private func markUnreachable(because error: any Error, using client: PostgresClient? = nil) -> Bool {
        let (current, startProbe) = state.withLock { state -> (Bool, Bool) in
            if let client, state.client !== client { return (false, false) }
            guard !state.closed, state.unreachableSince == nil else { return (true, false) }
            state.unreachableSince = Date()
            state.unreachableReason = Self.refusalReason(error)
            return (true, true)
        }
        guard startProbe else { return current }
        logger.log(level: role.outageLevel, "\(role.name) is unreachable; \(role.outage): \(PostgresStore.describe(error))")
        let probe = Task { await self.probeUntilReachable() }
        state.withLock { $0.probe = probe }
        if isUnreachableForSlowness { Task { await self.nameRefusalWhileSlow() } }
        return true
    }

    /// Tries a fresh pool (whose first connection is attempted at once, with none of the old
    /// pool's back-off) every `probeInterval` until one connects, then swaps it in.
    private func probeUntilReachable() async {
        while !Task.isCancelled {
            if case .success(let (fresh, runner)) = await connectsFresh() {
                replacePool(with: fresh, runner: runner)
                return
            }
            try? await Task.sleep(for: probeInterval)
        }
    }

    /// While the database is marked unreachable with no reason known (the first check's login
    /// got no answer in time on a loaded machine, or the failure named none), asks again why, so a refused login is named once
    /// the server answers it rather than waited on as slowness until start-up gives up. The
    /// database is marked already, so this check waits longer than a request would (a full test
    /// suite on two cores has kept a refused login's answer past 2 s, round after round, until
    /// start-up's patience ran out); it runs beside the probe, which it never holds up, and
    /// closing the pool does not wait for it.
    private func nameRefusalWhileSlow() async {
        while isUnreachableForSlowness, !state.withLock({ $0.closed }) {
            if let refusal = await refusesConnections(within: acquireTimeout * 5) {
                let named = state.withLock { state in
                    guard state.unreachableSince != nil, state.unreachableReason == nil else { return false }
                    state.unreachableReason = Self.refusalReason(refusal) ?? PostgresStore.describe(refusal)
                    return true
                }
                if named { logger.log(level: role.outageLevel, "\(role.name) refuses connections: \(PostgresStore.describe(refusal))") }
                return
            }
            try? await Task.sleep(for: probeInterval)
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
        logger.notice("\(role.name) is reachable again")
    }
}
