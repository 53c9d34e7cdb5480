public import Foundation

/// What ends a user's tokens and guards an anonymous device's account (docs/security.md,
/// "User and device tokens"): per-user instants before which every token issued is refused,
/// and the hash of each anonymous device's secret.
public protocol UserCredentialStore: Sendable {
    /// The instant before which every token issued for `userID` is refused, if one was set
    /// (an erasure or a sign-out).
    func tokensEndedBefore(userID: String) async throws -> Date?
    /// Refuses every token issued for `userID` before `date`; an earlier instant set before
    /// stays replaced by the later of the two.
    func endTokens(userID: String, issuedBefore date: Date) async throws
    /// The SHA-256 (hex) of the secret an anonymous user's device was given, if it has one.
    func deviceSecretHash(userID: String) async throws -> String?
    /// Stores `secretHash` for `userID` unless a secret is stored already.
    /// - Returns: whether this one was stored (false: another caller's claim came first).
    func claimDeviceSecret(userID: String, secretHash: String, at date: Date) async throws -> Bool
    /// Whether Herald holds anything of `userID`: settings or attributes, devices, history,
    /// card state or engagement events.
    func holdsData(userID: String) async throws -> Bool
    /// When this database began keeping device secrets: the upgrade that added them, from
    /// which `auth.device_secret_claim_until` counts by default.
    func deviceSecretsSince() async throws -> Date?
}

/// The statements both engines run as written (their placeholders aside).
enum UserCredentialSQL {
    static let tables = [
        "CREATE TABLE token_floors (user_id TEXT PRIMARY KEY, not_before BIGINT NOT NULL)",
        "CREATE TABLE device_secrets (user_id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, created_at BIGINT NOT NULL)",
        "CREATE TABLE herald_facts (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    ]
    /// The fact ``UserCredentialStore/deviceSecretsSince()`` reads.
    static let secretsSince = "device_secrets_since"
    /// Whether any table holds a row of the user; `placeholder(n)` spells the engine's n-th
    /// parameter (1 to ``holdsDataTables``), each the user's id.
    static func holdsData(placeholder: (Int) -> String) -> String {
        let tables = [("users", "id"), ("devices", "user_id"), ("history", "user_id"), ("card_users", "user_id"), ("events", "user_id")]
        return "SELECT 1 AS held WHERE "
            + tables.enumerated().map { index, table in
                "EXISTS (SELECT 1 FROM \(table.0) WHERE \(table.1) = \(placeholder(index + 1)))"
            }.joined(separator: " OR ")
    }
    /// Keeps the later of the stored and the new instant.
    static let laterFloor = "not_before = CASE WHEN excluded.not_before > token_floors.not_before THEN excluded.not_before ELSE token_floors.not_before END"
}
