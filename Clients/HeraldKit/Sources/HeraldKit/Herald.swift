public import Foundation
import HeraldAPI
public import OpenAPIRuntime

/// The device half of an app Herald serves (docs/heraldkit.md): one per app, shared by its
/// screens. Calls that need Herald throw ``HeraldKitError``; the feed's next message, card
/// promotion and queued events work offline and catch up when Herald answers again.
public final class Herald: Sendable {
    let client: Client
    let database: LocalDatabase
    let session: Session
    let app: AppIdentity
    let now: @Sendable () -> Date
    let outbox: Outbox

    /// A Herald at `serverURL`, over the app's `transport` (`URLSessionTransport()` on Apple
    /// platforms, `AsyncHTTPClientTransport()` on Linux), with its state in `database` and an
    /// anonymous device's secret in `secrets` (``KeychainSecretStore`` where there is one).
    /// `proofProvider` asks the app's backend for a fresh proof when a signed-in token is
    /// renewed after the app restarted.
    public init(
        serverURL: URL, transport: any ClientTransport, database: LocalDatabase, secrets: any DeviceSecretStore, app: AppIdentity = AppIdentity(),
        proofProvider: (@Sendable (_ userID: String) async throws -> String)? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        let errors = ServerErrorMiddleware()
        let tags = EntityTagHeaderMiddleware()
        let signIn = Client(serverURL: serverURL, configuration: Self.configuration, transport: transport, middlewares: [errors])
        let session = Session(client: signIn, database: database, secrets: secrets, app: app, proofProvider: proofProvider, now: now)
        client = Client(
            serverURL: serverURL, configuration: Self.configuration, transport: transport, middlewares: [errors, tags, BearerTokenMiddleware(session: session)])
        self.database = database
        self.session = session
        self.app = app
        self.now = now
        outbox = Outbox(database: database, now: now)
    }

    static let configuration = Configuration(dateTranscoder: RFC3339DateTranscoder())

    // MARK: Sign-in

    /// Signs up without an account, or back into the one this device made (its secret kept in
    /// the ``DeviceSecretStore``). Needs `auth.device_sign_up` on the server.
    @discardableResult
    public func signUp() async throws(HeraldKitError) -> SignedIn {
        try await session.signUp()
    }

    /// Signs in as `userID`, with `proof` asking the app's backend for a user token (now, and
    /// again at each renewal).
    @discardableResult
    public func signIn(userID: String, proof: @escaping @Sendable (_ userID: String) async throws -> String) async throws(HeraldKitError) -> SignedIn {
        try await session.signIn(userID: userID, proof: proof)
    }

    /// Forgets the token; queued events stay for the next sign-in.
    public func signOut() async throws(HeraldKitError) {
        try await session.signOut()
    }

    /// The signed-in user, if any (kept across launches).
    public func userID() async throws(HeraldKitError) -> String? {
        try await session.userID()
    }

    /// The device's id (random, made once).
    public func deviceID() async throws(HeraldKitError) -> String {
        try await session.deviceID()
    }
}
