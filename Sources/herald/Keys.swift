import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage API keys.",
        subcommands: [Create.self, List.self, Revoke.self, Generate.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a key; it is printed once, as the last word of the output.")

        @OptionGroup var common: CommonOptions

        @Option(help: "admin, communicator or backend.")
        var role: String

        @Option(help: "A name to recognise the key by (shown as a message's sender).")
        var name: String?

        func validate() throws {
            guard Role(rawValue: role) != nil else {
                throw ValidationError("--role must be one of: \(Role.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            // The name is a column of `keys list`'s tab-separated table and a message's sender.
            let control = name?.unicodeScalars.contains { $0.properties.generalCategory == .control } ?? false
            if let name, name.trimmingCharacters(in: .whitespaces).isEmpty || name.count > 100 || control {
                throw ValidationError("--name must be 1-100 characters, not only spaces, with no tab, newline or other control character")
            }
        }

        func run() async throws {
            let store = try await common.openStore(ifMissing: .createAndSay)
            let role = Role(rawValue: role) ?? .backend
            let secret = APIKeySecret.generate()
            let record = APIKeyRecord(id: ObjectIDGenerator().next(), name: name ?? "\(role.rawValue)-key", role: role, createdAt: Date())
            try await reportingErrors { try await store.createKey(record, secretHash: APIKeySecret.hash(secret)) }
            print("created \(role.rawValue) key '\(record.name)' with id \(record.id); it is shown only now:")
            print(secret)
            // A secret nobody received must not stay usable (part of it may have been written).
            if let problem = StandardStream.flushPrinted() {
                let revoked = (try? await store.revokeKey(id: record.id, at: Date())) == true
                StandardStream.error.line(
                    "herald: error: \(problem); key \(record.id) "
                        + (revoked ? "was revoked, as its secret could not be shown" : "could not be revoked: run herald keys revoke \(record.id)"))
                throw ExitCode(74)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (never their secrets).")

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let store = try await common.openStore(ifMissing: .refuse)
            let keys = try await reportingErrors { try await store.keys() }
            print("ID\tROLE\tNAME\tCREATED\tSTATUS")
            for key in keys {
                let status = key.revokedAt.map { "revoked \(Timestamp.format($0))" } ?? "active"
                print("\(key.id)\t\(key.role.rawValue)\t\(key.name)\t\(Timestamp.format(key.createdAt))\t\(status)")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key by id; running servers refuse it within 5 seconds.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The key's id, as `herald keys list` shows it.")
        var id: String

        func run() async throws {
            guard let keyID = ObjectID(id) else {
                throw ValidationError("'\(id)' is not a key id (24 lowercase hex characters)")
            }
            let store = try await common.openStore(ifMissing: .refuse)
            let revoked = try await reportingErrors { try await store.revokeKey(id: keyID, at: Date()) }
            guard revoked else {
                StandardStream.error.write("herald: error: no active key with id \(id)\n")
                throw ExitCode.failure
            }
            print("revoked \(id)")
        }
    }

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a new random key without storing it (for HERALD_BOOTSTRAP_ADMIN_KEY).")

        func run() {
            print(APIKeySecret.generate())
        }
    }
}
