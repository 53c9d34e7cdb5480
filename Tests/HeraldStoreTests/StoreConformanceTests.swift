import Foundation
import HeraldCards
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import Testing

/// One suite every storage engine must pass: SQLite (file and memory) and PostgreSQL.
@Suite(.cleansUp) struct StoreConformanceTests {
    let ids = ObjectIDGenerator()
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func notification(_ users: [String], key: String? = nil, at date: Date? = nil) -> HeraldNotification {
        HeraldNotification(
            id: ids.next(at: date ?? t0), type: "comment", title: "T", body: "B", url: "https://x.example/p", data: ["k": "v"],
            timestamp: date ?? t0, priority: 3, expiresAt: nil, collapseKey: "c", idempotencyKey: key, target: .users(users)
        )
    }

    func historyDeliveries(_ users: [String]) -> [PlannedDelivery] {
        users.map { PlannedDelivery(sink: "history", userID: $0, distribution: .alert) }
    }

    /// One recipient's deliveries of a notification, in creation order, whatever else it has
    /// (the per-recipient explanation reads them).
    @Test(arguments: StoreKind.allCases)
    func oneRecipientsDeliveriesAreReadAlone(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = notification(["a", "b"])
        _ = try await store.accept(
            n, recipients: 2,
            deliveries: [
                PlannedDelivery(sink: "history", userID: "a", distribution: .alert), PlannedDelivery(sink: "history", userID: "b", distribution: .alert),
                PlannedDelivery(sink: "chat", userID: "a", distribution: .information),
            ], idempotencySince: t0)
        let mine = try await store.deliveries(of: n.id, userID: "a")
        #expect(mine.map(\.sink) == ["history", "chat"] && mine.allSatisfy { $0.userID == "a" })
        #expect(mine.map(\.id) == mine.map(\.id).sorted())
        #expect(mine.last?.distribution == .information && mine.last?.state == .pending)
        #expect(try await store.deliveries(of: n.id, userID: "nobody").isEmpty)
        #expect(try await store.deliveries(of: ids.next(), userID: "a").isEmpty)
    }

    /// An audience reaches the users whose tier or groups it lists and the users it names
    /// (known or not), OR-ed and once each; `all` reaches every user Herald knows.
    @Test(arguments: StoreKind.allCases)
    func audiencesReachMatchingAndNamedUsersOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        try await store.setAttributes(UserAttributes(tierID: "gold"), userID: "a")
        try await store.setAttributes(UserAttributes(tierID: "gold", groupIDs: ["x", "y"]), userID: "b")
        try await store.setAttributes(UserAttributes(tierID: "silver", groupIDs: ["z"]), userID: "c")
        try await store.setAttributes(UserAttributes(), userID: "d")
        let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { [PlannedDelivery(sink: "history", userID: $0.userID, distribution: .alert)] }
        func reached(_ audience: Audience, pageSize: Int = 2) async throws -> [String] {
            let n = notification([])
            let result = try await store.acceptAudience(
                n, audience: audience, route: route, pageSize: pageSize, inlineLimit: .max, idempotency: nil, idempotencySince: t0)
            guard case .accepted(let receipt) = result else { return [] }
            let status = try #require(try await store.status(of: n.id))
            #expect(status.recipients == receipt.recipients)
            return status.deliveries.map(\.userID).sorted()
        }
        #expect(try await reached(Audience(tierIDs: ["gold"], groupIDs: ["z"], userIDs: ["b", "stranger"])) == ["a", "b", "c", "stranger"])
        #expect(try await reached(Audience(groupIDs: ["y"])) == ["b"])
        #expect(try await reached(Audience(all: true, userIDs: ["stranger"]), pageSize: 1) == ["a", "b", "c", "d", "stranger"])
        #expect(try await reached(Audience(tierIDs: ["bronze"])) == [])
    }

    @Test(arguments: StoreKind.allCases)
    func migrateTwiceIsHarmless(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let key = APIKeyRecord(id: ids.next(), name: "kept", role: .admin, createdAt: t0)
        try await store.createKey(key, secretHash: "kept-hash")
        let n = notification(["a"])
        _ = try await store.accept(n, recipients: 1, deliveries: historyDeliveries(["a"]), idempotencySince: t0)
        try await store.migrate()
        try await store.ping()
        #expect(try await store.key(secretHash: "kept-hash") == key, "a second migration keeps what was stored")
        #expect(try await store.status(of: n.id)?.deliveries.count == 1)
        #expect(try await store.queueStats().pending == 1)
    }

    @Test(arguments: StoreKind.allCases)
    func apiKeysCreateFindRevoke(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let key = APIKeyRecord(id: ids.next(), name: "be", role: .backend, createdAt: t0)
        try await store.createKey(key, secretHash: "hash1")
        #expect(try await store.key(secretHash: "hash1") == key)
        #expect(try await store.key(secretHash: "other") == nil)
        #expect(try await store.keys() == [key])
        #expect(try await store.revokeKey(id: key.id, at: t0))
        #expect(try await store.revokeKey(id: key.id, at: t0) == false)
        #expect(try await store.key(secretHash: "hash1") == nil)
        #expect(try await store.keys().first?.revokedAt == t0)
    }

    @Test(arguments: StoreKind.allCases)
    func settingsDefaultAndUpdate(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.settings(userID: "u") == UserSettings())
        let updated = try await store.updateSettings(userID: "u") {
            $0.enabled = false
            $0.types["hot"] = false
        }
        #expect(updated.enabled == false)
        #expect(try await store.settings(userID: "u") == updated)
        await #expect(throws: HeraldError.self) {
            _ = try await store.updateSettings(userID: "u") { settings in
                settings.enabled = true
                throw HeraldError.invalidField("x", "bad")
            }
        }
        #expect(try await store.settings(userID: "u").enabled == false, "a failed change is rolled back")
        // Channel preferences are stored and read back exactly, push kept as `types`.
        let chosen = try await store.updateSettings(userID: "u") {
            $0.channels = ["chat": false, "email": true]
            $0.setChoice(false, type: "comment", channel: "chat")
            $0.setChoice(true, type: "comment", channel: "push")
        }
        #expect(chosen.types == ["hot": false, "comment": true] && chosen.preferences == ["comment": ["chat": false]])
        #expect(try await store.settings(userID: "u") == chosen)
        #expect(try await store.recipients(userIDs: ["u"]).first?.settings == chosen, "the router reads them as stored")
    }

    /// Read-change-writes of one user's settings from many tasks at once: none is lost, one that
    /// fails fails alone (SQLite commits them in groups), and the process survives
    /// (PostgreSQL's store once wrapped `change` in withoutActuallyEscaping, which trapped when
    /// its supervised operation released the closure after the call).
    @Test(arguments: StoreKind.allCases)
    func concurrentSettingsChangesAreAllKept(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        // Rounds of 10 at once: they contend for the row, but stay under the PostgreSQL pool's 20
        // connections, so none waits for a connection (2 s, then a 503) while the whole suite
        // runs beside it. The tenth of each round is refused by its change.
        for round in 0..<40 {
            let failed = await withTaskGroup(of: Int?.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        do {
                            _ = try await store.updateSettings(userID: "busy") { settings in
                                settings.types["type-\(round)-\(index)"] = false
                                if index == 9 { throw HeraldError.invalidField("types", "refused") }
                            }
                            return nil
                        } catch {
                            return index
                        }
                    }
                }
                return await group.reduce(into: [Int]()) { if let index = $1 { $0.append(index) } }
            }
            #expect(failed == [9], "round \(round)")
        }
        let types = try await store.settings(userID: "busy").types
        #expect(types.count == 360 && !types.keys.contains { $0.hasSuffix("-9") })
    }

    @Test(arguments: StoreKind.allCases)
    func attributesRoundTrip(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.attributes(userID: "u") == nil)
        let attributes = UserAttributes(tierID: "3", groupIDs: ["g1", "g2"], region: "QC", appVersion: "2.1.0", locale: "fr-CA")
        try await store.setAttributes(attributes, userID: "u")
        #expect(try await store.attributes(userID: "u") == attributes)
        _ = try await store.updateSettings(userID: "u") { $0.delivery = .pull }
        #expect(try await store.attributes(userID: "u") == attributes, "settings and attributes are independent")
    }

    @Test(arguments: StoreKind.allCases)
    func deviceRegistrationIsIdempotentAndTokensMove(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let first = try await store.registerDevice(userID: "alice", registration: .token("tok", provider: "fcm", platform: "ios"), newID: ids.next(), at: t0)
        let again = try await store.registerDevice(userID: "alice", registration: .token("tok", provider: "fcm", appVersion: "2.0"), newID: ids.next(), at: t0)
        #expect(first.id == again.id)
        #expect(again.platform == "ios" && again.appVersion == "2.0")
        #expect(try await store.devices(userID: "alice").count == 1)

        // A push queued for alice on this token must not reach bob once the token is his.
        let n = notification(["alice"])
        _ = try await store.accept(
            n, recipients: 1, deliveries: [PlannedDelivery(sink: "fcm", userID: "alice", deviceID: first.id, distribution: .alert)], idempotencySince: t0)
        // Alice registering it again (every app start) leaves her pushes queued.
        _ = try await store.registerDevice(userID: "alice", registration: .token("tok", provider: "fcm"), newID: ids.next(), at: t0)
        #expect(try await store.status(of: n.id)?.deliveries.map(\.state) == [.pending])
        let moved = try await store.registerDevice(userID: "bob", registration: .token("tok", provider: "fcm"), newID: ids.next(), at: t0)
        #expect(moved.userID == "bob")
        #expect(try await store.devices(userID: "alice").isEmpty)
        let status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.map(\.state) == [.failed])
        #expect(try await store.claimDue(now: t0.addingTimeInterval(1), limit: 10, lease: .seconds(30)).isEmpty)

        #expect(try await store.unregisterDevice(userID: "alice", provider: "fcm", addressKey: "tok", at: t0) == false, "only the owner can unregister")
        #expect(try await store.unregisterDevice(userID: "bob", provider: "fcm", addressKey: "tok", at: t0))
        #expect(try await store.devices(userID: "bob").isEmpty)
    }

    /// Erasing a user leaves nothing of theirs that a read could return, fails what was queued
    /// for their devices, touches no one else, and erasing again finds nothing.
    @Test(arguments: StoreKind.allCases)
    func erasingAUserRemovesEverythingOfTheirsAndNothingElse(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let cards = try CardStores.on(store)
        let topics = try await TopicTree.make(in: store, ids: ids)
        try await cards.putCards([Card(id: "c1", metadata: [:], postedAt: t0, hot: 1)])
        var devices: [String: Device] = [:]
        for user in ["alice", "bob"] {
            _ = try await store.updateSettings(userID: user) { $0.enabled = false }
            try await store.setAttributes(UserAttributes(tierID: "gold"), userID: user)
            devices[user] = try await store.registerDevice(
                userID: user, registration: .token("tok-\(user)", provider: "fcm"), newID: ids.next(), at: t0)
            try await store.subscribe(userID: user, topicKey: topics.optIn.topicKey, at: t0)
            _ = try await cards.markSeen(userID: user, [SeenReport(card: "c1", at: t0)])
            _ = try await cards.storeEvents([EngagementEvent(eventID: "e1", userID: user, type: "focus", card: "c1", at: t0)], at: t0)
        }
        let alice = try #require(devices["alice"])
        let n = notification(["alice", "bob"])
        _ = try await store.accept(
            n, recipients: 2,
            deliveries: historyDeliveries(["alice", "bob"])
                + [PlannedDelivery(sink: "fcm", userID: "alice", deviceID: alice.id, distribution: .alert)],
            idempotencySince: t0)
        try await store.appendHistory([(n.id, "alice"), (n.id, "bob")], at: t0)

        let erased = try await store.eraseUser(userID: "alice", at: t0)
        #expect(erased == UserErasure(devices: 1, subscriptions: 1, history: 1, events: 1, cards: 1))
        #expect(try await store.settings(userID: "alice") == UserSettings())
        #expect(try await store.attributes(userID: "alice") == nil)
        #expect(try await store.devices(userID: "alice").isEmpty)
        #expect(try await store.history(userID: "alice", limit: 10, before: nil).items.isEmpty)
        let aliceTopics = try await SharedTopicStore(database: store).subscriptions(userID: "alice")
        #expect(aliceTopics.filter { $0.entry.subject.topicKey == topics.optIn.topicKey }.map(\.subscribed) == [false])
        #expect(try await cards.cardState(userID: "alice") == (try await cards.cardState(userID: "nobody")))
        let push = try #require(try await store.status(of: n.id)?.deliveries.first { $0.sink == "fcm" })
        #expect(push.state == .failed, "a push queued for an erased user's device is never sent")
        let aliceHistory = try #require(try await store.status(of: n.id)?.deliveries.first { $0.sink == "history" && $0.userID == "alice" })
        #expect(aliceHistory.state == .failed, "nor is what other sinks had queued for them")
        #expect(try await store.claimDue(now: t0.addingTimeInterval(1), limit: 10, lease: .seconds(30)).allSatisfy { $0.recipient.userID != "alice" })

        // Bob keeps everything.
        #expect(try await store.settings(userID: "bob").enabled == false)
        #expect(try await store.attributes(userID: "bob")?.tierID == "gold")
        #expect(try await store.devices(userID: "bob").count == 1)
        #expect(try await store.history(userID: "bob", limit: 10, before: nil).items.count == 1)
        let bobTopics = try await SharedTopicStore(database: store).subscriptions(userID: "bob")
        #expect(bobTopics.filter { $0.entry.subject.topicKey == topics.optIn.topicKey }.map(\.subscribed) == [true])
        #expect(try await cards.storeEvents([EngagementEvent(eventID: "e1", userID: "bob", type: "focus", card: "c1", at: t0)], at: t0).isEmpty)

        #expect(try await store.eraseUser(userID: "alice", at: t0) == UserErasure())
    }

    @Test(arguments: StoreKind.allCases)
    func recipientsKeepOrderAndDefaultUnknownUsers(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        _ = try await store.updateSettings(userID: "b") { $0.enabled = false }
        _ = try await store.registerDevice(userID: "b", registration: .token("t1", provider: "fcm"), newID: ids.next(), at: t0)
        _ = try await store.registerDevice(userID: "b", registration: .token("t2", provider: "fcm"), newID: ids.next(), at: t0)
        let recipients = try await store.recipients(userIDs: ["a", "b"])
        #expect(recipients.map(\.userID) == ["a", "b"])
        #expect(recipients[0].settings == UserSettings() && recipients[0].devices.isEmpty)
        #expect(recipients[1].settings.enabled == false && recipients[1].devices.map(\.token) == ["t1", "t2"])
    }

    @Test(arguments: StoreKind.allCases)
    func acceptStoresEverythingAndIdempotencyReplays(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = notification(["a", "b"], key: "k1")
        let first = try await store.accept(n, recipients: 2, deliveries: historyDeliveries(["a", "b"]), idempotencySince: t0.addingTimeInterval(-86_400))
        #expect(first == .accepted(NotificationReceipt(id: n.id, recipients: 2)))
        let status = try #require(try await store.status(of: n.id))
        #expect(status.notification == n)
        #expect(status.deliveries.map(\.state) == [.pending, .pending])
        #expect(status.deliveries.map(\.userID) == ["a", "b"])

        let repeatKey = notification(["c"], key: "k1", at: t0.addingTimeInterval(60))
        let replay = try await store.accept(repeatKey, recipients: 1, deliveries: historyDeliveries(["c"]), idempotencySince: t0.addingTimeInterval(-86_340))
        #expect(replay == .replayed(NotificationReceipt(id: n.id, recipients: 2)))
        #expect(try await store.status(of: repeatKey.id) == nil, "a replay stores nothing")
        let claim = IdempotencyClaim(scope: "", key: "k1", requestHash: "")
        #expect(try await store.receipt(for: claim, since: t0) == .replayed(NotificationReceipt(id: n.id, recipients: 2)))
        // The same key from another sender is another key; another request under it is refused.
        var other = claim
        other.scope = "backend-b"
        #expect(try await store.receipt(for: other, since: t0) == nil)
        var changed = claim
        changed.requestHash = "another request"
        #expect(try await store.receipt(for: changed, since: t0) == .keyReused(NotificationReceipt(id: n.id, recipients: 2)))
        let reused = notification(["d"], key: "k1", at: t0.addingTimeInterval(61))
        #expect(
            try await store.accept(reused, recipients: 1, deliveries: historyDeliveries(["d"]), idempotency: changed, idempotencySince: t0)
                == .keyReused(NotificationReceipt(id: n.id, recipients: 2))
        )
        #expect(try await store.status(of: reused.id) == nil, "a reused key stores nothing")
        let scoped = notification(["d"], key: "k1", at: t0.addingTimeInterval(62))
        #expect(
            try await store.accept(scoped, recipients: 1, deliveries: historyDeliveries(["d"]), idempotency: other, idempotencySince: t0)
                == .accepted(NotificationReceipt(id: scoped.id, recipients: 1))
        )

        // After the window the key is free again.
        let later = notification(["c"], key: "k1", at: t0.addingTimeInterval(90_000))
        let fresh = try await store.accept(later, recipients: 1, deliveries: historyDeliveries(["c"]), idempotencySince: t0.addingTimeInterval(90_000 - 86_400))
        #expect(fresh == .accepted(NotificationReceipt(id: later.id, recipients: 1)))
    }

    /// Concurrent accepts share group commits (a batch reads its recipients together; on
    /// PostgreSQL it is a few bulk statements): each is stored exactly as sent, optional fields
    /// set or not, with its own deliveries planned from its own user's settings and devices,
    /// beside replays of one idempotency key that store nothing.
    @Test(arguments: StoreKind.allCases)
    func concurrentAcceptsAreEachStoredAsSent(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        _ = try await store.registerDevice(
            userID: "u1", registration: DeviceRegistration(address: DeviceAddress(provider: "fcm", token: "tok-1")), newID: ids.next(at: t0), at: t0)
        // u2 has a device too, but has muted pushes: its accepts plan history only.
        _ = try await store.registerDevice(
            userID: "u2", registration: DeviceRegistration(address: DeviceAddress(provider: "fcm", token: "tok-2")), newID: ids.next(at: t0), at: t0)
        _ = try await store.updateSettings(userID: "u2") { $0.enabled = false }
        let sent: [HeraldNotification] = (0..<120).map { index in
            HeraldNotification(
                id: ids.next(at: t0), type: index % 2 == 0 ? "comment" : "upvote", title: "T\(index)", body: index % 3 == 0 ? "" : "body \(index)",
                url: index % 4 == 0 ? nil : "https://x.example/\(index)", data: index % 5 == 0 ? [:] : ["k": "v\(index)"], timestamp: t0,
                distribution: index % 2 == 0 ? .alert : .information, priority: index % 7, expiresAt: index % 3 == 0 ? t0.addingTimeInterval(3600) : nil,
                collapseKey: index % 6 == 0 ? "c\(index)" : nil, idempotencyKey: index % 10 == 0 ? "same-key" : nil, target: .users(["u\(index % 3)"]))
        }
        let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { context in
            [PlannedDelivery(sink: "history", userID: context.userID, distribution: .alert)]
                + (context.settings.enabled
                    ? context.devices.map { PlannedDelivery(sink: "fcm", userID: context.userID, deviceID: $0.id, distribution: .alert) } : [])
        }
        let results = try await withThrowingTaskGroup(of: (Int, AcceptResult).self) { group in
            for (index, notification) in sent.enumerated() {
                group.addTask {
                    guard case .users(let users) = notification.target else {
                        return (index, .keyReused(NotificationReceipt(id: notification.id, recipients: 0)))
                    }
                    let claim = notification.idempotencyKey.map { IdempotencyClaim(scope: "s", key: $0, requestHash: "h") }
                    return (index, try await store.acceptUsers(notification, userIDs: users, route: route, idempotency: claim, idempotencySince: t0))
                }
            }
            return try await group.reduce(into: [Int: AcceptResult]()) { $0[$1.0] = $1.1 }
        }
        let keyed = sent.indices.filter { sent[$0].idempotencyKey != nil }
        let stored = keyed.filter { if case .accepted = results[$0] { true } else { false } }
        #expect(stored.count == 1, "one request per idempotency key is stored; the rest replay it")
        for (index, notification) in sent.enumerated() where notification.idempotencyKey == nil || stored.contains(index) {
            #expect(results[index] == .accepted(NotificationReceipt(id: notification.id, recipients: 1)))
            let status = try #require(try await store.status(of: notification.id))
            #expect(status.notification == notification, "stored exactly as sent: \(index)")
            #expect(status.deliveries.map(\.sink) == (index % 3 == 1 ? ["history", "fcm"] : ["history"]))
        }
        for index in keyed where !stored.contains(index) {
            #expect(try await store.status(of: sent[index].id) == nil, "a replay stores nothing")
        }
    }

    /// An accept for named users reads their settings and devices in its own transaction: the
    /// route sees what is stored (a muted user, a device), every id named is a recipient, and an
    /// idempotent replay stores nothing and plans nothing.
    @Test(arguments: StoreKind.allCases)
    func acceptForUsersPlansFromWhatIsStoredInTheSameTransaction(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        _ = try await store.registerDevice(
            userID: "a", registration: DeviceRegistration(address: DeviceAddress(provider: "fcm", token: "tok-a")), newID: ids.next(at: t0), at: t0)
        _ = try await store.updateSettings(userID: "b") { $0.enabled = false }
        let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { context in
            [PlannedDelivery(sink: "history", userID: context.userID, distribution: .alert)]
                + (context.settings.enabled
                    ? context.devices.map { PlannedDelivery(sink: "fcm", userID: context.userID, deviceID: $0.id, distribution: .alert) } : [])
        }
        let n = notification(["a", "b", "stranger"], key: "users-1")
        let claim = IdempotencyClaim(scope: "s", key: "users-1", requestHash: "h")
        let first = try await store.acceptUsers(n, userIDs: ["a", "b", "stranger"], route: route, idempotency: claim, idempotencySince: t0)
        #expect(first == .accepted(NotificationReceipt(id: n.id, recipients: 3)))
        let status = try #require(try await store.status(of: n.id))
        #expect(status.recipients == 3)
        #expect(status.deliveries.map { "\($0.sink):\($0.userID)" }.sorted() == ["fcm:a", "history:a", "history:b", "history:stranger"])
        // Each recipient's history row was written by the accept itself: its delivery is
        // recorded as delivered, and only the push is left for the queue.
        for delivery in status.deliveries {
            #expect(delivery.state == (delivery.sink == "history" ? .delivered : .pending), "\(delivery.sink):\(delivery.userID)")
            #expect(delivery.attempts == (delivery.sink == "history" ? 1 : 0))
        }
        for user in ["a", "b", "stranger"] {
            #expect(try await store.history(userID: user, limit: 10, before: nil).items.map(\.notificationID) == [n.id], "\(user)'s history")
        }
        #expect(
            try await store.claimDue(now: t0.addingTimeInterval(1), limit: 10, lease: .seconds(30)).map { "\($0.sink):\($0.recipient.userID)" } == ["fcm:a"])

        let again = notification(["a"], key: "users-1", at: t0.addingTimeInterval(1))
        let replay = try await store.acceptUsers(again, userIDs: ["a"], route: route, idempotency: claim, idempotencySince: t0)
        #expect(replay == .replayed(NotificationReceipt(id: n.id, recipients: 3)))
        #expect(try await store.status(of: again.id) == nil, "a replay stores nothing")
        #expect(try await store.history(userID: "a", limit: 10, before: nil).items.map(\.notificationID) == [n.id], "a replay writes no history")
    }

    /// An accept with a hand-off stores the deliveries it admits as a claim leaves them (leased,
    /// first attempt counted) and hands over exactly what a claim would read back: nothing is
    /// claimable until the lease runs out, and then the same deliveries are, on attempt 2. A
    /// sink the hand-off does not admit is stored pending, as without one.
    @Test(arguments: StoreKind.allCases)
    func anAcceptHandsOffWhatAClaimWouldReadBack(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        for user in ["a", "b"] {
            _ = try await store.registerDevice(
                userID: user, registration: DeviceRegistration(address: DeviceAddress(provider: "fcm", token: "tok-\(user)")),
                newID: ids.next(at: t0), at: t0)
        }
        let route: @Sendable (RecipientContext) -> [PlannedDelivery] = { context in
            [
                PlannedDelivery(sink: "history", userID: context.userID, distribution: .alert),
                PlannedDelivery(sink: "hook", userID: context.userID, distribution: .information),
            ]
                + context.devices.map { PlannedDelivery(sink: "fcm", userID: context.userID, deviceID: $0.id, distribution: .alert) }
        }
        let handOff = DeliveryHandOff(capacity: 100, lease: .seconds(30), admits: { $0 != "hook" })
        // Sub-microsecond times are stored to the microsecond: the handed notification is the stored one.
        let n = notification(["a", "b"], at: t0.addingTimeInterval(0.000_000_3))
        let result = try await store.acceptUsers(
            n, userIDs: ["a", "b"], route: route, idempotency: nil, idempotencySince: t0, handOff: handOff)
        #expect(result == .accepted(NotificationReceipt(id: n.id, recipients: 2)))
        let handed = handOff.take(max: 10)
        #expect(handed.map { "\($0.sink):\($0.recipient.userID)" }.sorted() == ["fcm:a", "fcm:b"])
        #expect(handed.allSatisfy { $0.attempt == 1 && $0.recipient.device?.address.token == "tok-\($0.recipient.userID)" })

        let status = try #require(try await store.status(of: n.id))
        let stored = Dictionary(uniqueKeysWithValues: status.deliveries.map { ("\($0.sink):\($0.userID)", $0) })
        for delivery in handed {
            let row = try #require(stored["fcm:\(delivery.recipient.userID)"])
            #expect(row.id == delivery.id && row.state == .pending && row.attempts == 1)
        }
        #expect(stored["hook:a"]?.attempts == 0 && stored["history:a"]?.state == .delivered)
        // Only what the hand-off did not admit is claimable now.
        let now = try await store.claimDue(now: t0.addingTimeInterval(1), limit: 10, lease: .seconds(30))
        #expect(now.map { "\($0.sink):\($0.recipient.userID)" }.sorted() == ["hook:a", "hook:b"])
        // The process that held them died: once the lease runs out, a claim reads back the
        // same deliveries it was handed.
        // (The pending ones, claimed a second later, are still leased.)
        let retaken = try await store.claimDue(now: t0.addingTimeInterval(30.5), limit: 10, lease: .seconds(30))
        #expect(retaken.map(\.id) == handed.map(\.id).sorted())
        for claimed in retaken {
            var expected = try #require(handed.first { $0.id == claimed.id })
            expected.attempt = 2
            #expect(claimed == expected)
        }
        // A full hand-off admits nothing more.
        let full = DeliveryHandOff(capacity: 1, lease: .seconds(30))
        full.hand(handed)
        let later = notification(["a"], at: t0.addingTimeInterval(2))
        _ = try await store.acceptUsers(later, userIDs: ["a"], route: route, idempotency: nil, idempotencySince: t0, handOff: full)
        #expect(full.take(max: 10).map(\.id) == handed.map(\.id), "nothing was added to a full hand-off")
        #expect(try await store.status(of: later.id)?.deliveries.filter { $0.sink == "fcm" }.map(\.attempts) == [0])
    }

    @Test(arguments: StoreKind.allCases)
    func claimsLeaseAndExpiredLeasesAreClaimedAgain(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = notification(["a", "b", "c"])
        _ = try await store.accept(n, recipients: 3, deliveries: historyDeliveries(["a", "b", "c"]), idempotencySince: t0)
        #expect(try await store.nextDueDate() == t0)
        let first = try await store.claimDue(now: t0, limit: 2, lease: .seconds(30))
        #expect(first.map(\.recipient.userID) == ["a", "b"])
        #expect(first.allSatisfy { $0.attempt == 1 && $0.notification == n && $0.sink == "history" })
        let second = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        #expect(second.map(\.recipient.userID) == ["c"], "leased deliveries are not claimed twice")
        #expect(try await store.claimDue(now: t0.addingTimeInterval(29), limit: 10, lease: .seconds(30)).isEmpty)
        // The worker holding "a" and "b" died: after the lease they are due again.
        let retaken = try await store.claimDue(now: t0.addingTimeInterval(31), limit: 10, lease: .seconds(30))
        #expect(Set(retaken.map(\.recipient.userID)) == ["a", "b", "c"])
        #expect(retaken.allSatisfy { $0.attempt == 2 })
    }

    /// A notification to "a" with a history, an FCM (to "a"'s device) and a webhook delivery, all three claimed.
    func claimThreeDeliveries(_ store: any HeraldStorage) async throws -> (Device, HeraldNotification, [Delivery]) {
        let device = try await store.registerDevice(userID: "a", registration: .token("tok", provider: "fcm"), newID: ids.next(), at: t0)
        let n = notification(["a"])
        _ = try await store.accept(
            n, recipients: 1,
            deliveries: historyDeliveries(["a"]) + [
                PlannedDelivery(sink: "fcm", userID: "a", deviceID: device.id, distribution: .alert),
                PlannedDelivery(sink: "webhook", userID: "a", distribution: .alert),
            ], idempotencySince: t0)
        let claimed = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        #expect(claimed.count == 3)
        return (device, n, claimed)
    }

    @Test(arguments: StoreKind.allCases)
    func recordingOutcomes(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let (device, n, claimed) = try await claimThreeDeliveries(store)
        #expect(claimed.first { $0.sink == "fcm" }?.recipient.device == device)
        let retryAt = t0.addingTimeInterval(5)
        try await store.record(
            [
                DeliveryUpdate(id: claimed[0].id, state: .delivered, attempts: 1),
                DeliveryUpdate(id: claimed[1].id, state: .failed, attempts: 1, lastError: "gone", removeDevice: device.id),
                DeliveryUpdate(id: claimed[2].id, state: .pending, attempts: 1, lastError: "503", nextAttemptAt: retryAt),
            ], at: t0)
        let status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.map(\.state) == [.delivered, .failed, .pending])
        #expect(status.deliveries[1].lastError == "gone")
        #expect(status.deliveries[2].nextAttemptAt == retryAt)
        #expect(try await store.devices(userID: "a").isEmpty, "a token reported gone is removed at once")
        #expect(try await store.nextDueDate() == retryAt)
        #expect(try await store.claimDue(now: t0.addingTimeInterval(4), limit: 10, lease: .seconds(30)).isEmpty)
        #expect(try await store.claimDue(now: retryAt, limit: 10, lease: .seconds(30)).map(\.id) == [claimed[2].id])
    }

    /// A provider's reason is outside text: one with U+0000 (which PostgreSQL refuses) once
    /// failed the whole batch of records, so every push in it was sent again after its lease.
    @Test(arguments: StoreKind.allCases)
    func aProvidersReasonWithNULOrAMegabyteIsRecordedWithItsBatch(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let (device, n, claimed) = try await claimThreeDeliveries(store)
        let long = String(repeating: "é", count: 600_000)
        try await store.record(
            [
                DeliveryUpdate(id: claimed[0].id, state: .delivered, attempts: 1),
                DeliveryUpdate(id: claimed[1].id, state: .failed, attempts: 1, lastError: "FCM 404: gone\u{0}x", removeDevice: device.id),
                DeliveryUpdate(id: claimed[2].id, state: .dead, attempts: 1, lastError: long),
            ], at: t0)
        let status = try #require(try await store.status(of: n.id))
        #expect(status.deliveries.map(\.state) == [.delivered, .failed, .dead])
        #expect(status.deliveries[1].lastError == "FCM 404: gone\u{FFFD}x")
        let cut = try #require(status.deliveries[2].lastError)
        #expect(cut.utf8.count <= FailureReason.maxBytes && cut.hasPrefix("éé") && cut.hasSuffix("é…"), "\(cut.utf8.count) bytes")
        #expect(try await store.devices(userID: "a").isEmpty)
        #expect(try await store.claimDue(now: t0.addingTimeInterval(60), limit: 10, lease: .seconds(30)).isEmpty, "nothing to send again")
        await store.close()
    }

    /// What waits is counted whenever it was accepted; what finished, and the latest error,
    /// only when it finished inside the window.
    @Test(arguments: StoreKind.allCases)
    func sinkCountersCountByState(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.sinkCounters(finishedSince: t0).isEmpty)
        let old = notification(["a", "b"])
        _ = try await store.accept(
            old, recipients: 2, deliveries: [PlannedDelivery(sink: "webhook:x", userID: "a", distribution: .alert)], idempotencySince: t0)
        let oldClaim = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        try await store.record([DeliveryUpdate(id: oldClaim[0].id, state: .dead, attempts: 1, lastError: "500 long ago")], at: t0)
        let later = t0.addingTimeInterval(86_400)
        let n = notification(["a", "b"], at: later)
        _ = try await store.accept(
            n, recipients: 2, deliveries: historyDeliveries(["a", "b"]) + [PlannedDelivery(sink: "webhook:x", userID: "a", distribution: .alert)],
            idempotencySince: later)
        let claimed = try await store.claimDue(now: later, limit: 10, lease: .seconds(30))
        try await store.record(
            [
                DeliveryUpdate(id: claimed[0].id, state: .delivered, attempts: 1),
                DeliveryUpdate(id: claimed[2].id, state: .dead, attempts: 1, lastError: "410 Gone"),
            ], at: later)
        #expect(
            try await store.sinkCounters(finishedSince: later.addingTimeInterval(-3600)) == [
                SinkCounters(sink: "history", counts: [.delivered: 1, .pending: 1], lastError: nil),
                SinkCounters(sink: "webhook:x", counts: [.dead: 1], lastError: "410 Gone"),
            ])
        #expect(
            try await store.sinkCounters(finishedSince: t0) == [
                SinkCounters(sink: "history", counts: [.delivered: 1, .pending: 1], lastError: nil),
                SinkCounters(sink: "webhook:x", counts: [.dead: 2], lastError: "410 Gone"),
            ])
        // After the window: what waits, and the error of a delivery still retrying.
        try await store.record([DeliveryUpdate(id: claimed[1].id, state: .pending, attempts: 1, lastError: "503 busy", nextAttemptAt: later)], at: later)
        #expect(
            try await store.sinkCounters(finishedSince: later.addingTimeInterval(60)) == [
                SinkCounters(sink: "history", counts: [.pending: 1], lastError: "503 busy")
            ])
    }

    /// The history sink writes a claimed delivery's row only while the delivery is still
    /// pending under its lease: a user erased after the claim got their row back, written
    /// after the erasure had deleted everything of theirs.
    @Test(arguments: StoreKind.allCases)
    func historyForADeliveryFailedSinceItsClaimIsNotWritten(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = notification(["kept", "erased", "stale"])
        _ = try await store.accept(n, recipients: 3, deliveries: historyDeliveries(["kept", "erased", "stale"]), idempotencySince: t0)
        let claimed = try await store.claimDue(now: t0, limit: 10, lease: .seconds(30))
        #expect(claimed.count == 3)
        _ = try await store.eraseUser(userID: "erased", at: t0)
        // A lease another claim has since replaced (its attempt is not the row's).
        let leases = claimed.map { DeliveryLease(id: $0.id, attempt: $0.attempt + ($0.recipient.userID == "stale" ? 1 : 0)) }
        try await store.appendHistory(claimed.map { (n.id, $0.recipient.userID) }, at: t0, leases: leases)
        #expect(try await store.history(userID: "kept", limit: 10, before: nil).items.map(\.notificationID) == [n.id])
        #expect(try await store.history(userID: "erased", limit: 10, before: nil).items.isEmpty, "no row outlives the erasure")
        #expect(try await store.history(userID: "stale", limit: 10, before: nil).items.isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func historyIsExactlyOncePerNotificationAndUser(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = notification(["a"])
        _ = try await store.accept(n, recipients: 1, deliveries: historyDeliveries(["a"]), idempotencySince: t0)
        try await store.appendHistory([(n.id, "a")], at: t0)
        try await store.appendHistory([(n.id, "a"), (n.id, "a")], at: t0)
        let page = try await store.history(userID: "a", limit: 50, before: nil)
        #expect(page.items.count == 1)
        #expect(
            page.items.first
                == HistoryItem(notificationID: n.id, title: "T", body: "B", type: "comment", url: "https://x.example/p", timestamp: t0, read: false))
        #expect(page.next == nil)
        #expect(try await store.history(userID: "b", limit: 50, before: nil).items.isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func historyPagesNewestFirstWithoutGapsOrRepeats(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        var sent: [ObjectID] = []
        for i in 0..<53 {
            let n = notification(["a"], at: t0.addingTimeInterval(Double(i)))
            _ = try await store.accept(n, recipients: 1, deliveries: [], idempotencySince: t0)
            try await store.appendHistory([(n.id, "a")], at: n.timestamp)
            sent.append(n.id)
        }
        var seen: [ObjectID] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await store.history(userID: "a", limit: 10, before: cursor)
            seen.append(contentsOf: page.items.map(\.notificationID))
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 20
        #expect(pages == 6)
        #expect(seen == sent.reversed())
        await #expect(throws: HeraldError.self) { _ = try await store.history(userID: "a", limit: 10, before: "not-a-cursor") }
    }

    /// Group commit: many accepts at once share transactions, yet each gets its own receipt,
    /// and a repeated idempotency key is stored once whichever batch its copies land in.
    @Test(arguments: StoreKind.allCases)
    func concurrentAcceptsAreEachCommittedOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let submissions = (0..<300).map { index in
            // Every tenth submission repeats one of ten keys; the rest have none.
            notification(["u\(index % 7)"], key: index % 10 == 0 ? "key-\(index % 100)" : nil)
        }
        let results = try await withThrowingTaskGroup(of: AcceptResult.self) { group in
            for (index, submission) in submissions.enumerated() {
                group.addTask {
                    try await store.accept(submission, recipients: 1, deliveries: historyDeliveries(["u\(index % 7)"]), idempotencySince: t0)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let accepted = results.compactMap { result -> ObjectID? in if case .accepted(let receipt) = result { receipt.id } else { nil } }
        #expect(accepted.count == 270 + 10)
        #expect(Set(accepted).count == accepted.count)
        for key in (0..<10).map({ "key-\($0 * 10)" }) {
            let earlier = try #require(try await store.receipt(for: IdempotencyClaim(scope: "", key: key, requestHash: ""), since: t0))
            #expect(earlier == .replayed(earlier.receipt) && accepted.contains(earlier.receipt.id))
        }
        for id in accepted {
            let status = try #require(try await store.status(of: id))
            #expect(status.deliveries.count == 1)
        }
    }

    /// Leases: workers claiming at the same time never get the same delivery (SKIP LOCKED on
    /// PostgreSQL, one writer at a time on SQLite).
    @Test(arguments: StoreKind.allCases)
    func concurrentClaimsNeverShareADelivery(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        for batch in 0..<10 {
            let users = (0..<50).map { "b\(batch)-u\($0)" }
            _ = try await store.accept(notification(users), recipients: users.count, deliveries: historyDeliveries(users), idempotencySince: t0)
        }
        let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var mine: [Int64] = []
                    while true {
                        let batch = try await store.claimDue(now: t0, limit: 20, lease: .seconds(60))
                        if batch.isEmpty { return mine }
                        mine += batch.map(\.id)
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(claimed.count == 500)
        #expect(Set(claimed).count == 500, "no delivery was claimed twice")
    }

    @Test(arguments: StoreKind.allCases)
    func portalSessionsEndWhenTheyExpireOrTheirKeyIsRevoked(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let key = APIKeyRecord(id: ids.next(), name: "comms", role: .communicator, createdAt: t0)
        try await store.createKey(key, secretHash: "hash-comms")
        let session = PortalSessionRecord(idHash: "h1", keyID: key.id, csrf: "token", expiresAt: t0.addingTimeInterval(3600))
        try await store.createPortalSession(session, at: t0)
        #expect(try await store.portalSession(idHash: "h1", at: t0) == PortalSessionEntry(session: session, key: key))
        #expect(try await store.portalSession(idHash: "other", at: t0) == nil)
        #expect(try await store.portalSession(idHash: "h1", at: t0.addingTimeInterval(3600)) == nil, "expired")

        // A second session for the same key; deleting one leaves the other.
        try await store.createPortalSession(PortalSessionRecord(idHash: "h2", keyID: key.id, csrf: "t2", expiresAt: t0.addingTimeInterval(7200)), at: t0)
        try await store.deletePortalSession(idHash: "h2")
        #expect(try await store.portalSession(idHash: "h2", at: t0) == nil)
        #expect(try await store.portalSession(idHash: "h1", at: t0) != nil)

        // Creating a session clears the ones expired by then: h1 is gone even when asked about
        // a time it was still valid.
        try await store.createPortalSession(
            PortalSessionRecord(idHash: "h3", keyID: key.id, csrf: "t3", expiresAt: t0.addingTimeInterval(9000)), at: t0.addingTimeInterval(3600)
        )
        #expect(try await store.portalSession(idHash: "h1", at: t0) == nil)
        #expect(try await store.portalSession(idHash: "h3", at: t0) != nil)

        #expect(try await store.revokeKey(id: key.id, at: t0))
        #expect(try await store.portalSession(idHash: "h3", at: t0) == nil, "a revoked key ends its sessions")
    }
}
