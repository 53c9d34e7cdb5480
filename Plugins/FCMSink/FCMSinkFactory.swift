public import HeraldCore
import NIOSSL

extension SinkFactory {
    /// `sinks.<name>.type: fcm`: `credentials` (path to a Google service-account JSON file,
    /// required), `endpoint` (default `https://fcm.googleapis.com`), `max_concurrency`
    /// (1-1024, default 64), `connections` (HTTP/2 connections to an `https` endpoint, 1-64;
    /// default one per 100 of `max_concurrency`, FCM's stream limit per connection),
    /// `iid_endpoint` (the Instance ID API for topic membership: by default
    /// `https://iid.googleapis.com` with Google's `endpoint`, else `endpoint` itself), `ca_file`
    /// (extra certificates to trust for an `https` endpoint: the emulator's). For the
    /// instance named `fcm`, the top-level `fcm:` section is a
    /// documented alias (`sinks.fcm` wins when both give a key).
    public static let fcm = SinkFactory(type: "fcm", registrationForms: [.fcm], shorthand: .fcm) { context in
        let settings = context.settings
        let credentials = try settings.requiredString("credentials")
        let endpoint = try settings.string("endpoint") ?? "https://fcm.googleapis.com"
        if let problem = HTTPURL.problem(endpoint) { throw settings.invalid("endpoint", problem) }
        let maxConcurrency = try settings.int("max_concurrency", default: 64, in: 1...1024)
        let connections = try settings.int("connections")
        if let connections, !(1...64).contains(connections) { throw settings.invalid("connections", "must be 1-64") }
        // An emulator or a proxy in place of FCM serves the Instance ID API too; Google splits them.
        let iidEndpoint = try settings.string("iid_endpoint") ?? (endpoint == "https://fcm.googleapis.com" ? "https://iid.googleapis.com" : endpoint)
        if let problem = HTTPURL.problem(iidEndpoint) { throw settings.invalid("iid_endpoint", problem) }
        let caFile = try settings.readableFile("ca_file")
        if let caFile {
            guard (try? NIOSSLCertificate.fromPEMFile(caFile))?.isEmpty == false else { throw settings.invalid("ca_file", "holds no PEM certificate") }
        }
        let account: ServiceAccount
        do {
            account = try ServiceAccount.load(path: credentials)
        } catch let error as FCMError {
            throw settings.invalid("credentials", "is not usable: \(error.description)")
        }
        var configuration = FCMConfiguration(account: account, endpoint: endpoint, maxConcurrency: maxConcurrency)
        configuration.connections = connections
        configuration.iidEndpoint = iidEndpoint
        configuration.caFile = caFile
        configuration.timestamps = context.timestamps
        do {
            return try await FCMSink(name: context.name, configuration: configuration, logger: context.logger, metrics: context.metrics)
        } catch let error as FCMError {
            throw settings.invalid("credentials", "is not usable: \(error.description)")
        }
    }
}

extension RegistrationForm {
    /// `{"fcm_token": "…"}`: the registration token, as Pong and every FCM app send it.
    public static let fcm = RegistrationForm(provider: "fcm", field: "fcm_token")
}

extension SinkShorthand {
    /// `fcm.credentials` (or `sinks.fcm.credentials`) declares the instance `fcm`; the `fcm:`
    /// section is an alias of `sinks.fcm` (`sinks.fcm` wins when both give a key), read from
    /// the environment as `HERALD_FCM_*`; and `GOOGLE_APPLICATION_CREDENTIALS`, which every
    /// Google client reads, stands for `fcm.credentials` when nothing else names one.
    /// `topics.manage_fcm_membership`, the first name of `topics.manage_membership`, still works.
    public static let fcm = SinkShorthand(
        section: "fcm", declaringKey: "credentials", fallback: ("GOOGLE_APPLICATION_CREDENTIALS", "credentials"),
        keyAliases: [("topics.manage_fcm_membership", "topics.manage_membership")]
    )
}
