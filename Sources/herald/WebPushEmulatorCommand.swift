import ArgumentParser
import Foundation
import HeraldCore
import HeraldEmulatorSupport
import HeraldWebPushEmulator

struct WebPushEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush-emulator",
        abstract: "Run a local stand-in for a browser's Web Push service.",
        discussion: """
            Writes a subscription (endpoint, p256dh, auth) of its own, keeps its private key,
            verifies every request's VAPID signature and decrypts every message:
              herald webpush-emulator --port 9098 --write-subscription subscription.json
            Register it for a user with {"web_push": <the file's contents>}.
            POST /emulator/subscriptions?name=N makes another (names starting gone-, missing-,
            big-, flaky- or busy- get scripted failures); GET /emulator/messages lists the
            decrypted messages; GET /emulator/stats counts them.
            """
    )

    @Option(parsing: .unconditional, help: "Port to listen on (0 picks a free one).")
    var port: Int = 9098

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(name: .customLong("write-subscription"), help: "Write a subscription JSON to FILE once it listens.")
    var subscriptionFile: String?

    @OptionGroup var faults: FaultOptions

    @Flag(help: "Do not print each message (for load tests).")
    var quiet = false

    func validate() throws {
        try EmulatorPort.validate(port)
    }

    func run() async throws {
        var configuration = WebPushEmulator.Configuration()
        configuration.host = host
        configuration.port = port
        configuration.faults = faults.modes
        let emulator = WebPushEmulator(configuration: configuration, print: .standardOutput(quiet: quiet))
        let file = subscriptionFile
        let host = host
        try await emulator.run { port in
            if let file {
                do {
                    let data = try JSONSerialization.data(
                        withJSONObject: emulator.subscribe("browser-1"), options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                    try PrivateFile.write(data, to: file)
                } catch {
                    StandardStream.error.write("herald: error: cannot write \(file): \(error)\n")
                }
            }
            StandardStream.output.write("Web Push emulator listening on http://\(host):\(port)\n")
        }
    }
}
