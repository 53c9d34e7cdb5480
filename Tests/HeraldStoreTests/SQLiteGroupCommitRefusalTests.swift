import Foundation
import HeraldCore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldStore

/// On SQLite a write that throws inside a group commit fails its whole batch, which then runs
/// again one write per transaction. A request refused for its own input must not do that, or a
/// client sending refused requests would cost every other writer the group commit.
@Suite(.cleansUp) struct SQLiteGroupCommitRefusalTests {
    @Test func aSeenReportNamingAnUnknownCardFailsAloneInsideItsBatch() async throws {
        let directory = try TestResources.temporaryDirectory("herald-store")
        let store = try SQLiteStore(path: directory.appendingPathComponent("test.sqlite").path)
        TestResources.register { await store.close() }
        try await store.migrate()
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let cards = (0..<31).map { "card-\($0)" } + ["never"]
        _ = try await store.putCards(cards.dropLast().map { Card(id: $0, metadata: [:], postedAt: at, hot: 0.5) })
        let seen = Mutex<[String: Bool]>([:])
        let commits = try await commitsWithHeldWriter(store.writer, requests: cards.count) { index in
            let card = cards[index]
            let answered = (try? await store.markSeen(userID: "user-\(card)", [SeenReport(card: card, at: at)])) != nil
            seen.withLock { $0[card] = answered }
        }
        let answers = seen.withLock { $0 }
        #expect(answers["never"] == false, "the unknown card was refused")
        #expect(cards.dropLast().allSatisfy { answers[$0] == true }, "every known card was seen")
        // The holder's, the first report's, then the rest's together. Refused by a throw, the
        // last batch ran again as 31 transactions.
        #expect(commits <= 4, "\(commits) commits for \(cards.count) reports")
    }
}
