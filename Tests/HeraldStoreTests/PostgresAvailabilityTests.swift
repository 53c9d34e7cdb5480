import HeraldStore
import HeraldTestSupport
import Testing

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
