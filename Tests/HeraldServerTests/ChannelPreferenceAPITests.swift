import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// Users choose their channels (docs/routing.md, "Channels and preferences"): per type, per
/// channel, the operator's defaults and critical types, and an explanation for every decision.
@Suite(.cleansUp) struct ChannelPreferenceAPITests {
    /// A server with the recording `fcm` push sink, a user-facing `chat` sink that comments and
    /// alerts go to, an operator's `audit` sink for alerts, `alert` critical and upvote pushes
    /// off by default.
    static func make() async throws -> (TestHerald, chat: RecordingSink, audit: RecordingSink) {
        let chat = RecordingSink(name: "chat", capabilities: .perUser, channel: SinkChannel("chat"))
        let audit = RecordingSink(name: "audit", capabilities: .perUser)
        let herald = try await TestHerald.make(extraSinks: [chat, audit]) { configuration in
            configuration.routing = ["type=comment,alert,upvote => +chat", "type=alert => +audit"]
            configuration.preferences = ChannelPreferences(defaults: ["upvote": ["push": false]], critical: ["alert"])
        }
        return (herald, chat, audit)
    }

    @Test func settingsShowChannelsPreferencesAndLocksAndPatchesMergeThem() async throws {
        let (herald, _, _) = try await Self.make()
        try await herald.test { client in
            let initial = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "ann"))
            #expect(initial.status == .ok)
            #expect(initial.object["channels"] as? [String: Bool] == ["push": true, "chat": true], "every channel users choose here")
            #expect((initial.object["preferences"] as? [String: Any])?.isEmpty == true)
            #expect(
                initial.object["locked"] as? [[String: String]] == [["type": "alert", "channel": "chat"], ["type": "alert", "channel": "push"]])
            #expect((initial.object["types"] as? [String: Bool])?.isEmpty == true, "Pong's members are all there")

            let patched = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "ann"),
                json: ["preferences": ["comment": ["chat": false, "push": true]], "channels": ["chat": true]])
            #expect(patched.status == .ok, "\(patched.object)")
            #expect(patched.object["types"] as? [String: Bool] == ["comment": true], "preferences.<t>.push is types.<t>")
            #expect((patched.object["preferences"] as? [String: [String: Bool]]) == ["comment": ["chat": false, "push": true]])
            let viaTypes = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["types": ["comment": false]])
            #expect((viaTypes.object["preferences"] as? [String: [String: Bool]]) == ["comment": ["chat": false, "push": false]])
            let again = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "ann"))
            #expect(NSDictionary(dictionary: again.object) == NSDictionary(dictionary: viaTypes.object), "stored exactly as answered")

            for (body, status, field) in [
                (["channels": ["sms": true]], 422, "channels.sms"),
                (["channels": ["in_app": false]], 422, "channels.in_app"),
                (["preferences": ["comment": ["sms": false]]], 422, "preferences.comment.sms"),
                (["preferences": ["alert": ["chat": false]]], 422, "preferences.alert.chat"),
                (["types": ["alert": false]], 422, "types.alert"),
                (["preferences": ["nope": ["chat": false]]], 400, "preferences"),
                (["channels": ["chat": "off"]], 422, "channels.chat"),
                (["locked": []], 422, "locked"),
            ] as [([String: Any], Int, String)] {
                let refused = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: body)
                #expect(Int(refused.status.code) == status, "\(body): \(refused.object)")
                let message = (refused.object["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains(field), "\(body): \(message)")
            }
            let unchanged = try await client.call(.get, "/api/notifications/settings", headers(herald.backend, user: "ann"))
            #expect(NSDictionary(dictionary: unchanged.object) == NSDictionary(dictionary: viaTypes.object), "a refused patch changes nothing")
        }
    }

    @Test func everySinkObeysTheUsersChannelChoicesAndCriticalTypesReachEveryChannel() async throws {
        let (herald, chat, audit) = try await Self.make()
        try await herald.test { client in
            for user in ["ann", "bob"] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: ["fcm_token": "tok-\(user)"])
            }
            // Ann: comments on her phone, not in chat. Bob keeps the defaults.
            _ = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["preferences": ["comment": ["chat": false]]])
            _ = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann", "bob"]])
            try await herald.deliver()
            #expect(Set(herald.push.received.map(\.recipient.userID)) == ["ann", "bob"])
            #expect(chat.received.map(\.recipient.userID) == ["bob"], "Ann turned chat off for comments")

            // Ann turns chat off altogether and push off: a critical alert still reaches both, and
            // the operator's audit sink gets it whatever anyone chose.
            _ = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["channels": ["chat": false], "enabled": false])
            _ = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "alert", "title": "a", "user_ids": ["ann"]])
            try await herald.deliver()
            #expect(herald.push.received.filter { $0.notification.type == "alert" }.map(\.recipient.userID) == ["ann"])
            #expect(chat.received.filter { $0.notification.type == "alert" }.map(\.recipient.userID) == ["ann"])
            #expect(audit.received.map(\.recipient.userID) == ["ann"])

            // The operator's default: no upvote pushes, unless the user turns them on.
            _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "bob"), json: ["types": ["upvote": true]])
            _ = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "upvote", "title": "u", "user_ids": ["ann", "bob", "cat"]])
            try await herald.deliver()
            #expect(herald.push.received.filter { $0.notification.type == "upvote" }.map(\.recipient.userID) == ["bob"])
            #expect(
                Set(chat.received.filter { $0.notification.type == "upvote" }.map(\.recipient.userID)) == ["bob", "cat"],
                "the default is for push only; Ann turned chat off")
        }
    }

    @Test func anExplanationListsEverySinkWithItsReasonsAndTheDevices() async throws {
        let (herald, _, _) = try await Self.make()
        try await herald.test { client in
            let device = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-ann"])
            _ = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["preferences": ["comment": ["chat": false]]])
            let answer = try await client.call(
                .post, "/api/notifications/explain", headers(herald.backend),
                json: ["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "ann"])
            #expect(answer.status == .ok, "\(answer.object)")
            #expect(answer.object["recipient"] as? Bool == true)
            let sinks = try #require(answer.object["sinks"] as? [[String: Any]])
            let byName = Dictionary(uniqueKeysWithValues: sinks.compactMap { s in (s["sink"] as? String).map { ($0, s) } })
            #expect(Set(byName.keys) == ["history", "feed", "fcm", "chat", "audit"], "every configured sink")
            #expect(byName["fcm"]?["chosen"] as? Bool == true)
            #expect(byName["fcm"]?["devices"] as? [String] == [device.object["device_id"] as? String ?? ""])
            #expect(byName["chat"]?["chosen"] as? Bool == false)
            #expect(byName["chat"]?["channel"] as? String == "chat")
            let chatReasons = try #require(byName["chat"]?["reasons"] as? [[String: Any]])
            #expect(chatReasons.contains { $0["step"] as? String == "routing_rule" && $0["source"] as? String == "operator" })
            let last = try #require(chatReasons.last)
            #expect(last["step"] as? String == "type_channel" && last["value"] as? Bool == false && last["source"] as? String == "user")
            #expect(byName["audit"]?["user_facing"] as? Bool == false && byName["audit"]?["chosen"] as? Bool == false)
            let devices = try #require(answer.object["devices"] as? [[String: Any]])
            #expect(devices.first?["sink"] as? String == "fcm" && devices.first?["provider"] as? String == "fcm")

            let critical = try await client.call(
                .post, "/api/notifications/explain", headers(herald.backend), json: ["type": "alert", "title": "a", "user_ids": ["ann"], "user_id": "ann"])
            let criticalSinks = try #require(critical.object["sinks"] as? [[String: Any]])
            let criticalChat = try #require(criticalSinks.first { $0["sink"] as? String == "chat" })
            #expect(criticalChat["chosen"] as? Bool == true)
            #expect((criticalChat["reasons"] as? [[String: Any]])?.contains { $0["step"] as? String == "critical" } == true)

            let other = try await client.call(
                .post, "/api/notifications/explain", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["bob"], "user_id": "ann"])
            #expect(other.object["recipient"] as? Bool == false)
            let otherSinks = try #require(other.object["sinks"] as? [[String: Any]])
            #expect(otherSinks.allSatisfy { $0["chosen"] as? Bool == false })
            #expect((otherSinks.first?["reasons"] as? [[String: Any]])?.first?["step"] as? String == "not_targeted")

            #expect(try await herald.server.store.history(userID: "ann", limit: 10, before: nil).items.isEmpty, "nothing was stored")
            #expect(herald.push.received.isEmpty, "nothing was sent")

            for (body, status) in [
                (["type": "comment", "title": "c", "user_ids": ["ann"]], 422),
                (["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": 7], 422),
                (["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "a b"], 422),
                (
                    [
                        "type": "comment", "title": "c", "topic": "\(ObjectIDGenerator().next())-\(ObjectIDGenerator().next())-\(ObjectIDGenerator().next())",
                        "user_id": "ann",
                    ], 404
                ),
                (["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "ann", "extra": 1], 422),
            ] as [([String: Any], Int)] {
                let refused = try await client.call(.post, "/api/notifications/explain", headers(herald.backend), json: body)
                #expect(Int(refused.status.code) == status, "\(body): \(refused.object)")
            }
            let user = try await client.call(
                .post, "/api/notifications/explain", headers(try await herald.userToken("ann")),
                json: ["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "ann"])
            #expect(user.status == .forbidden, "backend and admin keys only")
        }
    }

    @Test func aForcedSubjectsMessagesAreCriticalOnPush() async throws {
        let herald = try await TestHerald.make()
        let topics = try await TopicTree.make(in: herald.server.store, ids: ObjectIDGenerator())
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "tok-ann"])
            _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["enabled": false])
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "c", "topic": topics.forced.topicKey])
            #expect(sent.status == .accepted, "\(sent.object)")
            try await herald.deliver()
            #expect(herald.push.received.map(\.recipient.userID) == ["ann"], "a Forced subject reaches the phone of a user who turned push off")
        }
    }

    @Test func anAcceptedNotificationIsExplainedPerRecipientWithItsDeliveries() async throws {
        let (herald, _, _) = try await Self.make()
        try await herald.test { client in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-ann"])
            _ = try await client.call(
                .patch, "/api/notifications/settings", headers(herald.backend, user: "ann"), json: ["preferences": ["comment": ["chat": false]]])
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann", "bob"]])
            let id = try #require(sent.object["id"] as? String)
            try await herald.deliver()
            let ann = try await client.call(.get, "/api/notifications/\(id)/recipients/ann", headers(herald.backend, contentType: nil))
            #expect(ann.status == .ok, "\(ann.object)")
            #expect(ann.object["notification_id"] as? String == id && ann.object["recipient"] as? Bool == true)
            let deliveries = try #require(ann.object["deliveries"] as? [[String: Any]])
            #expect(Set(deliveries.compactMap { $0["sink"] as? String }) == ["history", "fcm"])
            #expect(deliveries.allSatisfy { $0["state"] as? String == "delivered" && $0["attempts"] as? Int == 1 }, "\(deliveries)")
            let chat = (ann.object["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "chat" }
            #expect(chat?["chosen"] as? Bool == false)
            #expect((chat?["reasons"] as? [[String: Any]])?.last?["step"] as? String == "type_channel")
            let bob = try await client.call(.get, "/api/notifications/\(id)/recipients/bob", headers(herald.backend, contentType: nil))
            #expect(Set((bob.object["deliveries"] as? [[String: Any]] ?? []).compactMap { $0["sink"] as? String }) == ["history", "chat"])
            let outsider = try await client.call(.get, "/api/notifications/\(id)/recipients/zed", headers(herald.backend, contentType: nil))
            #expect(outsider.object["recipient"] as? Bool == false && (outsider.object["deliveries"] as? [Any])?.isEmpty == true)

            for (path, status) in [
                ("/api/notifications/\(ObjectIDGenerator().next())/recipients/ann", 404), ("/api/notifications/nope/recipients/ann", 404),
                ("/api/notifications/\(id)/recipients/a%20b", 422), ("/api/notifications/\(id)/recipients/%E9", 422),
            ] {
                let refused = try await client.call(.get, path, headers(herald.backend, contentType: nil))
                #expect(Int(refused.status.code) == status, "\(path): \(refused.object)")
            }
            let communicator = try await client.call(.get, "/api/notifications/\(id)/recipients/ann", headers(herald.communicator, contentType: nil))
            #expect(communicator.status == .forbidden)
        }
    }

    /// An accepted notification is explained as it was decided: a settings change since, or a
    /// server restarted with other rules, does not rewrite why it went where it went.
    @Test func anAcceptedNotificationIsExplainedWithTheInputsItWasDecidedOn() async throws {
        let database = "sqlite:" + (try TestResources.temporaryDirectory("herald-why")).appendingPathComponent("herald.sqlite").path
        let chat = RecordingSink(name: "chat", capabilities: .perUser, channel: SinkChannel("chat"))
        let first = try await TestHerald.make(extraSinks: [chat]) { configuration in
            configuration.database = database
            configuration.routing = ["type=comment => +chat"]
        }
        let (id, routingInputs) = try await first.test { client in
            _ = try await client.call(.patch, "/api/notifications/settings", headers(first.backend, user: "ann"), json: ["channels": ["chat": false]])
            _ = try await client.call(.patch, "/api/notifications/settings", headers(first.backend, user: "bob"), json: ["channels": ["chat": true]])
            let sent = try await client.call(
                .post, "/api/notifications", headers(first.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann", "bob", "cy"]])
            let id = try #require(sent.object["id"] as? String)
            // After the accept: ann turns chat on. Her explanation stays the accept's.
            _ = try await client.call(.patch, "/api/notifications/settings", headers(first.backend, user: "ann"), json: ["channels": ["chat": true]])
            let ann = try await client.call(.get, "/api/notifications/\(id)/recipients/ann", headers(first.backend, contentType: nil))
            let annChat = (ann.object["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "chat" }
            #expect(annChat?["chosen"] as? Bool == false, "\(ann.object)")
            #expect((annChat?["reasons"] as? [[String: Any]])?.last?["step"] as? String == "channel_switch")
            let decided = try #require(ann.object["decided_with"] as? [String: Any])
            #expect(decided["settings"] as? String == "saved" && decided["settings_saved_at"] is String)
            let routingInputs = try #require(decided["routing_inputs"] as? String)
            let cy = try await client.call(.get, "/api/notifications/\(id)/recipients/cy", headers(first.backend, contentType: nil))
            #expect((cy.object["decided_with"] as? [String: Any])?["settings"] as? String == "defaults")
            #expect((cy.object["decided_with"] as? [String: Any])?["settings_saved_at"] is NSNull)
            let explained = try await client.call(
                .post, "/api/notifications/explain", headers(first.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "ann"])
            #expect(explained.object["decided_with"] == nil, "a send explained is decided with what is in force now")
            return (id, routingInputs)
        }
        await first.server.close()

        // The same database under other rules: chat is no longer added to comments.
        let second = try await TestHerald.make(extraSinks: [RecordingSink(name: "chat", capabilities: .perUser, channel: SinkChannel("chat"))]) {
            configuration in
            configuration.database = database
        }
        try await second.test { client in
            let bob = try await client.call(.get, "/api/notifications/\(id)/recipients/bob", headers(second.backend, contentType: nil))
            #expect(bob.status == .ok, "\(bob.object)")
            #expect((bob.object["decided_with"] as? [String: Any])?["routing_inputs"] as? String == routingInputs)
            let bobChat = (bob.object["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "chat" }
            #expect(bobChat?["chosen"] as? Bool == true, "the rule in force at the accept added chat: \(bob.object)")
            #expect((bobChat?["reasons"] as? [[String: Any]])?.contains { $0["detail"] as? String == "type=comment => +chat" } == true)
            // A send explained now is decided by today's rules.
            let now = try await client.call(
                .post, "/api/notifications/explain", headers(second.backend), json: ["type": "comment", "title": "c", "user_ids": ["bob"], "user_id": "bob"])
            let nowChat = (now.object["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "chat" }
            #expect(nowChat?["chosen"] as? Bool == false)
        }
    }

    /// `device_limit`: a user at `devices.max_per_user` is told registering another removes the
    /// oldest; a push that failed because its device was removed so says why.
    @Test func theDeviceLimitIsAReason() async throws {
        let herald = try await TestHerald.make { $0.maxDevicesPerUser = 2 }
        try await herald.test { client in
            for token in ["t-1", "t-2"] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": token])
            }
            func fcmReasons(_ answer: [String: Any]) -> [[String: Any]] {
                ((answer["sinks"] as? [[String: Any]])?.first { $0["sink"] as? String == "fcm" }?["reasons"] as? [[String: Any]]) ?? []
            }
            let atLimit = try await client.call(
                .post, "/api/notifications/explain", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann"], "user_id": "ann"])
            let limit = fcmReasons(atLimit.object).first { $0["step"] as? String == "device_limit" }
            #expect(limit?["value"] as? Bool == true && (limit?["detail"] as? String)?.contains("removes the oldest") == true, "\(atLimit.object)")

            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann"]])
            let id = try #require(sent.object["id"] as? String)
            // A third device before the pushes went out: the oldest goes, and its push fails.
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-3"])
            let accepted = try await client.call(.get, "/api/notifications/\(id)/recipients/ann", headers(herald.backend, contentType: nil))
            let removed = fcmReasons(accepted.object).first { $0["step"] as? String == "device_limit" }
            #expect(
                removed?["value"] as? Bool == false && (removed?["detail"] as? String)?.hasPrefix("1 of the user's devices was removed") == true,
                "\(accepted.object)")
        }
    }
}
