import Foundation
import HeraldCore
import HeraldInbox
import HeraldStore
import HeraldTestSupport
import Testing

/// The inbox's store on every engine (docs/inbox.md): states, marks, counts kept by the
/// writing transaction, filtered reads, snoozes, purges and erasure.
@Suite(.cleansUp) struct InboxStoreConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    /// One notification of `type` in each of `users`' history, written `at`.
    @discardableResult
    func send(_ store: any ServerStorage, type: String = "comment", to users: [String], at date: Date? = nil) async throws -> ObjectID {
        let at = date ?? t0
        let n = HeraldNotification(id: ids.next(at: at), type: type, title: "T", body: "B", url: nil, timestamp: at, target: .users(users))
        _ = try await store.accept(n, recipients: users.count, deliveries: [], idempotencySince: t0)
        try await store.appendHistory(users.map { (n.id, $0) }, at: at)
        return n.id
    }

    @Test(arguments: StoreKind.allCases)
    func marksMoveTheCountsAndAnswerThem(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        let comments = [try await send(store, to: ["a", "b"]), try await send(store, to: ["a"]), try await send(store, to: ["a"])]
        let like = try await send(store, type: "like", to: ["a"])
        #expect(
            try await inbox.counts(userID: "a")
                == InboxCounts(
                    total: .init(unseen: 4, unread: 4),
                    byType: ["comment": .init(unseen: 3, unread: 3), "like": .init(unseen: 1, unread: 1)]))

        var result = try await inbox.mark(userID: "a", .ids([comments[0], ids.next()]), .read, at: t0)
        #expect(result.changed == 1, "an id not in the history changes nothing")
        #expect(result.counts.total == .init(unseen: 3, unread: 3), "reading implies seeing")
        result = try await inbox.mark(userID: "a", .ids([comments[0]]), .read, at: t0)
        #expect(result.changed == 0, "marking twice is harmless")
        #expect(try await inbox.counts(userID: "b").total == .init(unseen: 1, unread: 1), "one user's marks leave others alone")

        result = try await inbox.mark(userID: "a", .ids([comments[1]]), .archived, at: t0)
        #expect(result.counts.total == .init(unseen: 2, unread: 2, archived: 1), "an archived item is neither unseen nor unread")
        result = try await inbox.mark(userID: "a", .ids([like]), .snooze(until: t0.addingTimeInterval(60)), at: t0)
        #expect(result.counts.total == .init(unseen: 1, unread: 1, archived: 1), "nor is a snoozed one")
        #expect(result.counts.byType["like"] == nil, "a type with nothing to count is left out")
        result = try await inbox.mark(userID: "a", .all(type: nil, before: nil), .seen, at: t0)
        #expect(result.changed == 3, "seen marks every item not seen yet, archived and snoozed ones too")
        #expect(result.counts.total == .init(unseen: 0, unread: 1, archived: 1))
        result = try await inbox.mark(userID: "a", .ids([comments[0]]), .unread, at: t0)
        #expect(result.counts.total == .init(unseen: 0, unread: 2, archived: 1), "unread again, still seen")
        result = try await inbox.mark(userID: "a", .ids([comments[1]]), .unarchived, at: t0)
        #expect(result.counts.total == .init(unseen: 0, unread: 3, archived: 0))
        #expect(try await InboxRecount.mismatches(in: store) == [])

        let page = try await store.history(userID: "a", limit: 10, before: nil)
        let states = page.items.map { ($0.read, $0.seen, $0.archived, $0.snoozedUntil) }
        #expect(states.map(\.0) == [false, false, false, false], "history lists every item, as before")
        #expect(states.map(\.1) == [true, true, true, true])
        #expect(states.map(\.3) == [t0.addingTimeInterval(60), nil, nil, nil])
    }

    @Test(arguments: StoreKind.allCases)
    func allNarrowsByTypeAndAge(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        try await send(store, to: ["a"], at: t0)
        try await send(store, type: "like", to: ["a"], at: t0)
        try await send(store, to: ["a"], at: t0.addingTimeInterval(100))
        var result = try await inbox.mark(userID: "a", .all(type: "comment", before: t0.addingTimeInterval(50)), .read, at: t0)
        #expect(result.changed == 1)
        #expect(result.counts.byType == ["comment": .init(unseen: 1, unread: 1), "like": .init(unseen: 1, unread: 1)])
        result = try await inbox.mark(userID: "a", .all(type: "comment", before: nil), .read, at: t0)
        #expect(result.changed == 1)
        #expect(result.counts.total == .init(unseen: 1, unread: 1))
        #expect(try await inbox.mark(userID: "nobody", .all(type: nil, before: nil), .read, at: t0).counts == InboxCounts())
    }

    @Test(arguments: StoreKind.allCases)
    func historyFiltersByStateAndTypeWithTheSameCursor(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        var sent: [(ObjectID, String)] = []
        for index in 0..<30 {
            let type = index % 3 == 0 ? "like" : "comment"
            sent.append((try await send(store, type: type, to: ["a"], at: t0.addingTimeInterval(Double(index))), type))
        }
        // Every fourth read, every fifth archived.
        _ = try await inbox.mark(userID: "a", .ids(sent.enumerated().filter { $0.offset % 4 == 0 }.map(\.element.0)), .read, at: t0)
        _ = try await inbox.mark(userID: "a", .ids(sent.enumerated().filter { $0.offset % 5 == 0 }.map(\.element.0)), .archived, at: t0)
        func all(_ state: InboxState?, _ type: String?) async throws -> [ObjectID] {
            var listed: [ObjectID] = []
            var cursor: String?
            repeat {
                let page = try await inbox.items(userID: "a", state: state, type: type, limit: 4, before: cursor)
                #expect(page.items.count <= 4)
                listed += page.items.map(\.notificationID)
                cursor = page.next
            } while cursor != nil
            return listed
        }
        let newestFirst = Array(sent.enumerated().reversed())
        let expectUnreadComments = newestFirst.filter { $0.offset % 4 != 0 && $0.offset % 5 != 0 && $0.element.1 == "comment" }.map(\.element.0)
        #expect(try await all(.unread, "comment") == expectUnreadComments)
        #expect(try await all(.archived, nil) == newestFirst.filter { $0.offset % 5 == 0 }.map(\.element.0))
        #expect(try await all(.read, nil) == newestFirst.filter { $0.offset % 4 == 0 && $0.offset % 5 != 0 }.map(\.element.0))
        #expect(try await all(nil, "like") == newestFirst.filter { $0.element.1 == "like" }.map(\.element.0))
        #expect(try await all(nil, nil) == newestFirst.map(\.element.0))
        #expect(try await all(.inbox, nil).count == 24)
        #expect(try await inbox.counts(userID: "a").total.unread == expectUnreadComments.count + (try await all(.unread, "like")).count)
        await #expect(throws: HeraldError.self) { _ = try await inbox.items(userID: "a", state: nil, type: nil, limit: 5, before: "x") }
    }

    @Test(arguments: StoreKind.allCases)
    func snoozesEndUnreadAgain(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        let first = try await send(store, to: ["a"])
        let second = try await send(store, to: ["b"])
        _ = try await inbox.mark(userID: "a", .ids([first]), .snooze(until: t0.addingTimeInterval(10)), at: t0)
        _ = try await inbox.mark(userID: "b", .ids([second]), .snooze(until: t0.addingTimeInterval(20)), at: t0)
        #expect(try await inbox.items(userID: "a", state: .snoozed, type: nil, limit: 5, before: nil).items.map(\.notificationID) == [first])
        #expect(try await inbox.endSnoozes(dueBy: t0.addingTimeInterval(5), limit: 10) == [])
        #expect(try await inbox.endSnoozes(dueBy: t0.addingTimeInterval(15), limit: 10) == ["a"])
        #expect(try await inbox.counts(userID: "a").total.unread == 1)
        #expect(try await inbox.counts(userID: "b").total.unread == 0)
        #expect(try await inbox.endSnoozes(dueBy: t0.addingTimeInterval(30), limit: 10) == ["b"])
        #expect(try await inbox.endSnoozes(dueBy: t0.addingTimeInterval(30), limit: 10) == [], "each snooze ends once")
        #expect(try await InboxRecount.mismatches(in: store) == [])
    }

    @Test(arguments: StoreKind.allCases)
    func purgesAndErasureKeepTheCountersExact(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        let old = try await send(store, to: ["a", "b"], at: t0)
        let older = try await send(store, to: ["a"], at: t0.addingTimeInterval(-10))
        try await send(store, to: ["a"], at: t0.addingTimeInterval(100))
        _ = try await inbox.mark(userID: "a", .ids([old]), .read, at: t0)
        _ = try await inbox.mark(userID: "a", .ids([older]), .archived, at: t0)
        #expect(try await inbox.purge(archived: true, before: t0.addingTimeInterval(50), limit: 10) == 1)
        #expect(try await inbox.purge(archived: false, before: t0.addingTimeInterval(50), limit: 10) == 1, "the read one; the unread stay")
        #expect(try await inbox.counts(userID: "a").total == .init(unseen: 1, unread: 1))
        #expect(try await store.purgeHistory(before: t0.addingTimeInterval(200), limit: 10) == 2)
        #expect(try await inbox.counts(userID: "a") == InboxCounts())
        #expect(try await inbox.counts(userID: "b") == InboxCounts())
        try await send(store, to: ["a"])
        _ = try await store.eraseUser(userID: "a", at: t0)
        #expect(try await inbox.counts(userID: "a") == InboxCounts())
        #expect(try await store.rows(SharedStatement("SELECT user_id FROM inbox_counts WHERE user_id = 'a'")).isEmpty, "erasure leaves no counter")
        #expect(try await InboxRecount.mismatches(in: store) == [])
    }

    @Test(arguments: StoreKind.allCases)
    func badgesAreEachUsersUnreadCount(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        let n = try await send(store, to: ["a", "b"])
        try await send(store, type: "like", to: ["a"])
        _ = try await inbox.mark(userID: "b", .ids([n]), .read, at: t0)
        #expect(try await inbox.badges(for: ["a", "b", "c"]) == ["a": 2, "b": 0, "c": 0])
    }

    /// A topic's fan-out writes its history rows with one statement, inline or a page at a time
    /// as a job: every recipient's counts include them.
    @Test(arguments: StoreKind.allCases)
    func fanOutsCountEveryRecipient(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        let tree = try await TopicTree.make(in: store, ids: ids)
        let users = (0..<7).map { "fan\($0)" }
        for user in users { try await store.subscribe(userID: user, topicKey: tree.optIn.topicKey, at: t0) }
        for inlineLimit in [Int.max, 0] {
            let n = HeraldNotification(
                id: ids.next(at: t0), type: "message", title: "M", body: "d", url: nil, timestamp: t0, target: .topic(tree.optIn.topicKey))
            _ = try await store.acceptFanOut(
                n, topic: tree.optIn.topicKey, level: .optIn, plan: .historyOnly, extra: [], archive: nil, pageSize: 3, inlineLimit: inlineLimit,
                idempotencySince: t0)
        }
        for job in try await store.pendingFanOuts(limit: 5) {
            for _ in 0..<10 where try await store.writeFanOutPage(of: job.notification.id, pageSize: 3, route: { _ in [] })?.done == false {}
        }
        for user in users { #expect(try await inbox.counts(userID: user).byType == ["message": .init(unseen: 2, unread: 2)], "\(user)") }
        #expect(try await InboxRecount.mismatches(in: store) == [])
    }

    /// On SQLite counts are remembered while nothing is committed: any write that moves a
    /// counter (an accept, the history sink, a mark) is a commit, so a read after it is fresh.
    @Test func rememberedCountsNeverOutliveACommit() async throws {
        let path = try TestResources.temporaryDirectory("herald-inbox").appendingPathComponent("remembered.sqlite").path
        let store = try SQLiteStore(path: path)
        TestResources.register { await store.close() }
        try await store.migrate()
        let inbox = SharedInboxStore(database: store, commitCount: { store.commits.value })
        #expect(try await inbox.counts(userID: "a").total.unread == 0)
        let first = try await send(store, to: ["a"])
        #expect(try await inbox.counts(userID: "a").total.unread == 1, "a new item")
        #expect(try await inbox.counts(userID: "a").total.unread == 1, "remembered")
        _ = try await store.rows(SharedStatement("SELECT 1 AS one"))
        #expect(try await inbox.counts(userID: "a").total.unread == 1, "a read commits nothing")
        _ = try await inbox.mark(userID: "a", .ids([first]), .read, at: t0)
        #expect(try await inbox.counts(userID: "a").total.unread == 0, "a mark")
        try await send(store, to: ["a"])
        #expect(try await inbox.counts(userID: "a").total.unread == 1)
    }

    /// Random sequences of every operation, against a model of each item's state: after each
    /// step the answered counts equal the model's, and at the end the counters equal a recount.
    @Test(arguments: StoreKind.allCases)
    func countsEqualTheModelOverRandomSequences(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let inbox = SharedInboxStore(database: store)
        struct Item {
            var type: String
            var seen = false, read = false, archived = false, snoozed = false
        }
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SplitMix64(seed: seed)
        var model: [ObjectID: Item] = [:]
        var order: [ObjectID] = []
        func expected() -> InboxCounts {
            var counts = InboxCounts()
            for item in model.values {
                var tally = counts.byType[item.type] ?? .init()
                let active = !item.archived && !item.snoozed
                if active && !item.seen { tally.unseen += 1 }
                if active && !item.read { tally.unread += 1 }
                if item.archived { tally.archived += 1 }
                counts.byType[item.type] = tally
            }
            counts.byType = counts.byType.filter { $0.value != .init() }
            for tally in counts.byType.values {
                counts.total.unseen += tally.unseen
                counts.total.unread += tally.unread
                counts.total.archived += tally.archived
            }
            return counts
        }
        let types = ["comment", "like", "reply"]
        let until = t0.addingTimeInterval(3_600)
        for step in 0..<60 {
            let operation = Int.random(in: 0..<10, using: &random)
            if operation < 3 || order.isEmpty {
                let type = types[Int.random(in: 0..<types.count, using: &random)]
                let id = try await send(store, type: type, to: ["u"], at: t0.addingTimeInterval(Double(step)))
                model[id] = Item(type: type)
                order.append(id)
                continue
            }
            let change: InboxChange = [.seen, .read, .unread, .archived, .unarchived, .snooze(until: until)][Int.random(in: 0..<6, using: &random)]
            let selection: InboxSelection
            var chosen: [ObjectID]
            if Bool.random(using: &random) {
                chosen = (0..<Int.random(in: 1...3, using: &random)).map { _ in order[Int.random(in: 0..<order.count, using: &random)] }
                selection = .ids(chosen)
            } else {
                let type = Bool.random(using: &random) ? types[Int.random(in: 0..<types.count, using: &random)] : nil
                chosen = order.filter { type == nil || model[$0]?.type == type }
                selection = .all(type: type, before: nil)
            }
            for id in chosen {
                switch change {
                case .seen: model[id]?.seen = true
                case .read:
                    model[id]?.read = true
                    model[id]?.seen = true
                case .unread: model[id]?.read = false
                case .archived: model[id]?.archived = true
                case .unarchived: model[id]?.archived = false
                case .snooze: model[id]?.snoozed = true
                }
            }
            let result = try await inbox.mark(userID: "u", selection, change, at: t0)
            #expect(result.counts == expected(), "seed \(seed), step \(step): \(change) on \(selection)")
            if Int.random(in: 0..<8, using: &random) == 0 {
                _ = try await inbox.endSnoozes(dueBy: until, limit: 100)
                for id in order { model[id]?.snoozed = false }
            }
        }
        #expect(try await inbox.counts(userID: "u") == expected(), "seed \(seed)")
        #expect(try await InboxRecount.mismatches(in: store) == [], "seed \(seed)")
    }

    /// Two processes marking one user's items at once (two stores on one database), while the
    /// history sink writes more: the counters still equal a recount.
    @Test(arguments: [StoreKind.sqlite] + (StoreKind.allCases.contains(.postgres) ? [StoreKind.postgres] : []))
    func concurrentMarksFromTwoProcessesKeepCountersExact(_ kind: StoreKind) async throws {
        let (first, second) = try await Self.twoProcesses(kind)
        var sent: [ObjectID] = []
        for index in 0..<40 { sent.append(try await send(first, type: index % 2 == 0 ? "comment" : "like", to: ["u", "v"])) }
        let items = sent
        let changes: [InboxChange] = [.seen, .read, .unread, .archived, .unarchived, .snooze(until: t0.addingTimeInterval(60))]
        let ids = self.ids
        let t0 = self.t0
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, store) in [first, second, first, second].enumerated() {
                group.addTask {
                    let inbox = SharedInboxStore(database: store)
                    var random = SystemRandomNumberGenerator()
                    for step in 0..<40 {
                        let user = Bool.random(using: &random) ? "u" : "v"
                        let change = changes.randomElement(using: &random) ?? .read
                        if step % 10 == index {
                            let n = HeraldNotification(id: ids.next(), type: "reply", title: "T", body: "B", url: nil, timestamp: t0, target: .users([user]))
                            _ = try await store.accept(n, recipients: 1, deliveries: [], idempotencySince: t0)
                            try await store.appendHistory([(n.id, user)], at: t0)
                        } else if Bool.random(using: &random) {
                            _ = try await inbox.mark(userID: user, .all(type: nil, before: nil), change, at: t0)
                        } else {
                            _ = try await inbox.mark(userID: user, .ids(Array(items.shuffled(using: &random).prefix(8))), change, at: t0)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await InboxRecount.mismatches(in: first) == [])
    }

    /// Two stores on one fresh database: two processes' views.
    static func twoProcesses(_ kind: StoreKind) async throws -> (any ServerStorage, any ServerStorage) {
        switch kind {
        case .postgres:
            let url = try await PostgresTestDatabase.create()
            let first = try PostgresStore.patient(url: url)
            try await first.migrate()
            let second = try PostgresStore.patient(url: url)
            TestResources.register {
                await second.close()
                await first.close()
            }
            return (first, second)
        default:
            let path = try TestResources.temporaryDirectory("herald-inbox").appendingPathComponent("two.sqlite").path
            let first = try SQLiteStore(path: path)
            try await first.migrate()
            let second = try SQLiteStore(path: path)
            TestResources.register {
                await second.close()
                await first.close()
            }
            return (first, second)
        }
    }
}
