import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Logging
import NIOCore
import Testing

/// One user cannot make one notification fan out to hundreds of pushes.
@Suite(.cleansUp) struct DeviceLimitTests {
    @Test func registeringPastTheLimitRemovesTheLeastRecentlyRegistered() async throws {
        let herald = try await TestHerald.make { $0.maxDevicesPerUser = 3 }
        try await herald.test { client in
            let user = headers(herald.backend, user: "u")
            for index in 0..<6 {
                let response = try await client.call(.post, "/api/notifications/register", user, json: ["fcm_token": "tok-\(index)"])
                #expect(response.status == .ok)
            }
            // Across providers: an APNs device counts too.
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "apns-1"])
            let devices = try await herald.server.store.devices(userID: "u")
            #expect(Set(devices.compactMap(\.token)) == ["tok-4", "tok-5", "apns-1"])
            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "t", "body": "b", "user_ids": ["u"]])
            #expect(send.status == .accepted)
            try await herald.deliver()
            #expect(herald.push.received.count == 2, "two FCM devices left, not six")
            let metrics = try await client.call(.get, "/metrics", headers(herald.admin, contentType: nil))
            #expect(String(buffer: metrics.body).contains(#"herald_devices_removed_total{reason="limit"} 4"#))
        }
    }

    @Test func theMaintenancePassPrunesStaleDevicesAndPurgesOldRows() async throws {
        let herald = try await TestHerald.make()
        let store = herald.server.store
        let long = Date(timeIntervalSinceNow: -90 * 86_400)
        _ = try await store.registerDevice(userID: "old", registration: .token("stale-1", provider: "fcm"), newID: ObjectIDGenerator().next(), at: long)
        _ = try await store.registerDevice(userID: "new", registration: .token("fresh-1", provider: "fcm"), newID: ObjectIDGenerator().next(), at: Date())
        let maintenance = StorageMaintenance(
            store: store,
            policy: .init(
                staleDevicesAfter: .seconds(60 * 86_400), deliveries: .seconds(7 * 86_400), idempotency: .seconds(86_400), history: nil, archive: nil),
            logger: Logger(label: "test"), metrics: HeraldMetrics()
        )
        let removed = try await maintenance.runOnce()
        #expect(removed["devices"] == 1)
        #expect(try await store.devices(userID: "old").isEmpty)
        #expect(try await store.devices(userID: "new").count == 1)
    }

    @Test(
        arguments: [
            (["HERALD_RETENTION_DELIVERIES": "7d", "HERALD_RETENTION_HISTORY": "400d", "HERALD_DEVICES_STALE_AFTER": "5184000"], nil),
            (["HERALD_RETENTION_DELIVERIES": "soon"], "retention.deliveries"),
            (["HERALD_RETENTION_IDEMPOTENCY": "1h"], "retention.idempotency"),
            (["HERALD_DEVICES_MAX_PER_USER": "0"], "devices.max_per_user"),
            (["HERALD_RETENTION_HISTORY": "-3d"], "retention.history"),
            (["HERALD_RETENTION_PURGE_SHARE": "0"], "retention.purge_share"),
            (["HERALD_RETENTION_PURGE_SHARE": "1.5"], "retention.purge_share"),
            (["HERALD_RETENTION_PURGE_SHARE": "half"], "retention.purge_share"),
        ] as [([String: String], String?)])
    func retentionSettingsParseOrAreRefused(_ environment: [String: String], _ refusedKey: String?) async throws {
        do {
            let configuration = try await HeraldConfiguration.load(configFile: nil, environment: environment)
            #expect(refusedKey == nil, "\(environment) was accepted")
            #expect(configuration.deliveryRetention == .seconds(7 * 86_400))
            #expect(configuration.historyRetention == .seconds(400 * 86_400))
            #expect(configuration.staleDevicesAfter == .seconds(60 * 86_400))
            #expect(configuration.archiveRetention == nil, "the archive is kept forever by default")
            #expect(configuration.purgeShare == 0.5, "a purge that is behind takes half the database's time by default")
            let quieter = try await HeraldConfiguration.load(configFile: nil, environment: environment.merging(["HERALD_RETENTION_PURGE_SHARE": "0.25"]) { $1 })
            #expect(quieter.purgeShare == 0.25)
            #expect(quieter.storagePolicy.writerShare == 0.25)
        } catch let error as HeraldError {
            let key = try #require(refusedKey, "\(error)")
            #expect(error.message.hasPrefix(key), "\(error.message)")
        }
    }
}
