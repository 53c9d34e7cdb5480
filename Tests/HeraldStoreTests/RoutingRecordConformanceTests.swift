import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldStore

/// What an accepted notification is explained with later, on every engine (docs/routing.md,
/// "Explaining a decision"): the routing inputs it names, the settings versions in force at
/// its accept time, and the Message Hub sender the portal checks.
@Suite(.cleansUp) struct RoutingRecordConformanceTests {
    let ids = ObjectIDGenerator()

    func inputs(critical: Set<String> = []) throws -> RoutingInputs {
        let router = try NotificationRouter(
            sinks: [
                .init(name: "history", capabilities: [.perUser]), .init(name: "fcm", capabilities: [.push, .topics], providers: .only(["fcm"])),
                .init(name: "chat", capabilities: [.perUser], channel: SinkChannel("chat")),
            ],
            rules: [try RoutingRule.parse("type=comment => +chat")], policies: [PreferencePolicy(ChannelPreferences(critical: critical))])
        return RoutingInputs(router: router)
    }

    func notification(at date: Date, inputs: String?) -> HeraldNotification {
        var notification = HeraldNotification(
            id: ids.next(at: date), type: "comment", title: "T", body: "B", url: nil, timestamp: date, target: .users(["u1"]))
        notification.routingInputs = inputs
        return notification
    }

    /// Inputs are stored once under their id, whoever records them again, and a notification
    /// reads back with the id it was accepted under.
    @Test(arguments: StoreKind.allCases)
    func aNotificationNamesTheInputsItWasRoutedWith(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let first = try inputs()
        let second = try inputs(critical: ["alert"])
        #expect(first.id != second.id)
        try await store.recordRoutingInputs(first)
        try await store.recordRoutingInputs(first)
        try await store.recordRoutingInputs(second)
        #expect(try await store.routingInputs(id: first.id) == first)
        #expect(try await store.routingInputs(id: second.id) == second)
        #expect(try await store.routingInputs(id: "0000000000000000") == nil)

        // Whole seconds: stored in microseconds, read back equal.
        let at = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let stamped = notification(at: at, inputs: first.id)
        let unstamped = notification(at: at, inputs: nil)
        _ = try await store.accept(stamped, recipients: 1, deliveries: [], idempotencySince: Date())
        _ = try await store.accept(unstamped, recipients: 1, deliveries: [], idempotencySince: Date())
        #expect(try await store.notification(id: stamped.id) == stamped)
        #expect(try await store.notification(id: unstamped.id) == unstamped)
        #expect(try await store.notification(id: ids.next()) == nil)
        // An accept for users (PostgreSQL's batched statement) stamps it too.
        let forUsers = notification(at: at, inputs: second.id)
        _ = try await store.acceptUsers(forUsers, userIDs: ["u1"], route: { _ in [] }, idempotency: nil, idempotencySince: Date())
        #expect(try await store.notification(id: forUsers.id)?.routingInputs == second.id)
        await store.close()
    }

    /// Each saved change of a user's settings is a version; the one in force at a time is the
    /// last saved at or before it, and none before the first.
    @Test(arguments: StoreKind.allCases)
    func theSettingsInForceAtATimeAreReadBack(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        // A notification from an hour ago: every version saved since may be needed.
        _ = try await store.accept(notification(at: Date().addingTimeInterval(-3600), inputs: nil), recipients: 1, deliveries: [], idempotencySince: Date())
        let beforeAny = Date()
        #expect(try await store.settingsVersion(userID: "u1", at: beforeAny) == nil, "nothing saved: the defaults")
        _ = try await store.updateSettings(userID: "u1") { $0.channels = ["chat": false] }
        let afterFirst = Date()
        _ = try await store.updateSettings(userID: "u1") { $0.channels = ["chat": true] }
        // A save that changes nothing is no version.
        _ = try await store.updateSettings(userID: "u1") { _ in }
        let afterSecond = Date()

        let first = try #require(try await store.settingsVersion(userID: "u1", at: afterFirst))
        #expect(first.settings.channels == ["chat": false])
        let savedAt = try #require(first.savedAt)
        #expect(savedAt >= beforeAny && savedAt <= afterFirst)
        let second = try #require(try await store.settingsVersion(userID: "u1", at: afterSecond))
        #expect(second.settings.channels == ["chat": true] && (second.savedAt ?? .distantPast) > savedAt)
        #expect(try await store.settingsVersion(userID: "u1", at: beforeAny) == nil)
        #expect(try await store.settingsVersion(userID: "u2", at: afterSecond) == nil, "another user's are theirs")

        _ = try await store.eraseUser(userID: "u1", at: Date())
        #expect(try await store.settingsVersion(userID: "u1", at: afterSecond) == nil, "an erasure removes every version")
        await store.close()
    }

    /// Versions no stored notification can need go as new ones are saved: a user keeps the
    /// version in force at the oldest notification and those saved since.
    @Test(arguments: StoreKind.allCases)
    func versionsOlderThanEveryNotificationAreRemoved(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        _ = try await store.updateSettings(userID: "u1") { $0.enabled = false }
        let afterFirst = Date()
        _ = try await store.updateSettings(userID: "u1") { $0.enabled = true }
        #expect(try await store.settingsVersion(userID: "u1", at: afterFirst) == nil, "no notification is older: the first version went")
        #expect(try await store.settingsVersion(userID: "u1", at: Date())?.settings.enabled == true)

        // With a notification accepted between two saves, the version in force at it stays.
        let accepted = Date()
        _ = try await store.accept(notification(at: accepted, inputs: nil), recipients: 1, deliveries: [], idempotencySince: Date())
        _ = try await store.updateSettings(userID: "u1") { $0.delivery = .pull }
        _ = try await store.updateSettings(userID: "u1") { $0.delivery = .push }
        #expect(try await store.settingsVersion(userID: "u1", at: accepted)?.settings.enabled == true)
        #expect(try await store.settingsVersion(userID: "u1", at: Date())?.settings.delivery == .push)
        await store.close()
    }

    /// Settings saved before versions were kept become one version in force since before any
    /// notification (the migration's own statement, run again on a migrated database).
    @Test(arguments: StoreKind.allCases)
    func settingsFromBeforeVersionsAreOneUnversionedVersion(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        _ = try await store.updateSettings(userID: "u1") { $0.enabled = false }
        _ = try await store.transaction([
            SharedStatement("DELETE FROM settings_versions"), SharedStatement(try #require(RoutingRecordSQL.migration.last)),
        ])
        let version = try #require(try await store.settingsVersion(userID: "u1", at: Date(timeIntervalSince1970: 1)))
        #expect(version.savedAt == nil && version.settings.enabled == false)
        await store.close()
    }

    /// The portal finds a Message Hub message's sender by its msi_key.
    @Test(arguments: StoreKind.allCases)
    func anArchivedMessageIsFoundByItsKey(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let n = HeraldNotification(
            id: ids.next(), type: "message", title: "T", body: "B", url: nil, data: ["message": "m"], timestamp: Date(), target: .topic("t"))
        let archive = ArchivedMessage(
            msiKey: n.id.hex, topicKey: "t", title: "T", desc: "B", message: "m", distribution: .alert, timestamp: 1, sender: "communicator:ops")
        _ = try await store.acceptFanOut(n, topic: "t", level: .optIn, plan: .historyOnly, extra: [], archive: archive, pageSize: 10, idempotencySince: Date())
        #expect(try await store.archivedMessage(msiKey: n.id.hex)?.sender == "communicator:ops")
        #expect(try await store.archivedMessage(msiKey: ids.next().hex) == nil)
        await store.close()
    }
}
