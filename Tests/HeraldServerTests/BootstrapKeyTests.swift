import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

@Suite(.cleansUp) struct BootstrapKeyTests {
    /// Revoking the bootstrap key must not stop the next start, nor bring the key back.
    @Test func aRevokedBootstrapKeyStaysRevokedAndTheServerStarts() async throws {
        let directory = try TestResources.temporaryDirectory("herald-bootstrap")
        var configuration = HeraldConfiguration()
        configuration.database = "sqlite:" + directory.appendingPathComponent("h.sqlite").path
        configuration.bootstrapAdminKey = APIKeySecret.generate()
        configuration.logLevel = "critical"
        let first = try await HeraldServer.start(configuration)
        let key = try #require(try await first.store.keys().first)
        #expect(try await first.store.revokeKey(id: key.id, at: Date()))
        await first.close()

        let second = try await HeraldServer.start(configuration)
        #expect(try await second.store.keys().map(\.id) == [key.id], "no second key was made")
        #expect(try await second.store.keys().first?.revokedAt != nil, "the key stays revoked")
        let bootstrap = configuration.bootstrapAdminKey ?? ""
        try await second.application(deliveryWorkers: false).test(.router) { client in
            let response = try await client.execute(
                uri: "/api/notifications/\(ObjectIDGenerator().next())", method: .get, headers: [.authorization: "Bearer \(bootstrap)"])
            #expect(response.status == .unauthorized)
        }
        await second.close()
    }
}
