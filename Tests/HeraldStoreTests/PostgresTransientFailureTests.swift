import Foundation
import HeraldCore
import HeraldTestSupport
import PostgresNIO
import Synchronization
import Testing

@testable import HeraldStore

/// A PostgreSQL failure that means "not now" (a deadlock broken by the server, a serialization
/// failure, a lock or statement timeout, a server short of disk or connections) is answered
/// 503 with Retry-After, as SQLite's busy database is; a statement's own failure is not.
@Suite(.cleansUp) struct PostgresTransientFailureTests {
    struct Case: Sendable, CustomStringConvertible {
        var state: String
        var code: String?
        var description: String { state }
    }

    static let cases = [
        Case(state: "40P01", code: "storage_busy"), // deadlock_detected
        Case(state: "40001", code: "storage_busy"), // serialization_failure
        Case(state: "55P03", code: "storage_busy"), // lock_not_available
        Case(state: "57014", code: "storage_busy"), // query_canceled (statement_timeout)
        Case(state: "53100", code: "storage_unavailable"), // disk_full
        Case(state: "53300", code: "storage_unavailable"), // too_many_connections
        Case(state: "58030", code: "storage_unavailable"), // io_error
        Case(state: "23505", code: nil), // unique_violation: the statement's own
        Case(state: "22012", code: nil), // division_by_zero
    ]

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"), arguments: cases)
    func aFailureIsUnavailableOnlyWhenItMeansNotNow(_ given: Case) async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        do {
            try await store.transaction { session in
                try await session.execute(
                    "DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '\(unescaped: given.state)'; END $$")
            }
            Issue.record("the statement raised nothing")
        } catch {
            let answer = StorageFailure.unavailable(error)
            #expect(answer?.code == given.code, "\(String(reflecting: error))")
            if let answer {
                #expect(answer.kind == .unavailable)
                #expect(answer.message.contains(given.state), "the state is named for the operator: \(answer.message)")
            }
        }
    }

    /// A real deadlock, broken by the server: the store runs the transaction it rolled back again
    /// (at most three runs in all), so neither of the two fails. A deadlock in every run is the
    /// 503 above.
    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func aDeadlockBrokenByTheServerIsBusyAndRunAgain() async throws {
        let store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        TestResources.register { await store.close() }
        try await store.withConnection { session in
            try await session.execute("CREATE TABLE pair (id int PRIMARY KEY)")
            try await session.execute("INSERT INTO pair VALUES (1), (2)")
        }
        let (first, firstLocked) = AsyncStream.makeStream(of: Void.self)
        let (second, secondLocked) = AsyncStream.makeStream(of: Void.self)
        let runs = Runs()
        // Each locks one row, waits until the other has its own, then asks for the other's;
        // a second run of either goes straight through.
        let one = Task {
            try await store.transaction { session in
                let run = runs.next("one")
                try await session.execute("SELECT id FROM pair WHERE id = 1 FOR UPDATE")
                if run == 1 {
                    firstLocked.yield()
                    for await _ in second { break }
                }
                try await session.execute("SELECT id FROM pair WHERE id = 2 FOR UPDATE")
            }
        }
        let two = Task {
            try await store.transaction { session in
                if runs.next("two") == 1 { for await _ in first { break } }
                try await session.execute("SELECT id FROM pair WHERE id = 2 FOR UPDATE")
                secondLocked.yield()
                try await session.execute("SELECT id FROM pair WHERE id = 1 FOR UPDATE")
            }
        }
        try await one.value
        try await two.value
        #expect(runs.total == 3, "the server rolled one of the two back, and it ran again")
    }

    final class Runs: Sendable {
        private let counts = Mutex<[String: Int]>([:])
        func next(_ name: String) -> Int {
            counts.withLock {
                $0[name, default: 0] += 1
                return $0[name, default: 0]
            }
        }
        var total: Int { counts.withLock { $0.values.reduce(0, +) } }
    }
}
