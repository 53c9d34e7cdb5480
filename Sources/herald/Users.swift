import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage users' data.", subcommands: [Erase.self])

    /// An operator's answer to an erasure request (a support ticket, a data-protection request)
    /// without an API key at hand: what `DELETE /api/users/{id}` does, on the database directly.
    struct Erase: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Erase a user: their settings, attributes, devices, subscriptions, history, engagement events and card state.",
            discussion: """
                The same as DELETE /api/users/{id}: pushes still queued for them are failed, and every \
                running server on PostgreSQL drops its copies. A server on the same SQLite file may \
                still send the few it has already handed to its workers. Erasing an unknown user \
                erases nothing and succeeds.
                """
        )

        @OptionGroup var common: CommonOptions

        @Argument(help: "The user's id, as your backend names them.")
        var id: String

        func validate() throws {
            do {
                try UserID.validate(id, field: "user id")
            } catch let error as HeraldError {
                throw ValidationError(error.message)
            }
        }

        func run() async throws {
            let store = try await common.openStore(ifMissing: .refuse)
            let erased = try await reportingErrors { try await store.eraseUser(userID: id, at: Date()) }
            print(
                "erased user \(id): \(erased.devices) devices, \(erased.subscriptions) subscriptions, \(erased.history) history items, "
                    + "\(erased.events) engagement events, \(erased.cards) cards")
        }
    }
}
