import Crypto
import Foundation
public import HeraldCore
import NIOSSL

extension SinkFactory {
    /// `sinks.<name>.type: apns`: `key_file` (the `.p8` file), `key_id`, `team_id`, `topic`
    /// (the app's bundle id), all required; `environment` (`production` or `sandbox`, default
    /// production: for devices registered without one), `production_endpoint`,
    /// `sandbox_endpoint` (Apple's hosts by default), `ca_file` (extra certificates to trust:
    /// the emulator's), `max_concurrency` (1-1024, default 64).
    public static let apns = SinkFactory(type: "apns", registrationForms: [.apns]) { context in
        let settings = context.settings
        let keyFile = try settings.requiredString("key_file")
        guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else { throw settings.invalid("key_file", "cannot be read") }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw settings.invalid("key_file", "is not a .p8 (PKCS#8 P-256) private key")
        }
        var configuration = APNsSink.Configuration(
            key: key, keyID: try settings.requiredString("key_id"), teamID: try settings.requiredString("team_id"), topic: try settings.requiredString("topic")
        )
        if let environment = try settings.string("environment") {
            guard let value = APNsSink.Environment(rawValue: environment) else { throw settings.invalid("environment", "must be production or sandbox") }
            configuration.defaultEnvironment = value
        }
        for (key, keyPath) in [("production_endpoint", \APNsSink.Configuration.productionEndpoint), ("sandbox_endpoint", \.sandboxEndpoint)] {
            if let endpoint = try settings.string(key) {
                if let problem = HTTPURL.problem(endpoint, schemes: ["https"]) { throw settings.invalid(key, "\(problem) (APNs speaks HTTP/2 over TLS only)") }
                var trimmed = endpoint
                while trimmed.hasSuffix("/") { trimmed.removeLast() }
                configuration[keyPath: keyPath] = trimmed
            }
        }
        if let caFile = try settings.readableFile("ca_file") {
            // Refused here rather than by every TLS handshake after a start that looked fine.
            guard (try? NIOSSLCertificate.fromPEMFile(caFile))?.isEmpty == false else { throw settings.invalid("ca_file", "holds no PEM certificate") }
            configuration.caFile = caFile
        }
        configuration.maxConcurrency = try settings.int("max_concurrency", default: configuration.maxConcurrency, in: 1...1_024)
        return try await APNsSink(name: context.name, configuration: configuration, logger: context.logger)
    }
}

extension RegistrationForm {
    /// `{"apns_token": "…", "apns_environment": "production|sandbox"}`. A token in hex is keyed
    /// in lower case: it is the hex of the device's bytes, which APNs reads in either case, and
    /// apps change how they write it (an SDK that began upper-casing it), so keyed as sent one
    /// device registered both ways was two devices and got every push twice. The address itself
    /// stays as sent. Declared here rather than in the sink's `prepare`: a device registered
    /// while no APNs sink is configured is kept too, and must be keyed alike.
    public static let apns = RegistrationForm(
        provider: "apns", field: "apns_token", options: [Option(field: "apns_environment", option: "environment", allowed: ["production", "sandbox"])],
        key: { token in
            token.utf8.allSatisfy { (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0) } ? token.lowercased() : token
        }
    )
}
