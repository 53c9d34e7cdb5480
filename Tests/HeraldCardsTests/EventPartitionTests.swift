import Foundation
import HeraldCards
import HeraldCore
import HeraldStore
import HeraldTestSupport
import PostgresNIO
import Synchronization
import Testing

/// PostgreSQL's engagement events partitioned by the month they were received
/// (docs/durability.md, "Month partitions on PostgreSQL"): an event id stays unique per user
/// across months, even from two processes at once; retention drops whole months; an existing
/// table is converted while events are stored.
@Suite(.cleansUp) struct EventPartitionTests {
    static let events = MonthPartitionedTable.events

    static func date(_ year: Int, _ month: Int, _ day: Int = 1, _ seconds: TimeInterval = 0) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        return (calendar.date(from: DateComponents(year: year, month: month, day: day)) ?? Date()).addingTimeInterval(seconds)
    }

    static func event(_ user: String, _ id: String, at: Date) -> EngagementEvent {
        EngagementEvent(eventID: id, userID: user, type: "track", name: "opened", at: at)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func anEventIdIsUniquePerUserAcrossMonths() async throws {
        let url = try await PostgresTestDatabase.create()
        let store = try await Self.store(url)
        try await store.migrate()
        #expect(try await store.partitionNames(of: .events).contains(Self.events.defaultPartition))
        _ = try await store.createPartitions(of: .events, from: Self.date(2025, 1), through: Self.date(2025, 2))
        let cards = PostgresCardStore(store: store)
        let endOfJanuary = Self.date(2025, 2, 1, -1)
        #expect(try await cards.storeEvents([Self.event("ada", "e1", at: endOfJanuary)], at: endOfJanuary).count == 1)
        // Resent a second later, in February's partition: a duplicate still.
        let february = Self.date(2025, 2, 1)
        #expect(
            try await cards.storeEvents([Self.event("ada", "e1", at: endOfJanuary), Self.event("ada", "e2", at: february)], at: february).map(\.eventID) == [
                "e2"
            ])
        // Twice in one batch, and another user's e1.
        #expect(
            try await cards.storeEvents(
                [Self.event("ada", "e3", at: february), Self.event("ada", "e3", at: february), Self.event("bob", "e1", at: february)], at: february
            ).count == 2)
        #expect(try await store.rowsByPartition(of: .events) == ["events_y2025m01": 1, "events_y2025m02": 3])

        // Two processes store the same events at once, one on each side of the month's start:
        // each event is stored once.
        let other = try await Self.store(url)
        let otherCards = PostgresCardStore(store: other)
        let users = (0..<40).map { "user-\($0)" }
        async let first = Self.storeOneByOne(users, cards, at: endOfJanuary)
        async let second = Self.storeOneByOne(users, otherCards, at: february)
        let stored = try await first + second
        #expect(stored == users.count, "each user's event stored by exactly one of the two")
        #expect(try await Self.count(store, "SELECT count(*) AS n FROM events WHERE event_id = 'both'") == users.count)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func retentionDropsWholeMonths() async throws {
        let store = try await Self.store(try await PostgresTestDatabase.create())
        try await store.migrate()
        _ = try await store.createPartitions(of: .events, from: Self.date(2025, 1), through: Self.date(2025, 3))
        let cards = PostgresCardStore(store: store)
        for day in 1...5 { _ = try await cards.storeEvents([Self.event("ada", "jan-\(day)", at: Self.date(2025, 1, day))], at: Self.date(2025, 1, day)) }
        for day in 1...3 { _ = try await cards.storeEvents([Self.event("bob", "feb-\(day)", at: Self.date(2025, 2, day))], at: Self.date(2025, 2, day)) }
        _ = try await cards.storeEvents([Self.event("cy", "mar", at: Self.date(2025, 3, 9))], at: Self.date(2025, 3, 9))
        _ = try await cards.storeEvents([Self.event("cy", "old", at: Self.date(2020, 1, 9))], at: Self.date(2020, 1, 9))
        _ = try await cards.storeEvents([Self.event("cy", "now", at: Date())], at: Date())

        #expect(try await cards.purgeEvents(before: Self.date(2025, 3, 5), limit: 1000) == 5 + 3 + 1, "January and February dropped, the default's one deleted")
        let names = try await store.partitionNames(of: .events)
        #expect(!names.contains("events_y2025m01") && !names.contains("events_y2025m02") && names.contains("events_y2025m03"))
        #expect(try await Self.count(store, "SELECT count(*) AS n FROM events") == 2)
        #expect(try await cards.purgeEvents(before: Self.date(2025, 3, 5), limit: 1000) == 0)
    }

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "no PostgreSQL test server"))
    func existingEventsArePartitionedWhileEventsAreStored() async throws {
        let store = try await Self.store(try await PostgresTestDatabase.create())
        try await store.migrateAsBeforePartitions()
        let cards = PostgresCardStore(store: store)
        for day in stride(from: 80, through: 0, by: -4) {
            let at = Date().addingTimeInterval(-Double(day) * 86_400)
            #expect(try await cards.storeEvents([Self.event("ada", "old-\(day)", at: at)], at: at).count == 1)
        }
        try await store.migrate()
        #expect(try await store.partitionNames(of: .events).isEmpty, "events with rows are left unpartitioned by the migration")
        let before = try await Self.count(store, "SELECT count(*) AS n FROM events")

        let stop = Mutex(false)
        let writer = Task {
            var stored = 0
            while !stop.withLock({ $0 }) {
                stored += try await cards.storeEvents([Self.event("bob", UUID().uuidString, at: Date())], at: Date()).count
            }
            return stored
        }
        let steps = Mutex<[String]>([])
        try await store.partition(.events) { step in steps.withLock { $0.append(step) } }
        try await Task.sleep(for: .milliseconds(100))
        stop.withLock { $0 = true }
        let concurrent = try await writer.value
        #expect(steps.withLock { $0 }.contains { $0.hasPrefix("events is partitioned") }, "\(steps.withLock { $0 })")
        #expect(try await store.partitionNames(of: .events).contains(Self.events.legacyPartition))
        #expect(try await Self.count(store, "SELECT count(*) AS n FROM events") == before + concurrent, "none lost, none refused")
        #expect(try await cards.storeEvents([Self.event("ada", "old-40", at: Date())], at: Date()).isEmpty, "an event from before is still a duplicate")

        // The old table goes whole once all of its rows expire, and its sequence stays.
        let legacyUpper = try #require(
            try await store.withConnection { try await Self.events.partitions($0) }?.first { $0.name == Self.events.legacyPartition }?.upper)
        let removed = try await cards.purgeEvents(before: Date(timeIntervalSince1970: TimeInterval(legacyUpper)).addingTimeInterval(86_400), limit: 100_000)
        #expect(removed == before + concurrent)
        #expect(try await cards.storeEvents([Self.event("ada", "after", at: Date())], at: Date()).count == 1)
    }

    // MARK: Helpers

    static func store(_ url: String) async throws -> PostgresStore {
        let store = try PostgresStore(url: url, acquireTimeout: PostgresStore.patientAcquireTimeout)
        TestResources.register { await store.close() }
        return store
    }

    /// Each user's event `both`, one request at a time. - Returns: how many were stored.
    static func storeOneByOne(_ users: [String], _ cards: PostgresCardStore, at date: Date) async throws -> Int {
        var stored = 0
        for user in users { stored += try await cards.storeEvents([event(user, "both", at: date)], at: date).count }
        return stored
    }

    static func count(_ store: PostgresStore, _ sql: String) async throws -> Int {
        try await store.withConnection { session in Int(try await session.row(PostgresQuery(unsafeSQL: sql))?.integer("n") ?? -1) }
    }

}
