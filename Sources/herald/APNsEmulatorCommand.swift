import ArgumentParser
import Foundation
import HeraldAPNsEmulator
import HeraldCore
import HeraldEmulatorSupport

struct APNsEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-emulator",
        abstract: "Run a local stand-in for Apple's Push Notification service (HTTP/2 over TLS).",
        discussion: """
            Writes the certificate to trust and a .p8 provider key, then point an apns sink at it:
              herald apns-emulator --port 9097 --write-ca apns-ca.pem --write-key apns-key.p8
              sinks.apns: {type: apns, key_file: apns-key.p8, key_id: HERALDKEY1, team_id: HERALDTEAM,
                           topic: com.example.herald, ca_file: apns-ca.pem,
                           production_endpoint: https://127.0.0.1:9097, sandbox_endpoint: https://127.0.0.1:9097}
            Tokens starting gone-, bad-, flaky-, busy- or expired- get scripted failures.
            GET /emulator/messages lists what it received; GET /emulator/stats counts it.
            """
    )

    @Option(parsing: .unconditional, help: "Port to listen on (0 picks a free one).")
    var port: Int = 9097

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(name: .customLong("write-ca"), help: "Write the certificate (PEM) clients must trust to FILE.")
    var caFile: String?

    @Option(name: .customLong("write-key"), help: "Write the .p8 provider key to FILE.")
    var keyFile: String?

    @Option(name: .customLong("key-id"), help: "The key id it expects in tokens.")
    var keyID: String = "HERALDKEY1"

    @Option(name: .customLong("team-id"), help: "The team id it expects in tokens.")
    var teamID: String = "HERALDTEAM"

    @Option(help: "The bundle id it expects as apns-topic.")
    var topic: String = "com.example.herald"

    @OptionGroup var faults: FaultOptions

    @Flag(help: "Do not print each message.")
    var quiet = false

    func validate() throws {
        try EmulatorPort.validate(port)
    }

    func run() async throws {
        var configuration = APNsEmulator.Configuration()
        configuration.host = host
        configuration.port = port
        configuration.faults = faults.modes
        configuration.keyID = keyID
        configuration.teamID = teamID
        configuration.topic = topic
        let emulator = try APNsEmulator(configuration: configuration, print: .standardOutput(quiet: quiet))
        let (caFile, keyFile, host) = (caFile, keyFile, host)
        try await emulator.run { port in
            do {
                if let caFile { try PrivateFile.write(emulator.certificate.certificatePEM, to: caFile, mode: 0o644) }
                if let keyFile { try PrivateFile.write(emulator.providerKeyPEM, to: keyFile) }
            } catch {
                StandardStream.error.write("herald: error: cannot write the emulator's files: \(error)\n")
            }
            StandardStream.output.write("APNs emulator listening on https://\(host):\(port)\n")
        }
    }
}
