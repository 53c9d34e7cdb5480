import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// A retry storm cannot starve first attempts: while new deliveries wait, retries take at most
/// half a claim, on every engine (docs/durability.md, "A provider that fails part of the time").
@Suite(.cleansUp) struct ClaimFairnessConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func accept(_ user: String, at date: Date, into store: some HeraldStorage) async throws {
        let n = HeraldNotification(id: ids.next(at: date), type: "comment", title: "T", body: "B", url: nil, timestamp: date, target: .users([user]))
        _ = try await store.accept(n, recipients: 1, deliveries: [PlannedDelivery(sink: "hook", userID: user, distribution: .alert)], idempotencySince: date)
    }

    @Test(arguments: StoreKind.allCases)
    func retriesTakeABoundedShareOfAClaim(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        // Ten deliveries fail once and are due again at t0 + 5 s: older than anything new.
        for n in 0..<10 { try await accept("r\(n)", at: t0, into: store) }
        let first = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        #expect(first.count == 10)
        try await store.record(
            first.map { DeliveryUpdate(id: $0.id, state: .pending, attempts: $0.attempt, lastError: "503", nextAttemptAt: t0.addingTimeInterval(5)) },
            at: t0)
        // Ten new notifications arrive at t0 + 10 s.
        for n in 0..<10 { try await accept("f\(n)", at: t0.addingTimeInterval(10), into: store) }
        let mixed = try await store.claimDue(now: t0.addingTimeInterval(20), limit: 10, lease: .seconds(30))
        let retries = mixed.filter { $0.attempt > 1 }.count
        #expect(mixed.count == 10)
        #expect(retries == 5 && mixed.count - retries == 5, "older retries took \(retries) of 10 while first attempts waited")
        // With no first attempts waiting, retries take the whole claim.
        let rest = try await store.claimDue(now: t0.addingTimeInterval(20), limit: 10, lease: .seconds(30))
        #expect(rest.count == 10 && rest.filter { $0.attempt > 1 }.count == 5, "the other five retries and the other five new ones")
        for n in 0..<6 { try await accept("g\(n)", at: t0.addingTimeInterval(30), into: store) }
        #expect(try await store.claimDue(now: t0.addingTimeInterval(31), limit: 4, lease: .seconds(30)).count == 4)
    }
}
