import Foundation
import HeraldTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldStore

/// A store call always answers: PostgresNIO can leave a statement waiting forever when its
/// connection closes at the wrong moment, and a delivery worker stuck on one hung a graceful
/// shutdown past its deadline. These play that hang with an operation that never returns.
@Suite(.timeLimit(.minutes(1)), .cleansUp) struct SupervisedOperationTests {
    /// An await that ignores cancellation and never ends by itself, as PostgresNIO's lost query did.
    final class Hang: Sendable {
        private let waiting = Mutex<CheckedContinuation<Void, Never>?>(nil)
        func wait() async { await withCheckedContinuation { continuation in waiting.withLock { $0 = continuation } } }
        func release() { waiting.withLock { $0.take() }?.resume() }
    }

    struct StandIn: LentConnection {
        var isClosed: Bool { false }
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func anOperationWhoseConnectionClosesIsAnsweredConnectionLost() async throws {
        let configuration = try PostgresStore.configuration(url: try await PostgresTestDatabase.create())
        let connection = try await PostgresConnection.connect(
            configuration: .init(
                host: configuration.host ?? "127.0.0.1", port: configuration.port ?? 5432, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: .disable
            ),
            id: 1, logger: Logger(label: "test")
        )
        let hang = Hang()
        defer { hang.release() }
        let started = ContinuousClock.now
        let closer = Task {
            try await Task.sleep(for: .milliseconds(100))
            try await connection.close()
        }
        await #expect(throws: PostgresPool.ConnectionLost.self) {
            try await SupervisedOperation<Int>.run(acquireTimeout: .milliseconds(200), closeGrace: .milliseconds(100)) { acquired in
                try acquired(connection)
                await hang.wait()
                return 1
            }
        }
        try await closer.value
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func anOperationThatGetsNoConnectionInTimeIsAnsweredAndNeverRunsLate() async throws {
        let hang = Hang()
        let ranLate = Mutex(false)
        let operation = Task {
            try await SupervisedOperation<Int>.run(acquireTimeout: .milliseconds(100), closeGrace: .milliseconds(100)) { acquired in
                // Waits for a connection (ignoring cancellation, the worst case), then is lent one too late.
                await hang.wait()
                try acquired(StandIn())
                ranLate.withLock { $0 = true }
                return 1
            }
        }
        await #expect(throws: PostgresPool.AcquireTimeout.self) { try await operation.value }
        hang.release()
        try await Task.sleep(for: .milliseconds(200))
        #expect(!ranLate.withLock { $0 }, "the body never runs once its caller was answered")
    }

    @Test func theOperationsOwnAnswerComesThrough() async throws {
        struct Refused: Error {}
        let value = try await SupervisedOperation<Int>.run(acquireTimeout: .seconds(5), closeGrace: .milliseconds(100)) { _ in 42 }
        #expect(value == 42)
        await #expect(throws: Refused.self) {
            try await SupervisedOperation<Int>.run(acquireTimeout: .seconds(5), closeGrace: .milliseconds(100)) { _ in throw Refused() }
        }
    }

    @Test func cancellingTheCallerCancelsTheOperationAndAwaitsIt() async throws {
        let sawCancellation = Mutex(false)
        let caller = Task {
            try await SupervisedOperation<Int>.run(acquireTimeout: .seconds(5), closeGrace: .milliseconds(100)) { _ in
                do {
                    try await Task.sleep(for: .seconds(30))
                } catch {
                    sawCancellation.withLock { $0 = true }
                    throw error
                }
                return 1
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(sawCancellation.withLock { $0 })
    }
}
