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
}
