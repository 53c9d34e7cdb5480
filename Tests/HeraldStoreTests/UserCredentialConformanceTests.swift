import Foundation
import HeraldCards
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldStore

/// What ends a user's tokens and guards an anonymous device's account, on every engine
/// (docs/security.md, "User and device tokens").
@Suite(.cleansUp) struct UserCredentialConformanceTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(arguments: StoreKind.allCases)
    func endingsOnlyMoveLaterAndAnErasureIsOne(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.tokensEndedBefore(userID: "u1") == nil, "nothing ended yet")
        try await store.endTokens(userID: "u1", issuedBefore: t0)
        #expect(try await store.tokensEndedBefore(userID: "u1") == t0)
        try await store.endTokens(userID: "u1", issuedBefore: t0.addingTimeInterval(-60))
        #expect(try await store.tokensEndedBefore(userID: "u1") == t0, "an earlier ending does not reopen tokens")
        try await store.endTokens(userID: "u1", issuedBefore: t0.addingTimeInterval(60))
        #expect(try await store.tokensEndedBefore(userID: "u1") == t0.addingTimeInterval(60))
        #expect(try await store.tokensEndedBefore(userID: "u2") == nil, "another user's tokens are untouched")

        let erasedAt = t0.addingTimeInterval(120)
        _ = try await store.updateSettings(userID: "u2") { $0.enabled = false }
        _ = try await store.eraseUser(userID: "u2", at: erasedAt)
        #expect(try await store.tokensEndedBefore(userID: "u2") == erasedAt, "the erasure ended their tokens in its transaction")
        // An erasure of a user with nothing stored ends their tokens too.
        _ = try await store.eraseUser(userID: "never-seen", at: erasedAt)
        #expect(try await store.tokensEndedBefore(userID: "never-seen") == erasedAt)
    }

    @Test(arguments: StoreKind.allCases)
    func aDeviceSecretIsClaimedOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        #expect(try await store.deviceSecretsSince() != nil, "the migration recorded when secrets began")
        #expect(try await store.deviceSecretHash(userID: "dev_a") == nil)
        #expect(try await store.claimDeviceSecret(userID: "dev_a", secretHash: "first", at: t0))
        #expect(try await store.claimDeviceSecret(userID: "dev_a", secretHash: "second", at: t0) == false, "a second claim is refused")
        #expect(try await store.deviceSecretHash(userID: "dev_a") == "first")
        // Concurrent claims: exactly one wins.
        let won = try await withThrowingTaskGroup(of: Bool.self) { group in
            for n in 0..<8 { group.addTask { try await store.claimDeviceSecret(userID: "dev_b", secretHash: "h\(n)", at: t0) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(won == 1)
        // An erasure keeps the secret: the id cannot be signed up for by someone else after.
        _ = try await store.eraseUser(userID: "dev_a", at: t0)
        #expect(try await store.deviceSecretHash(userID: "dev_a") == "first")
    }

    @Test(arguments: StoreKind.allCases)
    func holdsDataSeesEveryKindOfRow(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let cards = try CardStores.on(store)
        #expect(try await store.holdsData(userID: "dev_x") == false)
        _ = try await store.updateSettings(userID: "dev_settings") { $0.enabled = false }
        #expect(try await store.holdsData(userID: "dev_settings"))
        _ = try await store.registerDevice(
            userID: "dev_device", registration: DeviceRegistration(address: DeviceAddress(provider: "fcm", value: .string("tok"), key: "tok")),
            newID: ObjectIDGenerator().next(), at: t0)
        #expect(try await store.holdsData(userID: "dev_device"))
        _ = try await cards.storeEvents(
            [EngagementEvent(eventID: "e1", userID: "dev_events", type: "track", name: "opened", at: t0)], at: t0)
        #expect(try await store.holdsData(userID: "dev_events"))
        #expect(try await store.holdsData(userID: "dev_x") == false, "others' rows are not theirs")
    }

    /// A registration made with a device token records its installation; the backend
    /// registering the device again keeps it, and a device moving to another user keeps nothing
    /// of the old one's.
    @Test(arguments: StoreKind.allCases)
    func aDeviceRemembersTheInstallationThatRegisteredIt(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let ids = ObjectIDGenerator()
        func register(_ user: String, installation: String?) async throws -> Device {
            var registration = DeviceRegistration(address: DeviceAddress(provider: "fcm", value: .string("tok-1"), key: "tok-1"))
            registration.installationID = installation
            return try await store.registerDevice(userID: user, registration: registration, newID: ids.next(), at: t0)
        }
        #expect(try await register("ana", installation: "install-ana-phone").installationID == "install-ana-phone")
        #expect(try await register("ana", installation: nil).installationID == "install-ana-phone", "a backend's registration keeps it")
        #expect(try await store.devices(userID: "ana").first?.installationID == "install-ana-phone")
        #expect(try await register("ana", installation: "install-ana-tablet").installationID == "install-ana-tablet")
        #expect(try await register("bob", installation: nil).installationID == nil, "moved to bob: ana's installation is not his")
    }
}
