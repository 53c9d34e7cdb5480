/// A shorthand a sink type offers in the configuration for one instance of it, as FCM's
/// `fcm:` section does: a top-level section that stands for `sinks.<section>` (the instance is
/// named after it and built by the factory's type), declared by setting one key there or under
/// `sinks.<section>`, and optionally an environment variable outside `HERALD_` that stands for
/// one of its keys when nothing else sets it. Declared by the sink module on its
/// ``SinkFactory``, so the configuration names no provider (README.md, "Configuration").
public struct SinkShorthand: Sendable {
    /// The top-level section, and the name of the instance it configures (`fcm`).
    public let section: String
    /// The key whose value declares the instance (`credentials`).
    public let declaringKey: String
    /// A variable every client of the provider reads (`GOOGLE_APPLICATION_CREDENTIALS`), and
    /// the section's key it stands for when nothing else sets that key.
    public let fallback: (variable: String, key: String)?
    /// Older names of Herald's own keys that still work for this sink type's users, each with
    /// the key it stands for (`topics.manage_fcm_membership` for `topics.manage_membership`):
    /// the key wins when both are set.
    public let keyAliases: [(alias: String, key: String)]

    /// A shorthand: the `section` that stands for `sinks.<section>`, the key whose value
    /// declares the instance, an optional fallback variable and older key names.
    public init(
        section: String, declaringKey: String, fallback: (variable: String, key: String)? = nil, keyAliases: [(alias: String, key: String)] = []
    ) {
        self.section = section
        self.declaringKey = declaringKey
        self.fallback = fallback
        self.keyAliases = keyAliases
    }
}
