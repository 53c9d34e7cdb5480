import Foundation
import HTTPTypes
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Synchronization
import Testing

@testable import HeraldStore

/// A settings patch refused inside SQLite's group commit of app writes fails alone (its
/// savepoint is rolled back): thrown out of the batch, it would fail the batch, which then runs
/// again one write per transaction.
@Suite(.cleansUp) struct SettingsGroupCommitTests {
    @Test func aRefusedPatchDoesNotBreakUpItsBatch() async throws {
        let herald = try await TestHerald.make()
        let store = try #require(herald.server.store as? SQLiteStore)
        let statuses = Mutex<[Int: Int]>([:])
        try await herald.test { client in
            try await withHeldWriter(store.writer, requests: 32) { index in
                // One in the middle names a delivery mode that does not exist.
                let body = index == 15 ? js(["delivery": "fax"]) : js(["enabled": index % 2 == 0])
                let status = (try? await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "u\(index)"), json: body))?.status
                    .code
                statuses.withLock { $0[index] = status ?? 0 }
            }
        }
        let answered = statuses.withLock { $0 }
        #expect(answered[15] == 422)
        #expect((0..<32).allSatisfy { $0 == 15 || answered[$0] == 200 }, "\(answered)")
        #expect(store.appWrites.splitBatches == 0, "the refused patch's batch ran again one patch per transaction")
    }
}
