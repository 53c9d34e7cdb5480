/// The channel a sink instance delivers on, as users choose channels (docs/routing.md,
/// "Channels and preferences"): `push`, `in_app` (history and the live stream), or one a plugin
/// names (`chat`, `email`, `sms`). A sink's type gives the default (``NotificationSink/channel``);
/// `sinks.<name>.channel` and `sinks.<name>.user_facing` override it per instance.
public struct SinkChannel: Sendable, Hashable, CustomStringConvertible {
    /// The channel's name, as users' preferences name it.
    public var name: String
    /// Whether users' preferences apply to the sink. An operator's own sink (a moderation or
    /// audit webhook, the pull feed) is not user-facing: no preference removes it.
    public var userFacing: Bool

    /// A channel named `name`; the name is checked where configuration sets it
    /// (``isValidName(_:)``).
    public init(_ name: String, userFacing: Bool = true) {
        self.name = name
        self.userFacing = userFacing
    }

    /// Visible pushes to devices (FCM, APNs, Web Push, the console).
    public static let push = SinkChannel("push")
    /// The user's history and live stream: always on, never suppressed by a preference.
    public static let inApp = SinkChannel("in_app")
    /// The anonymous pull feed: not a user's channel.
    public static let feed = SinkChannel("feed", userFacing: false)
    /// An operator's own sink (an audit or moderation hook): preferences never remove it.
    public static let operatorOnly = SinkChannel("operator", userFacing: false)

    /// Whether users choose whether the sink reaches them: user-facing, and not `in_app`.
    public var isChoosable: Bool { userFacing && self != .inApp }

    /// As `herald sinks` and the portal show it: the name, marked `(operator)` when no user
    /// preference applies.
    public var description: String { userFacing ? name : "\(name) (operator)" }

    /// A sink's channel when neither it nor the configuration names one: history is `in_app`,
    /// a push sink `push`, a broadcast sink `feed`, anything else an operator's own.
    public static func byDefault(name: String, capabilities: SinkCapabilities) -> SinkChannel {
        if name == NotificationRouter.historySink { return .inApp }
        if capabilities.contains(.push) { return .push }
        if capabilities.contains(.broadcast) { return .feed }
        return .operatorOnly
    }

    /// Whether `name` may name a channel: 1-32 of `a-z`, `0-9` and `_`, starting with a letter.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (97...122).contains(first), name.utf8.count <= 32 else { return false }
        return name.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }
    }
}
