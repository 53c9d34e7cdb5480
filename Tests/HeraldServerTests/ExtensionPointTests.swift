import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// The core's extension points (docs/architecture.md, "Extension points") used the way a module
/// would: through `HeraldServer.start`, over real HTTP and storage, with no core edit.
@Suite(.cleansUp) struct ExtensionPointTests {
    /// A module's policy: user `quiet-ann` gets no push for `hot`, whatever her settings say.
    struct NoHotForAnn: RoutingPolicy {
        let name = "test-module"
        func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
            recipient.userID == "quiet-ann" && notification.type == "hot" && sink.capabilities.contains(.push) ? .excluded(because: "no hot for Ann") : nil
        }
    }

    @Test func aRoutingPolicyGivenAtStartDecidesPerRecipient() async throws {
        let herald = try await TestHerald.make(routingPolicies: [NoHotForAnn()])
        try await herald.test { client in
            for user in ["quiet-ann", "bo"] {
                let registered = try await client.call(
                    .post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "token-\(user)"])
                #expect(registered.status == .ok)
            }
            for type in ["hot", "comment"] {
                let sent = try await client.call(
                    .post, "/api/notifications", headers(herald.backend), json: ["type": type, "title": "t", "body": "b", "user_ids": ["quiet-ann", "bo"]])
                #expect(sent.status == .accepted)
            }
            try await herald.deliver()
            let pushed = herald.push.received.map { "\($0.notification.type)→\($0.recipient.userID)" }.sorted()
            #expect(pushed == ["comment→bo", "comment→quiet-ann", "hot→bo"])
            // History is never a policy's to take away.
            let history = try await herald.server.store.history(userID: "quiet-ann", limit: 10, before: nil)
            #expect(history.items.count == 2)
        }
    }

    /// A module's due hook: Cy's pushes wait an hour (a snooze); `generic` ones are dropped (a
    /// digest took them); everything else goes.
    struct SnoozeAndDigest: DueHook {
        let until: Date
        func due(_ deliveries: [Delivery], at now: Date) async -> [DueDecision] {
            deliveries.map { delivery in
                if delivery.notification.type == "generic" { return .drop(because: "folded into the evening digest") }
                return delivery.recipient.userID == "cy" ? .hold(until: until, because: "snoozed") : .send
            }
        }
    }

    func sendAndCollect(_ herald: TestHerald, _ client: some TestClientProtocol, type: String, to users: [String]) async throws -> String {
        let sent = try await client.call(
            .post, "/api/notifications", headers(herald.backend), json: ["type": type, "title": "t", "body": "b", "user_ids": users])
        #expect(sent.status == .accepted)
        return try #require(sent.object["id"] as? String)
    }

    @Test func aDueHookHoldsAndDropsWithoutSpendingAttempts() async throws {
        let later = Date().addingTimeInterval(3_600)
        let herald = try await TestHerald.make(dueHooks: [SnoozeAndDigest(until: later)])
        try await herald.test { client in
            for user in ["cy", "di"] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "t-\(user)"])
            }
            let comment = try await sendAndCollect(herald, client, type: "comment", to: ["cy", "di"])
            let generic = try await sendAndCollect(herald, client, type: "generic", to: ["di"])
            try await herald.deliver()
            #expect(herald.push.received.map { "\($0.notification.type)→\($0.recipient.userID)" } == ["comment→di"])

            let commentID = try #require(ObjectID(comment))
            let genericID = try #require(ObjectID(generic))
            let commentStatus = try await herald.server.store.status(of: commentID)
            let held = try #require(commentStatus?.deliveries.first { $0.userID == "cy" && $0.sink == "fcm" })
            #expect(held.state == .pending && held.attempts == 0, "holding is not failing: the attempt is given back")
            #expect(held.lastError == "held: snoozed")
            #expect(abs((held.nextAttemptAt ?? .distantPast).timeIntervalSince(later)) < 0.01)
            let genericStatus = try await herald.server.store.status(of: genericID)
            let dropped = try #require(genericStatus?.deliveries.first { $0.sink == "fcm" })
            #expect(dropped.state == .failed && dropped.lastError == "dropped: folded into the evening digest")
            // History has both: a hook decides pushes, never what the user was sent.
            #expect(try await herald.server.store.history(userID: "di", limit: 10, before: nil).items.count == 2)
        }
    }

    /// Badges per user, as an inbox module would keep them.
    struct FixedBadges: BadgeCounts {
        let counts: [String: Int]
        func badges(for userIDs: Set<String>) async throws -> [String: Int] { counts.filter { userIDs.contains($0.key) } }
    }

    @Test func aBadgeCarryingSinkGetsEachUsersCount() async throws {
        let apns = RecordingSink(name: "apns", capabilities: [.push, .badge], providers: .only(["apns"]))
        let herald = try await TestHerald.make(extraSinks: [apns], badgeCounts: FixedBadges(counts: ["ed": 3]))
        try await herald.test { client in
            for user in ["ed", "flo"] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "f-\(user)"])
                _ = try await client.call(
                    .post, "/api/notifications/register", headers(herald.backend, user: user),
                    json: ["apns_token": String(repeating: user == "ed" ? "a" : "b", count: 64)])
            }
            _ = try await sendAndCollect(herald, client, type: "comment", to: ["ed", "flo"])
            try await herald.deliver()
            let badges = Dictionary(uniqueKeysWithValues: apns.received.map { ($0.recipient.userID, $0.badge) })
            #expect(badges == ["ed": 3, "flo": nil], "a user the module does not count gets no badge")
            #expect(herald.push.received.count == 2 && herald.push.received.allSatisfy { $0.badge == nil }, "a sink without .badge gets none")
        }
    }

    /// Without a module of its own, the badge is the inbox's unread count (docs/inbox.md), read
    /// when the delivery is claimed: a read between two sends lowers the next one's.
    @Test func theDefaultBadgeIsTheInboxsUnreadCountWhenClaimed() async throws {
        let apns = RecordingSink(name: "apns", capabilities: [.push, .badge], providers: .only(["apns"]))
        let herald = try await TestHerald.make(extraSinks: [apns])
        try await herald.test { client in
            let user = headers(herald.backend, user: "ed")
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": String(repeating: "a", count: 64)])
            var sent: [String] = []
            for _ in 0..<2 {
                sent.append(try await sendAndCollect(herald, client, type: "comment", to: ["ed"]))
                try await herald.deliver()
            }
            #expect(apns.received.map(\.badge) == [1, 2])
            #expect(try await client.call(.post, "/api/inbox/mark", user, json: js(["ids": sent, "change": "read"])).status == .ok)
            _ = try await sendAndCollect(herald, client, type: "comment", to: ["ed"])
            try await herald.deliver()
            #expect(apns.received.map(\.badge) == [1, 2, 1])
        }
    }

    /// A module with a table of its own, given at start: its migrations run with the store's, it
    /// counts what each send stores in the accepting transaction, and a user's erasure over the
    /// API removes its rows.
    @Test func aStorageModuleGivenAtStartKeepsItsOwnTable() async throws {
        let herald = try await TestHerald.make(storageModules: [TallyModule.module])
        try await herald.test { client in
            for user in ["gil", "hal"] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "g-\(user)"])
            }
            _ = try await sendAndCollect(herald, client, type: "comment", to: ["gil", "hal"])
            _ = try await sendAndCollect(herald, client, type: "upvote", to: ["gil"])
            #expect(try await TallyModule.sends(herald.server.store, sink: "fcm") == ["gil": 2, "hal": 1])
            #expect(try await TallyModule.sends(herald.server.store, sink: "history") == ["gil": 2, "hal": 1])

            let erased = try await client.call(.delete, "/api/users/gil", headers(herald.backend))
            #expect(erased.status == .ok)
            #expect(try await TallyModule.sends(herald.server.store, sink: "fcm") == ["hal": 1])

            // A failing module statement is the sender's 5xx, never a 2xx for what was not stored.
            let refused = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "t", "body": "b", "user_ids": ["refused"]])
            #expect(refused.status.code >= 500)
        }
    }
}
