import Foundation
import HTTPTypes
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Synchronization
import Testing

@testable import HeraldStore

/// A refused settings patch is refused before its change joins SQLite's group commit of app
/// writes: refused inside, it would fail its batch, which then runs again one write per
/// transaction.
@Suite(.cleansUp) struct SettingsGroupCommitTests {
    @Test func aRefusedPatchDoesNotBreakUpItsBatch() async throws {
        let herald = try await TestHerald.make()
        let store = try #require(herald.server.store as? SQLiteStore)
        let statuses = Mutex<[Int: Int]>([:])
        let commits = try await herald.test { client in
            try await commitsWithHeldWriter(store.writer, requests: 32) { index in
                // The last one names a delivery mode that does not exist.
                let body = index == 31 ? js(["delivery": "fax"]) : js(["enabled": index % 2 == 0])
                let status = (try? await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "u\(index)"), json: body))?.status
                    .code
                statuses.withLock { $0[index] = status ?? 0 }
            }
        }
        let answered = statuses.withLock { $0 }
        #expect(answered[31] == 422)
        #expect((0..<31).allSatisfy { answered[$0] == 200 }, "\(answered)")
        // The holder's, the first patch's, then the rest's together (31 more when the refused
        // patch broke the batch up).
        #expect(commits <= 4, "\(commits) commits for 32 patches")
    }
}
