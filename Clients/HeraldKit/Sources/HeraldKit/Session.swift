import Foundation
import HeraldAPI

/// The device's sign-in (docs/heraldkit.md "Sign-in"): its id, its token and when that expires,
/// kept in the local database so a killed app is still signed in, and renewed before it expires
/// with what signed it in: the device secret of an anonymous sign-up, or a fresh proof from the
/// app's backend.
actor Session {
    /// Where the token came from, which decides how it is renewed.
    enum Kind: String {
        case anonymous
        case proof
    }

    /// A backend's proof for a user: a user token the app's backend minted.
    typealias ProofProvider = @Sendable (_ userID: String) async throws -> String

    private let client: Client
    private let database: LocalDatabase
    private let secrets: any DeviceSecretStore
    private let app: AppIdentity
    private let now: @Sendable () -> Date
    private var proofProvider: ProofProvider?
    /// One renewal at a time: calls arriving meanwhile wait for it.
    private var renewal: Task<String, any Error>?

    init(
        client: Client, database: LocalDatabase, secrets: any DeviceSecretStore, app: AppIdentity, proofProvider: ProofProvider?,
        now: @escaping @Sendable () -> Date
    ) {
        self.client = client
        self.database = database
        self.secrets = secrets
        self.app = app
        self.proofProvider = proofProvider
        self.now = now
    }

    /// The device's id: random, made once, kept in the local database (Herald wants at least 16
    /// characters; an anonymous user is derived from it).
    func deviceID() throws(HeraldKitError) -> String {
        if let id = try database.value("device_id") { return id }
        let id = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try database.setValue(id, for: "device_id")
        return id
    }

    /// The signed-in user, if any.
    func userID() throws(HeraldKitError) -> String? {
        try database.value("user_id")
    }

    /// Signs up (or back in) without an account, with the device secret from the first time.
    func signUp() async throws(HeraldKitError) -> SignedIn {
        let secret: String?
        do {
            secret = try secrets.load()
        } catch {
            throw .localStorage("device secret: \(error)")
        }
        let answer = try await authenticate(proof: nil, userID: nil, secret: secret)
        if let fresh = answer.deviceSecret {
            do {
                try secrets.save(fresh)
            } catch {
                throw .localStorage("device secret: \(error)")
            }
        }
        return try keep(answer, kind: .anonymous)
    }

    /// Signs in as `userID` with a proof from the app's backend, which is asked again for each
    /// renewal.
    func signIn(userID: String, proof: @escaping ProofProvider) async throws(HeraldKitError) -> SignedIn {
        proofProvider = proof
        let token: String
        do {
            token = try await proof(userID)
        } catch {
            throw HeraldKitError.from(error)
        }
        let answer = try await authenticate(proof: token, userID: userID, secret: nil)
        return try keep(answer, kind: .proof)
    }

    /// Forgets the token (the device id and secret stay, so an anonymous device signs back into
    /// the same user).
    func signOut() throws(HeraldKitError) {
        try database.write { db in
            for key in ["token", "user_id", "expires_at", "issued_at", "sign_in"] { try LocalDatabase.setValue(nil, for: key, in: db) }
        }
    }

    /// A token good for the next call: the kept one, renewed first when its last fifth (at most
    /// ten minutes) has begun. A renewal that finds no server keeps using a token not yet
    /// expired.
    func validToken() async throws -> String {
        guard let token = try database.value("token"), let expires = try database.value("expires_at").flatMap(Double.init),
            let issued = try database.value("issued_at").flatMap(Double.init)
        else { throw HeraldKitError.notSignedIn }
        let margin = min(600, max(0, expires - issued) / 5)
        let current = now().timeIntervalSince1970
        guard current >= expires - margin else { return token }
        do {
            return try await renew()
        } catch let error as HeraldKitError where error.isTransient && current < expires {
            return token
        }
    }

    private func renew() async throws -> String {
        if let renewal { return try await renewal.value }
        let task = Task { () async throws -> String in
            let kind = try database.value("sign_in").flatMap(Kind.init(rawValue:))
            switch kind {
            case .anonymous:
                return try await signUp().token
            case .proof:
                guard let userID = try database.value("user_id"), let proofProvider else { throw HeraldKitError.notSignedIn }
                return try await signIn(userID: userID, proof: proofProvider).token
            case nil:
                throw HeraldKitError.notSignedIn
            }
        }
        renewal = task
        defer { renewal = nil }
        return try await task.value
    }

    private func authenticate(proof: String?, userID: String?, secret: String?) async throws(HeraldKitError) -> Operations.AuthDevice.Output.Ok.Body.JsonPayload
    {
        let deviceID = try deviceID()
        let body = Operations.AuthDevice.Input.Body.JsonPayload(
            deviceId: deviceID, platform: app.platform, appVersion: nil, userId: userID, proof: proof, deviceSecret: secret)
        let output = try await calling { try await client.authDevice(body: .json(body)) }
        guard case .ok(let ok) = output, case .json(let answer) = ok.body else { throw .unexpectedAnswer("POST /api/auth/device") }
        return answer
    }

    private func keep(_ answer: Operations.AuthDevice.Output.Ok.Body.JsonPayload, kind: Kind) throws(HeraldKitError) -> SignedIn {
        let issued = now()
        try database.write { db in
            try LocalDatabase.setValue(answer.token, for: "token", in: db)
            try LocalDatabase.setValue(answer.userId, for: "user_id", in: db)
            try LocalDatabase.setValue(String(answer.expiresAt.timeIntervalSince1970), for: "expires_at", in: db)
            try LocalDatabase.setValue(String(issued.timeIntervalSince1970), for: "issued_at", in: db)
            try LocalDatabase.setValue(kind.rawValue, for: "sign_in", in: db)
        }
        return SignedIn(userID: answer.userId, token: answer.token, expiresAt: answer.expiresAt)
    }
}

/// A signed-in device: its user and its token's expiry.
public struct SignedIn: Sendable, Equatable {
    /// The user the device acts for (`dev_…` for an anonymous sign-up).
    public var userID: String
    /// The bearer token (HeraldKit sends it; an app rarely needs it).
    public var token: String
    /// When the token expires; HeraldKit renews it before.
    public var expiresAt: Date
}

/// The app and where it runs. Only the platform is sent (at sign-in); the version and region
/// stay on the device, where the private feed is filtered (docs/feed.md).
public struct AppIdentity: Sendable {
    /// `ios`, `macos`, `linux`…
    public var platform: String?
    /// The app's version, for the feed's version ranges; never sent.
    public var version: String?
    /// The device's region code (`QC`), for the feed's regions; never sent.
    public var region: String?

    /// An identity; every part optional.
    public init(platform: String? = nil, version: String? = nil, region: String? = nil) {
        self.platform = platform
        self.version = version
        self.region = region
    }
}
