import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// An erasure or a sign-out made through one Herald process ends the user's tokens on every
/// process on the database: at once on that one, within 5 s on the others (docs/security.md,
/// "User and device tokens"). Real binaries, on PostgreSQL when the test server runs (two
/// processes on one SQLite file otherwise).
@Suite(.cleansUp) struct TokenEndingTests {
    @Test(arguments: ["sign-out", "erasure"])
    func endedTokensAreRefusedByEveryProcess(_ how: String) async throws {
        let directory = try TestResources.temporaryDirectory("herald-token-ending")
        let database = PostgresTestDatabase.serverURL == nil ? "sqlite:tokens.sqlite" : try await PostgresTestDatabase.create()
        let admin = "hk_" + String(repeating: "e", count: 40)
        let environment = [
            "HERALD_BOOTSTRAP_ADMIN_KEY": admin, "HERALD_USER_TOKEN_SECRET": "token-ending-user-token-secret-0123456789", "HERALD_DATABASE": database,
        ]
        let first = try await RunningHerald(arguments: [], environment: environment, in: directory)
        defer { first.process.signal(SIGKILL) }
        let second = try await RunningHerald(arguments: [], environment: environment, in: directory)
        defer { second.process.signal(SIGKILL) }
        let minted = try await runCommand(Binaries.path("herald"), ["user-token", "--user", "lee"], environment: environment, in: directory)
        let token = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(minted.status == 0 && !token.isEmpty, "\(minted.stderr)")
        func history(on herald: RunningHerald) async throws -> Int {
            try await CardSyncTests.Client(base: herald.url, token: token).call(.GET, "/api/notifications/history").0
        }
        // Both processes have seen the token and remember that nothing ended it.
        #expect(try await history(on: first) == 200)
        #expect(try await history(on: second) == 200)

        let ended: Int
        switch how {
        case "sign-out": ended = try await CardSyncTests.Client(base: first.url, token: admin).call(.POST, "/api/users/lee/sign-out").0
        default: ended = try await CardSyncTests.Client(base: first.url, token: admin).call(.DELETE, "/api/users/lee").0
        }
        #expect(ended == 200)
        #expect(try await history(on: first) == 401, "the process that ended them refuses at once")
        let clock = ContinuousClock()
        let started = clock.now
        var refused = false
        while !refused, clock.now - started < .seconds(30) {
            refused = try await history(on: second) == 401
            if !refused { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(refused, "the other process still accepts the token")
        // 5 s of remembering, plus a loaded machine's slack.
        #expect(clock.now - started < .seconds(15), "took \(clock.now - started)")
    }
}
