import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer
import HeraldStore

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage users' data.", subcommands: [Erase.self, SignOut.self])

    /// The database options and one user's id, checked as the API checks one.
    struct UserArguments: ParsableArguments {
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
    }

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

        @OptionGroup var user: UserArguments

        func run() async throws {
            let (store, id) = (try await user.common.openStore(ifMissing: .refuse), user.id)
            let erased = try await reportingErrors { try await store.eraseUser(userID: id, at: Date()) }
            print(
                "erased user \(id): \(erased.devices) devices, \(erased.subscriptions) subscriptions, \(erased.history) history items, "
                    + "\(erased.events) engagement events, \(erased.cards) cards")
        }
    }

    /// Ends a user's sessions without erasing them: what `POST /api/users/{id}/sign-out` does,
    /// on the database directly (a stolen phone, a leaked token).
    struct SignOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-out",
            abstract: "End every user and device token issued for a user so far, keeping their data.",
            discussion: """
                Tokens issued before now are refused (401 token_ended) by every server on the \
                database within 5 seconds. The user's devices stay registered; their apps sign in \
                again with a fresh proof from the backend, or an anonymous device with its secret.
                """
        )

        @OptionGroup var user: UserArguments

        func run() async throws {
            let (store, id) = (try await user.common.openStore(ifMissing: .refuse), user.id)
            let now = Date()
            try await reportingErrors { try await store.endTokens(userID: id, issuedBefore: now) }
            print("signed out user \(id): tokens issued before \(Timestamp.format(now)) are refused")
        }
    }
}
