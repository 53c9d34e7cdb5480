import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer
import HeraldStore

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage users' data.", subcommands: [Erase.self, SignOut.self])

    /// A user id as the API takes one, or the command-line's error naming what is wrong.
    static func validate(_ id: String) throws {
        do {
            try UserID.validate(id, field: "user id")
        } catch let error as HeraldError {
            throw ValidationError(error.message)
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

        @OptionGroup var common: CommonOptions

        @Argument(help: "The user's id, as your backend names them.")
        var id: String

        func validate() throws { try Users.validate(id) }

        func run() async throws {
            let store = try await common.openStore(ifMissing: .refuse)
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

        @OptionGroup var common: CommonOptions

        @Argument(help: "The user's id, as your backend names them.")
        var id: String

        func validate() throws { try Users.validate(id) }

        func run() async throws {
            let store = try await common.openStore(ifMissing: .refuse)
            let now = Date()
            try await reportingErrors { try await store.endTokens(userID: id, issuedBefore: now) }
            print("signed out user \(id): tokens issued before \(Timestamp.format(now)) are refused")
        }
    }
}
