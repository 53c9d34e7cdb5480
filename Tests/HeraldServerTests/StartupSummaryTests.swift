import HeraldTestSupport
import Testing

@testable import HeraldServer

/// The first line an operator reads: the database (never its password) and the sinks served.
@Suite(.cleansUp) struct StartupSummaryTests {
    @Test func itNamesTheDatabaseAndTheSinks() async throws {
        let herald = try await TestHerald.make()
        let summary = herald.server.startupSummary
        #expect(summary.contains("database sqlite:") && summary.contains("sinks history, feed, fcm"), "\(summary)")
    }

    @Test func aPostgreSQLPasswordIsNotShown() {
        let summary = HeraldServer.startupSummary(
            database: "postgres://herald:s3cret@db.example:5432/herald", sinks: ["history"], publicBaseURL: "https://app.example")
        #expect(summary.contains("postgres://db.example:5432/herald") && !summary.contains("s3cret") && !summary.contains("herald:"), "\(summary)")
    }
}
