public import Logging

/// Builds a sink of one `type` from its section of the configuration (`sinks.<name>.type`).
///
/// Each sink module adds its factory as a static member, so a server's list of factories reads
/// like a list of drivers and Herald's own code never names a sink module:
///
/// ```swift
/// extension SinkFactory {
///     public static let chat = SinkFactory(type: "chat") { context in
///         ChatSink(name: context.name, url: try context.settings.requiredString("url"))
///     }
/// }
/// // main.swift of an operator's package:
/// try await HeraldServer.start(configuration, factories: SinkFactory.builtIn + [.chat])
/// ```
/// Several instances of one type may be configured (two FCM projects): each is built by the
/// same factory with its own ``SinkContext``.
public struct SinkFactory: Sendable {
    /// The value of `sinks.<name>.type` this factory builds (`fcm`, `webhook`, `console`, …).
    public let type: String
    /// How apps register devices of the providers this type serves, in its own fields
    /// (``RegistrationForm``); known to the server whether or not an instance is configured.
    public let registrationForms: [RegistrationForm]
    /// The configuration shorthand this type offers for one instance (FCM's `fcm:`), if any.
    public let shorthand: SinkShorthand?
    private let make: @Sendable (SinkContext) async throws -> any NotificationSink

    /// A sink type: `type` is what `sinks.<name>.type` names, `make` builds one instance from
    /// its context; `registrationForms` and `shorthand` are the provider's own registration
    /// fields and configuration shorthand, if it has any.
    public init(
        type: String, registrationForms: [RegistrationForm] = [], shorthand: SinkShorthand? = nil,
        make: @escaping @Sendable (SinkContext) async throws -> any NotificationSink
    ) {
        self.type = type
        self.registrationForms = registrationForms
        self.shorthand = shorthand
        self.make = make
    }

    /// Builds one instance; configuration problems are thrown as `invalid_config` errors that
    /// name the key (``SinkSettings/invalid(_:_:)``).
    public func makeSink(_ context: SinkContext) async throws -> any NotificationSink {
        try await make(context)
    }
}

extension Sequence where Element == SinkFactory {
    /// The first factory of each type, in order: the one a server builds that type with, and
    /// whose registration forms and configuration shorthand count (an operator's list may name
    /// a built-in type again).
    public var firstOfEachType: [SinkFactory] {
        var seen: Set<String> = []
        return filter { seen.insert($0.type).inserted }
    }
}

/// What a factory gets to build one sink instance: its name and settings, and of Herald's
/// storage only the parts a sink writes (docs/sinks.md, "What a sink is given"): appending
/// users' history, writing the pull feed. A sink never reads or changes users, devices or the
/// queue; the delivery engine hands it what each delivery needs.
public struct SinkContext: Sendable {
    /// The instance's name, its key under `sinks:`. Most sinks use it as their own name;
    /// a sink may derive another (a webhook named `moderation` is the sink `webhook:moderation`).
    public var name: String
    /// The instance's keys under `sinks.<name>`, read with errors that name the key.
    public var settings: SinkSettings
    /// Users' histories, for the sink that appends to them.
    public var history: any HistoryStore
    /// The pull feed's messages, for the sink that publishes broadcasts into it.
    public var feedStore: any FeedStore
    /// The pull feed as served, refreshed when that sink adds a message.
    public var feed: FeedSnapshot
    /// Herald's logger, at the configured level; a sink adds its own metadata.
    public var logger: Logger
    /// Where a sink records its own metrics, exported at `GET /metrics` with Herald's.
    public var metrics: HeraldMetrics
    /// How instants are written into what apps parse (`timestamps`), for sinks that send them.
    public var timestamps: TimestampStyle

    /// A context as the server builds it for each configured instance.
    public init(
        name: String, settings: SinkSettings, history: any HistoryStore, feedStore: any FeedStore, feed: FeedSnapshot, logger: Logger,
        metrics: HeraldMetrics, timestamps: TimestampStyle = .pong
    ) {
        self.name = name
        self.settings = settings
        self.history = history
        self.feedStore = feedStore
        self.feed = feed
        self.logger = logger
        self.metrics = metrics
        self.timestamps = timestamps
    }
}
