import Foundation
public import HeraldCore

extension SinkFactory {
    /// `sinks.<name>.type: webpush`: `vapid_private_key` (base64url, from `herald vapid
    /// generate`; required), `subject` (`mailto:` or `https:` contact; required), `ttl` (seconds
    /// a push service keeps a message without `expires_at`, 0-2419200, default 86400),
    /// `max_concurrency` (1-1024, default 64), `timeout` (seconds a send may take, 0.1-300,
    /// default 15), `allow_private_endpoints` (default false:
    /// subscriptions at loopback, private or link-local addresses are refused; true for a push
    /// service emulator on this machine), `credential_witnesses` (push service hosts whose
    /// refusals can prove the VAPID key wrong; `.suffix` entries match subdomains; default the
    /// browsers' own, ``WebPushSink/Configuration/browserPushServices``).
    public static let webpush = SinkFactory(type: "webpush", registrationForms: [.webPush]) { context in
        let settings = context.settings
        let vapid: VAPIDKey
        do {
            vapid = try VAPIDKey(base64URL: try settings.requiredString("vapid_private_key", isSecret: true))
        } catch let error as VAPIDError {
            throw settings.invalid("vapid_private_key", error.description.replacingOccurrences(of: "the VAPID private key ", with: ""))
        }
        let subject = try settings.requiredString("subject")
        guard subject.hasPrefix("mailto:") || subject.hasPrefix("https://") else {
            throw settings.invalid("subject", "must be a mailto: or https: contact for push services")
        }
        var configuration = WebPushSink.Configuration(vapid: vapid, subject: subject)
        configuration.ttl = try settings.int("ttl", default: configuration.ttl, in: 0...2_419_200)
        configuration.maxConcurrency = try settings.int("max_concurrency", default: configuration.maxConcurrency, in: 1...1_024)
        let timeout = try settings.double("timeout") ?? configuration.timeout.seconds
        guard timeout >= 0.1, timeout <= 300 else { throw settings.invalid("timeout", "must be a number of seconds, 0.1-300") }
        configuration.timeout = .saturating(seconds: timeout)
        configuration.allowsPrivateEndpoints = try settings.bool("allow_private_endpoints") ?? false
        if let witnesses = try settings.stringList("credential_witnesses") {
            guard !witnesses.isEmpty, witnesses.allSatisfy({ !$0.isEmpty && !$0.contains("/") && !$0.contains(" ") }) else {
                throw settings.invalid("credential_witnesses", "must list push service host names (fcm.googleapis.com, .notify.windows.com)")
            }
            configuration.credentialWitnesses = Set(witnesses.map { $0.lowercased() })
        }
        return WebPushSink(name: context.name, configuration: configuration, logger: context.logger)
    }
}

extension RegistrationForm {
    /// `{"web_push": {"endpoint", "keys": {"p256dh", "auth"}}}`: a browser's
    /// `PushSubscription.toJSON()`. Its shape is checked even while no Web Push sink is
    /// configured; the sink checks the rest (an https push service, the keys' lengths).
    public static let webPush = RegistrationForm(
        provider: "webpush", field: "web_push",
        address: .object { value, field in
            let shape = "must be a subscription object {endpoint, keys: {p256dh, auth}}"
            guard let fields = value.objectValue else { throw HeraldError.invalidField(field, shape) }
            guard let endpoint = fields["endpoint"]?.stringValue else { throw HeraldError.invalidField("\(field).endpoint", "must be a URL string") }
            guard let url = URLComponents(string: endpoint), let scheme = url.scheme, !scheme.isEmpty else {
                throw HeraldError.invalidField("\(field).endpoint", "must be an absolute URL")
            }
            guard let keys = fields["keys"]?.objectValue else { throw HeraldError.invalidField("\(field).keys", "must be an object {p256dh, auth}") }
            for name in ["p256dh", "auth"] where keys[name]?.stringValue == nil {
                throw HeraldError.invalidField("\(field).keys.\(name)", "must be a string")
            }
        })
}
