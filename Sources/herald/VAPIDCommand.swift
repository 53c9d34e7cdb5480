import ArgumentParser
import Foundation
import HeraldWebPushSink

struct VAPIDCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vapid", abstract: "VAPID keys for Web Push.", subcommands: [Generate.self]
    )

    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new VAPID key pair: the private key for sinks.<name>.vapid_private_key, the public key for the web app's applicationServerKey."
        )

        func run() async throws {
            let key = VAPIDKey.generate()
            print("private_key: \(key.privateKeyBase64URL)")
            print("public_key: \(key.publicKeyBase64URL)")
        }
    }
}
