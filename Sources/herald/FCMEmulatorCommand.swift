import ArgumentParser
import Foundation
import HeraldCore
import HeraldEmulatorSupport
import HeraldFCMEmulator

struct FCMEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm-emulator",
        abstract: "Run a local stand-in for Google's token endpoint and FCM HTTP v1.",
        discussion: """
            Writes a service account for itself, then point Herald at it:
              herald fcm-emulator --port 9099 --write-service-account fcm-emulator.json
              HERALD_FCM_CREDENTIALS=fcm-emulator.json HERALD_FCM_ENDPOINT=http://127.0.0.1:9099 herald serve
            With --tls it serves HTTP/2 over TLS, as Google does; trust its certificate:
              herald fcm-emulator --tls --write-ca fcm-ca.pem --write-service-account fcm-emulator.json
              HERALD_FCM_CREDENTIALS=fcm-emulator.json HERALD_FCM_ENDPOINT=https://127.0.0.1:9099 HERALD_FCM_CA_FILE=fcm-ca.pem herald serve
            Tokens starting with dead-, invalid-, mismatch-, flaky-, quota- or slow- get scripted failures.
            GET /emulator/messages lists what it received; GET /emulator/stats counts it.
            """
    )

    @Option(parsing: .unconditional, help: "Port to listen on (0 picks a free one).")
    var port: Int = 9099

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(name: .customLong("write-service-account"), help: "Write this emulator's service-account JSON to FILE once it listens.")
    var serviceAccountFile: String?

    @Option(name: .customLong("project-id"), help: "The Firebase project id it accepts.")
    var projectID: String = "herald-emulator"

    @Option(name: .customLong("token-lifetime"), help: "Seconds an access token lives.")
    var tokenLifetime: Int = 3600

    @Flag(help: "Serve HTTP/2 over TLS with a certificate minted at start (HTTP/1.1 stays on offer).")
    var tls = false

    @Option(name: .customLong("write-ca"), help: "With --tls: write the certificate (PEM) clients must trust to FILE.")
    var caFile: String?

    @Flag(help: "Do not print each message (for load tests).")
    var quiet = false

    @Option(
        name: .customLong("fail-first"), parsing: .unconditional, help: "Answer every message 503 UNAVAILABLE on its first N attempts (a provider under load).")
    var failFirst = 0

    @OptionGroup var faults: FaultOptions

    func validate() throws {
        try EmulatorPort.validate(port)
        guard (1...86_400).contains(tokenLifetime) else { throw ValidationError("--token-lifetime must be 1-86400 seconds") }
        guard (0...100).contains(failFirst) else { throw ValidationError("--fail-first must be 0-100") }
    }

    func run() async throws {
        var configuration = FCMEmulator.Configuration()
        configuration.host = host
        configuration.port = port
        configuration.projectID = projectID
        configuration.tokenLifetime = tokenLifetime
        configuration.tls = tls
        configuration.failFirst = failFirst
        configuration.faults = faults.modes
        if caFile != nil && !tls { throw ValidationError("--write-ca needs --tls") }
        let emulator = try FCMEmulator(configuration: configuration, print: .standardOutput(quiet: quiet))
        let (file, caFile) = (serviceAccountFile, caFile)
        try await emulator.run { port in
            do {
                if let file { try PrivateFile.write(emulator.serviceAccountJSON(), to: file) }
                if let caFile, let certificate = emulator.certificate { try PrivateFile.write(certificate.certificatePEM, to: caFile, mode: 0o644) }
            } catch {
                StandardStream.error.write("herald: error: cannot write the emulator's files: \(error)\n")
            }
            StandardStream.output.write("FCM emulator listening on \(emulator.baseURL)\n")
        }
    }
}
