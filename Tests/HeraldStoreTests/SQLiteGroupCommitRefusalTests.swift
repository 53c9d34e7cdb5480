import Foundation
import HeraldCards
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
        let store = try SQLiteStore(path: directory.appendingPathComponent("test.sqlite").path, modules: [.cards])
        let cardStore = try CardStores.on(store)
        TestResources.register { await store.close() }
        try await store.migrate()
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        // The unknown card in the middle, so it shares a batch even when some reports are late.
        let known = (0..<31).map { "card-\($0)" }
        let cards = known[..<15] + ["never"] + known[15...]
        _ = try await cardStore.putCards(known.map { Card(id: $0, metadata: [:], postedAt: at, hot: 0.5) })
        let seen = Mutex<[String: Bool]>([:])
        try await withHeldWriter(store.writer, requests: cards.count) { index in
            let card = cards[cards.startIndex + index]
            let answered = (try? await cardStore.markSeen(userID: "user-\(card)", [SeenReport(card: card, at: at)])) != nil
            seen.withLock { $0[card] = answered }
        }
        let answers = seen.withLock { $0 }
        #expect(answers["never"] == false, "the unknown card was refused")
        #expect(known.allSatisfy { answers[$0] == true }, "every known card was seen")
        #expect(store.appWrites.splitBatches == 0, "the refused report's batch ran again one report per transaction")
    }
}
