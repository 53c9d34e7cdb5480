import Testing

@testable import HeraldServer

/// What `herald serve` says at start when its open-file limit cannot hold its connections.
@Suite struct OpenFileLimitWarningTests {
    @Test func aLimitBelowTheConnectionsAndTheReserveIsNamed() throws {
        let warning = try #require(OpenFileLimit.warning(limit: 1_024, maxConnections: 4_096))
        #expect(warning.contains("server.max_connections is 4096"))
        #expect(warning.contains("only 1024 files"))
        #expect(warning.contains("past about \(1_024 - OpenFileLimit.reserve) connections"))
        #expect(warning.contains("LimitNOFILE"))
        #expect(OpenFileLimit.warning(limit: 100, maxConnections: 4_096)?.contains("past about 0 connections") == true)
    }

    @Test func aLimitThatHoldsThemIsQuiet() {
        #expect(OpenFileLimit.warning(limit: 1_048_576, maxConnections: 4_096) == nil)
        #expect(OpenFileLimit.warning(limit: UInt64(4_096 + OpenFileLimit.reserve), maxConnections: 4_096) == nil)
        #expect(OpenFileLimit.warning(limit: UInt64(4_095 + OpenFileLimit.reserve), maxConnections: 4_096) != nil)
    }
}
