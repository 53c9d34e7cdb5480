import ArgumentParser
import Foundation
import HeraldCore
import HeraldServer

/// Mints a user token with the configured `user_token_secret`: what a backend does for its
/// users, for trying an app or the API by hand (and the `proof` of `POST /api/auth/device`).
struct UserTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user-token", abstract: "Print a user token (HS256, signed with user_token_secret) for one user."
    )

    @OptionGroup var common: CommonOptions

    @Option(name: .customLong("user"), help: "The user id the token acts for.")
    var userID: String

    @Option(parsing: .unconditional, help: "Seconds the token is valid.")
    var ttl: Int = 3600

    func validate() throws {
        guard (1...(3_650 * 86_400)).contains(ttl) else { throw ValidationError("--ttl must be 1-315360000 seconds") }
        do { try UserID.validate(userID, field: "--user") } catch let error as HeraldError { throw ValidationError(error.message) }
    }

    func run() async throws {
        let configuration = try await reportingErrors { try await common.load() }
        guard let secret = configuration.userTokenSecret, secret.utf8.count >= UserTokenVerifier.minimumSecretBytes else {
            StandardStream.error.write("herald: error: user_token_secret (HERALD_USER_TOKEN_SECRET) of at least 32 bytes is required\n")
            throw ExitCode.failure
        }
        print(try await UserTokenVerifier(secret: secret).sign(userID: userID, expires: Date().addingTimeInterval(TimeInterval(ttl))))
    }
}
