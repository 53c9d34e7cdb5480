import Foundation
import HeraldTestSupport
import Testing

/// Every connection is a file: a soft limit on open files below `server.max_connections` (a
/// login shell's or a systemd service's 1 024) capped the server's connections silently.
@Suite(.cleansUp) struct OpenFileLimitTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-nofile")
    }

    /// `herald serve` started by a shell that set `limits` first.
    func start(_ limits: String, environment: [String: String] = [:]) async throws -> RunningHerald {
        let database = "sqlite:" + directory.appendingPathComponent("herald-\(UUID().uuidString).sqlite").path
        return try await RunningHerald(
            executable: "/bin/sh", arguments: ["-c", "ulimit \(limits) && exec \"$0\" serve --port 0 --database \"$1\"", Binaries.path("herald"), database],
            environment: environment, in: directory)
    }

    #if os(Linux)
        @Test func aSoftLimitBelowTheHardOneIsRaisedToIt() async throws {
            let herald = try await start("-S -n 300")
            let limits = try String(contentsOfFile: "/proc/\(herald.process.processIdentifier)/limits", encoding: .utf8)
            let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
            let values = line.split(separator: " ").compactMap { UInt64($0) }
            try #require(values.count == 2, "\(line)")
            #expect(values[0] == values[1], "soft limit raised to the hard one: \(line)")
            #expect(values[0] > 300)
            await herald.expectCleanStop()
        }
    #endif

    @Test func aHardLimitTooLowForMaxConnectionsIsNamedAtStart() async throws {
        let low = try await start("-n 300")
        await low.expectCleanStop()
        #expect(low.output.stderr.contains("server.max_connections is 4096, but this process may open only 300 files"), "\(low.output.stderr)")

        let fitting = try await start("-n 300", environment: ["HERALD_SERVER_MAX_CONNECTIONS": "40"])
        await fitting.expectCleanStop()
        #expect(!fitting.output.stderr.contains("max_connections"), "\(fitting.output.stderr)")
    }
}
