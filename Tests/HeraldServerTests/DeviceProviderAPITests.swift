import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// `POST/DELETE /api/notifications/register` for every provider, and the router handing each
/// push sink only the devices it serves.
@Suite(.cleansUp) struct DeviceProviderAPITests {
    nonisolated(unsafe) static let subscription: [String: Any] = ["endpoint": "https://push.example/send/abc", "keys": ["p256dh": "BPk", "auth": "au"]]

    /// A server with the recording FCM stand-in (`fcm`), an APNs stand-in and a Web Push stand-in.
    static func make() async throws -> (TestHerald, apns: RecordingSink, webPush: RecordingSink) {
        let apns = RecordingSink(name: "apns", capabilities: .push, providers: .only(["apns"]))
        let webPush = RecordingSink(name: "webpush", capabilities: .push, providers: .only(["webpush"]))
        return (try await TestHerald.make(extraSinks: [apns, webPush]), apns, webPush)
    }

    /// A provider added outside Herald brings its own registration field on its factory
    /// (``RegistrationForm``): apps register `{"pager_id": "…", "pager_tone": "…"}`, the answer
    /// echoes both, and its sink gets the device's pushes; no server code names it.
    @Test func anOutsideProviderRegistersWithItsOwnField() async throws {
        let form = RegistrationForm(
            provider: "pager", field: "pager_id", options: [.init(field: "pager_tone", option: "tone", allowed: ["beep", "chime"])], key: { $0.uppercased() })
        let pagerType = SinkFactory(type: "pager", registrationForms: [form]) { _ in RecordingSink(name: "unused", capabilities: .push) }
        let pager = RecordingSink(name: "pager", capabilities: .push, providers: .only(["pager"]))
        let herald = try await TestHerald.make(extraSinks: [pager], factories: SinkFactory.builtIn + [pagerType])
        try await herald.test { client in
            let user = headers(herald.backend, user: "u")
            let registered = try await client.call(.post, "/api/notifications/register", user, json: ["pager_id": "p-1", "pager_tone": "chime"])
            #expect(registered.status == .ok, "\(registered.errorMessage)")
            #expect(Set(registered.object.keys) == ["device_id", "provider", "pager_id", "pager_tone"])
            #expect(registered.object["provider"] as? String == "pager" && registered.object["pager_id"] as? String == "p-1")
            #expect(registered.object["pager_tone"] as? String == "chime")
            let device = try #require(try await herald.server.store.devices(userID: "u").first)
            #expect(device.address.key == "P-1" && device.options["tone"] == "chime", "keyed by the provider's own rule")
            // The general form keys it the same way: the same device, not a second one.
            let again = try await client.call(.post, "/api/notifications/register", user, json: ["provider": "pager", "address": "p-1"])
            let devices = try await herald.server.store.devices(userID: "u")
            #expect(again.status == .ok && devices.count == 1)
            let refused = try await client.call(.post, "/api/notifications/register", user, json: ["pager_id": "p-2", "pager_tone": "siren"])
            #expect(refused.status == .unprocessableContent && refused.errorMessage.contains("pager_tone") && refused.errorMessage.contains("beep or chime"))
            let both = try await client.call(.post, "/api/notifications/register", user, json: ["pager_id": "p-2", "fcm_token": "f"])
            #expect(both.errorCode == "ambiguous_address" && both.errorMessage.contains("pager_id"), "\(both.errorMessage)")

            let sent = try await client.call(.post, "/api/notifications", headers(herald.backend), json: ["type": "generic", "title": "t", "user_ids": ["u"]])
            #expect(sent.status == .accepted)
            try await herald.deliver()
            #expect(pager.received.compactMap { $0.recipient.device?.token } == ["p-1"])
        }
    }

    /// Two sink types claiming one registration field, or a form taking a field every
    /// registration has, is the sink author's mistake: the server refuses to start, naming both.
    @Test func aRegistrationFieldClaimedTwiceStopsTheServer() async throws {
        let copy = SinkFactory(type: "fcm-copy", registrationForms: [RegistrationForm(provider: "fcm2", field: "fcm_token")]) { _ in
            RecordingSink(name: "unused", capabilities: .push)
        }
        let app = SinkFactory(type: "odd", registrationForms: [RegistrationForm(provider: "odd", field: "app")]) { _ in
            RecordingSink(name: "unused", capabilities: .push)
        }
        for (factory, said) in [(copy, "sink type 'fcm' already uses"), (app, "every registration already uses")] {
            do {
                _ = try await TestHerald.make(factories: SinkFactory.builtIn + [factory])
                Issue.record("started with \(factory.type)")
            } catch let error as HeraldError {
                #expect(error.code == "invalid_config" && error.message.contains(said), "\(error.message)")
            }
        }
    }

    @Test func everyAddressFormRegistersAndAnswersAsSent() async throws {
        let (herald, _, _) = try await Self.make()
        try await herald.test { client in
            let user = headers(herald.backend, user: "u")
            let fcm = try await client.call(.post, "/api/notifications/register", user, json: ["fcm_token": "f-1", "extra": "ignored"])
            #expect(fcm.status == .ok)
            #expect(Set(fcm.object.keys) == ["device_id", "provider", "fcm_token"])
            #expect(fcm.object["fcm_token"] as? String == "f-1" && fcm.object["provider"] as? String == "fcm")

            let apns = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "a-1", "apns_environment": "sandbox"])
            #expect(apns.status == .ok)
            #expect(apns.object["apns_token"] as? String == "a-1" && apns.object["provider"] as? String == "apns")
            #expect(apns.object["apns_environment"] as? String == "sandbox")

            let web = try await client.call(.post, "/api/notifications/register", user, json: ["web_push": Self.subscription])
            #expect(web.status == .ok)
            #expect(web.object["provider"] as? String == "webpush")
            #expect((web.object["web_push"] as? [String: Any])?["endpoint"] as? String == "https://push.example/send/abc")

            let general = try await client.call(.post, "/api/notifications/register", user, json: ["provider": "pager", "address": "pg-7"])
            #expect(general.status == .ok, "a provider no sink serves yet is kept for when one is")
            #expect(general.object["address"] as? String == "pg-7" && general.object["provider"] as? String == "pager")

            let devices = try await herald.server.store.devices(userID: "u")
            #expect(devices.map(\.provider) == ["fcm", "apns", "webpush", "pager"])
            #expect(devices[1].options["environment"] == "sandbox")

            // Registering the same Web Push subscription again is the same device.
            let again = try await client.call(.post, "/api/notifications/register", user, json: ["web_push": Self.subscription])
            #expect(again.object["device_id"] as? String == web.object["device_id"] as? String)

            // DELETE takes the same forms; removing one provider's device leaves the others.
            let gone = try await client.call(.delete, "/api/notifications/register", user, json: ["apns_token": "a-1"])
            #expect(gone.status == .noContent)
            let webGone = try await client.call(.delete, "/api/notifications/register", user, json: ["web_push": Self.subscription])
            #expect(webGone.status == .noContent)
            #expect(try await herald.server.store.devices(userID: "u").map(\.provider) == ["fcm", "pager"])
        }
    }

    /// An APNs token is the hex of the device's bytes, which APNs reads in either case: an app
    /// whose SDK began upper-casing it registers the same device again, and it stays one device
    /// (one push each), answered and sent as last written. FCM tokens are case-sensitive.
    @Test func anAPNsTokenInAnotherLetterCaseIsTheSameDevice() async throws {
        let (herald, apns, _) = try await Self.make()
        try await herald.test { client in
            let user = headers(herald.backend, user: "u")
            let lower = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "ab12cd34ef"])
            let upper = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "AB12CD34EF"])
            #expect(upper.status == .ok && upper.object["apns_token"] as? String == "AB12CD34EF", "answered as sent")
            #expect(upper.object["device_id"] as? String == lower.object["device_id"] as? String)
            let scripted = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "Not-Hex"])
            let otherScripted = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "not-hex"])
            #expect(scripted.object["device_id"] as? String != otherScripted.object["device_id"] as? String, "only hex is read in either case")
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["fcm_token": "AB12CD34EF"])
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["fcm_token": "ab12cd34ef"])
            let devices = try await herald.server.store.devices(userID: "u")
            #expect(devices.filter { $0.provider == "apns" }.map(\.token) == ["AB12CD34EF", "Not-Hex", "not-hex"])
            #expect(devices.filter { $0.provider == "fcm" }.count == 2)

            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "generic", "title": "t", "user_ids": ["u"]])
            #expect(send.status == .accepted)
            try await herald.deliver()
            #expect(apns.received.compactMap { $0.recipient.device?.token }.sorted() == ["AB12CD34EF", "Not-Hex", "not-hex"], "one push per device")

            let gone = try await client.call(.delete, "/api/notifications/register", user, json: ["apns_token": "ab12CD34ef"])
            #expect(gone.status == .noContent)
            #expect(try await herald.server.store.devices(userID: "u").filter { $0.provider == "apns" }.map(\.token) == ["Not-Hex", "not-hex"])
        }
    }

    @Test(arguments: [
        (js(["fcm_token": "f", "apns_token": "a"]), "ambiguous_address", "fcm_token and apns_token"),
        (js(["fcm_token": "f", "provider": "x", "address": "y"]), "ambiguous_address", "fcm_token and address"),
        (js(["apns_token": "a", "apns_environment": "staging"]), "invalid_field", "apns_environment"),
        (js(["fcm_token": "f", "apns_environment": "sandbox"]), "invalid_field", "apns_environment"),
        (js(["apns_token": 7]), "invalid_field", "apns_token"),
        (js(["web_push": "https://push.example"]), "invalid_field", "web_push"),
        (js(["provider": "Bad Provider", "address": "x"]), "invalid_field", "provider"),
        (js(["provider": "pager"]), "missing_field", "address"),
        (js(["address": "x"]), "missing_field", "provider"),
        (js(["provider": "pager", "address": ["a", "b"]]), "invalid_field", "address"),
        (js(["provider": "pager", "address": ""]), "invalid_field", "address"),
        (js(["fcm_token": "f", "app": "apns"]), "invalid_field", "app"),
        (js(["fcm_token": "f", "app": "nowhere"]), "invalid_field", "app"),
        (js(["fcm_token": "f", "platform": String(repeating: "p", count: 65)]), "invalid_field", "platform"),
    ])
    func badRegistrationsAreRefusedNamingTheField(_ body: String, _ code: String, _ field: String) async throws {
        let (herald, _, _) = try await Self.make()
        try await herald.test { client in
            let response = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "u"), json: body)
            #expect(response.status == .unprocessableContent, "\(body)")
            #expect(response.errorCode == code, "\(body): \(response.errorMessage)")
            #expect(response.errorMessage.contains(field), "\(body): \(response.errorMessage)")
            #expect(try await herald.server.store.devices(userID: "u").isEmpty)
        }
    }

    /// One user with an FCM, an APNs and a Web Push device gets exactly one push on each sink,
    /// each with its own device; a gone APNs token removes that device only.
    @Test func eachPushSinkGetsOnlyItsProvidersDevices() async throws {
        let (herald, apns, webPush) = try await Self.make()
        apns.script([.recipientGone(reason: "410 Unregistered")])
        try await herald.test { client in
            let user = headers(herald.backend, user: "u")
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["fcm_token": "same"])
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["apns_token": "same"])
            _ = try await client.call(.post, "/api/notifications/register", user, json: ["web_push": Self.subscription])
            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "t", "body": "b", "user_ids": ["u"]])
            #expect(send.status == .accepted)
            try await herald.deliver()
            #expect(herald.push.received.map { $0.recipient.device?.provider } == ["fcm"])
            #expect(apns.received.map { $0.recipient.device?.provider } == ["apns"])
            #expect(webPush.received.map { $0.recipient.device?.provider } == ["webpush"])
            #expect(try await herald.server.store.devices(userID: "u").map(\.provider) == ["fcm", "webpush"], "gone from APNs removes the APNs device only")
        }
    }

    /// A Message Hub message goes to FCM as topic sends and to the APNs and Web Push devices of
    /// subscribers one by one.
    @Test func messageHubReachesSinksWithoutTopicsPerDevice() async throws {
        let (herald, apns, webPush) = try await Self.make()
        try await herald.test { client in
            let admin = headers(herald.admin)
            let channel = try await client.call(.post, "/channel", admin, json: ["name": "News", "desc": "d"])
            let channelID = try #require(channel.object["_id"] as? String)
            let area = try await client.call(.post, "/area/\(channelID)", admin, json: ["name": "Campus", "desc": "d"])
            let areaID = try #require(area.object["id"] as? String)
            let subject = try await client.call(
                .post, "/subject/\(channelID)/\(areaID)", admin, json: ["name": "Alerts", "desc": "d", "opt": ["level": "Forced", "distribution": "Alert"]]
            )
            let topic = try #require(subject.object["topic_key"] as? String)
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ios-user"), json: ["apns_token": "a-9"])
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "web-user"), json: ["web_push": Self.subscription])
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "droid"), json: ["fcm_token": "f-9"])
            let message = try await client.call(
                .post, "/message", admin,
                json: ["title": "Snow day", "desc": "Campus closed", "message": "Stay home", "topic_key": topic, "distribution": "Alert"]
            )
            #expect(message.status == .created, "\(message.object)")
            try await herald.deliver()
            #expect(herald.push.received.map(\.recipient.topic) == [topic, topic], "FCM: one topic send per component")
            #expect(apns.received.map(\.recipient.userID) == ["ios-user"])
            #expect(apns.received.first?.notification.title == "Snow day")
            #expect(webPush.received.map(\.recipient.userID) == ["web-user"])
        }
    }

    @Test func sinkHealthIsReportedAndNeverMakesTheServerUnready() async throws {
        let (herald, apns, _) = try await Self.make()
        apns.report(.degraded(reason: "the .p8 key was refused"))
        try await herald.test { client in
            let health = try await client.call(.get, "/health/sinks", headers(herald.admin, contentType: nil))
            #expect(health.status == .ok)
            #expect(health.object["status"] as? String == "degraded")
            let sinks = try #require(health.object["sinks"] as? [[String: Any]])
            #expect(sinks.map { $0["name"] as? String } == ["history", "feed", "fcm", "apns", "webpush"])
            let degraded = try #require(sinks.first { $0["name"] as? String == "apns" })
            #expect(degraded["status"] as? String == "degraded" && degraded["reason"] as? String == "the .p8 key was refused")
            #expect(sinks.first { $0["name"] as? String == "fcm" }?["status"] as? String == "ok")
            let anonymous = try await client.call(.get, "/health/sinks", headers(contentType: nil))
            #expect(anonymous.status == .unauthorized)
            let ready = try await client.call(.get, "/health/ready", headers(contentType: nil))
            #expect(ready.status == .ok, "a degraded sink never makes the replica unready")
            let metrics = try await client.call(.get, "/metrics", headers(herald.admin, contentType: nil))
            let text = String(buffer: metrics.body)
            #expect(text.contains(#"herald_sink_healthy{sink="apns"} 0"#), "\(text)")
            #expect(text.contains(#"herald_sink_healthy{sink="fcm"} 1"#))

            // A reason carrying a provider's long answer is shown bounded, as a delivery's is.
            apns.report(.degraded(reason: "token endpoint answered 400 (" + String(repeating: "x", count: 100_000) + "\u{0})"))
            let long = try await client.call(.get, "/health/sinks", headers(herald.admin, contentType: nil))
            let reason = try #require((long.object["sinks"] as? [[String: Any]])?.first { $0["name"] as? String == "apns" }?["reason"] as? String)
            #expect(reason.utf8.count <= FailureReason.maxBytes && reason.hasPrefix("token endpoint answered 400 (xx"))
        }
    }
}
