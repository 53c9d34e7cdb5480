import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// Every storage engine the conformance suites run against. PostgreSQL runs when the test
/// server from `scripts/test` is up (HERALD_TEST_POSTGRES_URL); each test gets its own database.
enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case sqliteMemory
    case postgres

    static var allCases: [StoreKind] {
        [.sqlite, .sqliteMemory] + (PostgresTestDatabase.serverURL == nil ? [] : [.postgres])
    }

    var description: String { rawValue }

    func make() async throws -> any ServerStorage {
        let store: any ServerStorage
        switch self {
        case .sqlite:
            let directory = try TestResources.temporaryDirectory("herald-store")
            store = try SQLiteStore(path: directory.appendingPathComponent("test.sqlite").path)
        case .sqliteMemory:
            store = try SQLiteStore(path: ":memory:")
        case .postgres:
            store = try PostgresStore.patient(url: try await PostgresTestDatabase.create())
        }
        TestResources.register { await store.close() }
        try await store.migrate()
        return store
    }
}

extension PostgresStore {
    /// For conformance tests, which test what is stored, not how long a request may wait for a
    /// connection: on a machine starved by the whole suite, opening a pool's first connections
    /// (a backend forked per connection) has taken longer than the 2 s a request waits, and 15 s
    /// was too short once for 132 seen reports that all wait on one user's row (2026-11-27).
    static let patientAcquireTimeout = Duration.seconds(60)

    /// A store on `url` that waits ``patientAcquireTimeout`` for a connection.
    static func patient(url: String) throws -> PostgresStore {
        try PostgresStore(url: url, acquireTimeout: patientAcquireTimeout)
    }
}

/// Makes the PostgreSQL runs' absence visible: reported as skipped, with the reason, when the
/// machine has no PostgreSQL; a failure when it has one but the tests were started without the
/// server `scripts/test` starts.
@Suite(.cleansUp) struct PostgresAvailabilityTests {
    @Test(
        .enabled(
            if: PostgresTestDatabase.serverURL != nil || PostgresTestDatabase.binariesExist,
            "PostgreSQL runs of the conformance suites skipped: no PostgreSQL binaries on this machine (./scripts/test installs them)"
        ))
    func conformanceSuitesRunOnPostgres() {
        if let reason = PostgresTestDatabase.unavailableReason { Issue.record(Comment(rawValue: reason)) }
        #expect(StoreKind.allCases.contains(.postgres))
    }
}
