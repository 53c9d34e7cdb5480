import ArgumentParser
import Foundation
import HeraldCore
import HeraldWebPushSink

struct VAPIDCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vapid", abstract: "VAPID keys for Web Push.", subcommands: [Generate.self]
    )

    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new VAPID key pair: the private key for sinks.<name>.vapid_private_key, the public key for the web app's applicationServerKey."
        )

        @Option(help: "Also write the pair to this file (created 0600; never through a symbolic link).")
        var out: String?

        func run() async throws {
            let key = VAPIDKey.generate()
            let text = "private_key: \(key.privateKeyBase64URL)\npublic_key: \(key.publicKeyBase64URL)\n"
            if let out {
                do {
                    try PrivateFile.write(text, to: out)
                } catch {
                    StandardStream.error.write("herald: error: \(error)\n")
                    throw ExitCode.failure
                }
            }
            print(text, terminator: "")
        }
    }
}
