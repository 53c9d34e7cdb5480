import Foundation
import HeraldCards
import HeraldContent
import HeraldCore
public import HeraldFeed
import HeraldHTTP
public import HeraldInbox
import HeraldLive
public import HeraldStore
public import HeraldTopics
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
public import Prometheus
import ServiceLifecycle
import UnixSignals

/// The composition root: storage, sinks, router, delivery engine and HTTP routes, built from
/// one ``HeraldConfiguration`` and a list of sink factories. `herald serve`, an operator's own
/// binary and the tests build the server the same way.
///
/// ```swift
/// let server = try await HeraldServer.start(configuration, factories: SinkFactory.builtIn + [.chat])
/// try await server.run()
/// ```
public struct HeraldServer: Sendable {
    public let configuration: HeraldConfiguration
    public let store: any ServerStorage
    /// The cards module's store (docs/cards.md), on the same database as ``store``.
    public let cards: any CardStore
    public let sinks: SinkRegistry
    public let engine: DeliveryEngine
    public let service: NotificationService
    /// The pull feed as served, rebuilt on change.
    public let feed: FeedSnapshot
    /// The feed module's store (docs/feed.md), on the same database as ``store``.
    public let feedStore: SharedFeedStore
    public let logger: Logger
    /// Where this server's metrics are collected, exported at `GET /metrics`.
    public let metricsRegistry: PrometheusCollectorRegistry
    let metrics: HeraldMetrics
    let portalPages: PortalPages
    let userTokens: UserTokenVerifier?
    let types: NotificationTypes
    /// The providers' own device address forms, from the sink factories (whether or not an
    /// instance of their type is configured).
    let registrationForms: [RegistrationForm]
    /// The keys that configure a push sink, for the start-up hint when none is configured:
    /// `sinks.instances` and each sink type's shorthand (``SinkShorthand``).
    let pushSetupKeys: [String]
    let ids: ObjectIDGenerator
    /// Anonymous device sign-ups per client address; one per server, kept across requests.
    let signUpLimiter: SignUpLimiter
    /// Engagement events per user token (`events.max_per_user_per_hour`), kept across requests.
    let eventLimiter: TokenBuckets
    /// Whose `X-Forwarded-For` names the client (`server.trusted_proxies`).
    let trustedProxies: TrustedProxies
    /// Users whose tokens were ended (erasure, sign-out), as this process last read them.
    let endedTokens: EndedTokens
    /// Failed credential checks per client address (`auth.failed_attempts_per_minute`).
    let failedAuth: FailedAuthLimiter
    /// Device registrations per user and per API key (`devices.registrations_per_*`).
    let registrations: RegistrationLimiter
    /// Open HTTP connections, ended when a graceful shutdown's drain runs out.
    let connections = OpenConnections()
    /// Live streams (`GET /api/stream`) open in this process.
    let streams: LiveStreams
    /// Keeps provider-side topic membership equal to subscriptions (`topics.manage_membership`).
    public let membership: TopicMembershipWorker
    /// Writes fan-outs above `fanout.inline_limit` after their accept.
    public let fanOut: FanOutWorker
    /// Counts held deliveries against caps and digest windows, and delivers digests (docs/timing.md).
    public let digests: DigestWorker
    /// The inbox module's store (docs/inbox.md), on the same database as ``store``.
    public let inbox: any InboxStore
    /// The silent pushes that bring a user's other devices in step; nil when `inbox.sync_push` is off.
    let inboxSync: InboxSync?

    /// Opens and migrates storage, ensures the bootstrap admin key, and wires every part.
    /// - Parameters:
    ///   - factories: the sink types this server can build (``SinkFactory/builtIn`` plus an
    ///     operator's own); each configured instance is built by the factory of its type.
    ///   - extraSinks: sinks an embedder built itself, added beside the configured ones.
    ///   - routingPolicies: modules' reasons to use or skip a sink per recipient
    ///     (``RoutingPolicy``), consulted after the user's push settings.
    ///   - dueHooks: modules' say on each delivery as it becomes due (``DueHook``): hold it for
    ///     later or drop it.
    ///   - badgeCounts: what keeps users' badges (``BadgeCounts``), for sinks that carry one;
    ///     by default the inbox's unread counts (docs/inbox.md).
    ///   - storageModules: modules' own tables, erasure steps and statements run beside stored
    ///     deliveries (``StorageModule``), besides Herald's own.
    public static func start(
        _ configuration: HeraldConfiguration, factories: [SinkFactory] = SinkFactory.builtIn, extraSinks: [any NotificationSink] = [],
        routingPolicies: [any RoutingPolicy] = [], dueHooks: [any DueHook] = [], badgeCounts: (any BadgeCounts)? = nil,
        storageModules: [StorageModule] = [], logger: Logger? = nil
    ) async throws -> HeraldServer {
        // Nothing process-wide here (an embedder's process is its own): `herald serve` tunes
        // the process first (ProcessTuning), and this only says when its file limit is short.
        let logger = configuration.logger(logger)
        for warning in configuration.warnings { logger.warning("\(warning)") }
        if let limit = OpenFileLimit.current(), let warning = OpenFileLimit.warning(limit: limit, maxConnections: configuration.maxConnections) {
            logger.warning("\(warning)")
        }
        // One registry per server (not the process-wide swift-metrics bootstrap), so servers
        // started side by side in one process (the tests) keep separate counts.
        let metricsRegistry = PrometheusCollectorRegistry()
        let metrics = HeraldMetrics(factory: PrometheusMetricsFactory(registry: metricsRegistry))
        let store = try StorageLocation.open(
            configuration.database, readURL: configuration.databaseReadURL, maxPendingAccepts: configuration.maxPendingAccepts,
            modules: StorageLocation.builtInModules + storageModules, logger: logger)
        if let path = StorageLocation.sqlitePath(configuration.database), path != ":memory:", let mode = SQLiteFileMode.exposure(of: path) {
            logger.warning(
                "the SQLite database \(path) may be read by other accounts on this machine (mode \(String(mode, radix: 8))): it holds device tokens and users' history; chmod 600 it (a new database is created 600)"
            )
        }
        do {
            if let warning = NewerSchema.warning(try await store.migrate()) { logger.warning("\(warning)") }
            let ids = ObjectIDGenerator()
            if let key = configuration.bootstrapAdminKey {
                try await ensureBootstrapKey(key, store: store, ids: ids, logger: logger)
            }
            let types = try NotificationTypes(extra: configuration.extraTypes)
            let feed = FeedSnapshot()
            let feedStore = SharedFeedStore(database: store)
            try await feed.reload(from: feedStore)
            let (built, channels) = try await buildSinks(
                configuration, factories: factories, storage: store, feedStore: feedStore, feed: feed, logger: logger, metrics: metrics)
            do {
                let sinks = try SinkRegistry(built + extraSinks, channels: channels)
                try configuration.checkPreferenceChannels(sinks.choosableChannels)
                var router = try NotificationRouter(
                    registry: sinks, rules: try configuration.routing.map(RoutingRule.parse),
                    policies: [PreferencePolicy(configuration.preferences)] + routingPolicies, defaultTimeZone: configuration.defaultTimeZone)
                try configuration.checkCapChannels(Set(sinks.sinks.map { sinks.channel(of: $0).name }))
                router.folding = Folding(caps: configuration.caps, critical: configuration.preferences.critical)
                // SQLite's commits say when remembered counts are stale; PostgreSQL reads each time.
                var commitCount: (@Sendable () -> Int)?
                if let sqlite = store as? SQLiteStore { commitCount = { sqlite.commits.value } }
                let inbox = SharedInboxStore(database: store, commitCount: commitCount)
                let engine = DeliveryEngine(
                    queue: store, sinks: sinks, configuration: configuration.delivery, logger: logger, metrics: metrics, dueHooks: dueHooks,
                    badgeCounts: badgeCounts ?? inbox)
                let digests = DigestWorker(store: store, router: router, ids: ids, logger: logger, onWork: { [engine] in engine.wake() })
                let fanOut = FanOutWorker(
                    store: store, router: router, logger: logger,
                    onPage: { [engine, digests] in
                        engine.wake()
                        digests.wake()
                    })
                var service = NotificationService(
                    validator: NotificationValidator(types: types, resources: try ResourceResolver(publicBaseURL: configuration.resolvedPublicBaseURL)),
                    router: router, sinks: sinks, store: store, ids: ids,
                    onAccepted: { [engine, fanOut, digests] work in
                        engine.wake()
                        if work.holds { digests.wake() }
                        if work.mayHaveFanOut { fanOut.wake() }
                    }
                )
                service.metrics = metrics
                service.handOff = engine.handOff
                // Before anything is accepted: every notification names what routed it.
                try await store.recordRoutingInputs(service.routingInputs)
                service.fanOutInlineLimit = configuration.fanOutInlineLimit
                var userTokens: UserTokenVerifier?
                if let secret = configuration.userTokenSecret {
                    // HS256 keys shorter than the hash output are weak, and jwt-kit refuses them.
                    guard secret.utf8.count >= UserTokenVerifier.minimumSecretBytes else {
                        throw HeraldError(
                            .unprocessable, code: "invalid_config", "user_token_secret must be at least \(UserTokenVerifier.minimumSecretBytes) bytes")
                    }
                    userTokens = await UserTokenVerifier(secret: secret)
                }
                return HeraldServer(
                    configuration: configuration, store: store, cards: try CardStores.on(store, maxPendingEvents: configuration.maxPendingAccepts),
                    sinks: sinks,
                    engine: engine, service: service, feed: feed, feedStore: feedStore,
                    logger: logger, metricsRegistry: metricsRegistry, metrics: metrics, portalPages: try await PortalPages.load(), userTokens: userTokens,
                    types: types, registrationForms: try registrationForms(of: factories),
                    pushSetupKeys: factories.firstOfEachType.compactMap(\.shorthand).map { "\($0.section).\($0.declaringKey)" } + ["sinks.instances"], ids: ids,
                    signUpLimiter: SignUpLimiter(perMinute: configuration.deviceSignUpsPerMinute),
                    eventLimiter: TokenBuckets(capacity: configuration.eventsPerUserPerHour, period: 3_600),
                    trustedProxies: try TrustedProxies.configured(configuration.trustedProxies),
                    endedTokens: EndedTokens(store: store), failedAuth: FailedAuthLimiter(perMinute: configuration.failedAuthPerMinute),
                    registrations: RegistrationLimiter(
                        perUser: configuration.registrationsPerUserPerMinute, perKey: configuration.registrationsPerKeyPerMinute),
                    streams: LiveStreams(maxPerUser: configuration.maxStreamsPerUser, maxTotal: configuration.resolvedMaxStreamsTotal),
                    membership: TopicMembershipWorker(
                        store: SharedTopicMembershipStore(database: store), sinks: sinks, router: router, retry: configuration.delivery.retry, logger: logger),
                    fanOut: fanOut, digests: digests, inbox: inbox,
                    inboxSync: configuration.inboxSyncPush
                        ? InboxSync(
                            interval: configuration.inboxSyncInterval,
                            send: InboxSyncPushes(users: store, inbox: inbox, router: router, sinks: sinks, ids: ids, logger: logger).send)
                        : nil
                )
            } catch {
                // The sinks built so far hold clients: release them before giving up.
                await shutDown(built)
                throw error
            }
        } catch {
            await store.close()
            throw error
        }
    }

    /// What an operator reads first in the log: which database (without a password) and which
    /// sinks this process serves.
    var startupSummary: String {
        Self.startupSummary(database: configuration.database, sinks: sinks.names, publicBaseURL: configuration.resolvedPublicBaseURL)
    }

    static func startupSummary(database: String, sinks: [String], publicBaseURL: String) -> String {
        let shown = StorageLocation.sqlitePath(database).map { "sqlite:\($0)" } ?? RedactedURL.describe(database)
        return "starting with database \(shown), sinks \(sinks.joined(separator: ", ")), public_base_url \(publicBaseURL)"
    }

    /// Releases every sink's and the store's resources, for a server that was started but is
    /// not run (`herald sinks`, tests). ``run(onServerRunning:)`` does this by itself.
    public func close() async {
        await Self.shutDown(sinks.sinks)
        await store.close()
    }

    /// Creates the bootstrap admin key, or keeps the one there. A key an operator revoked stays
    /// revoked: the server starts, and says so.
    static func ensureBootstrapKey(_ secret: String, store: any HeraldStorage, ids: ObjectIDGenerator, logger: Logger) async throws {
        guard secret.hasPrefix(APIKeySecret.prefix), secret.utf8.count >= APIKeySecret.prefix.utf8.count + 32 else {
            throw HeraldError(
                .unprocessable, code: "invalid_config",
                "bootstrap_admin_key must start with '\(APIKeySecret.prefix)' and have at least 32 characters after it (herald keys generate prints one)")
        }
        let key = try await store.ensureKey(
            APIKeyRecord(id: ids.next(), name: "bootstrap-admin", role: .admin, createdAt: Date()), secretHash: APIKeySecret.hash(secret)
        )
        if key.revokedAt != nil {
            logger.warning("bootstrap_admin_key was revoked (key \(key.id)); it stays revoked: set a new one, or unset it")
        }
    }

    /// Whether the topic-membership worker runs: switched on, and a sink keeps membership.
    var managesMembership: Bool { configuration.manageTopicMembership && membership.isNeeded }

    /// How long in-flight HTTP requests may take at a graceful shutdown before the connections
    /// still open are ended: a third of `shutdown_timeout`, between 1 and 10 seconds, so the
    /// deliveries draining after the server keep most of the budget.
    static func drainTime(_ shutdownTimeout: Duration) -> Duration {
        min(max(shutdownTimeout / 3, .seconds(1)), .seconds(10))
    }

    /// Serves until SIGTERM or SIGINT, then drains: stops accepting, lets in-flight deliveries
    /// finish and record their outcomes, and returns, all within `shutdown_timeout`. Past it,
    /// the rest is cancelled: deliveries without an outcome stay leased and are retried once
    /// the lease runs out, so nothing accepted is lost.
    public func run(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        logger.info("\(startupSummary)")
        if !sinks.sinks.contains(where: { $0.capabilities.contains(.push) }) {
            // The first run on a fresh machine: say why a phone gets nothing.
            logger.notice(
                "no push sink is configured (\(pushSetupKeys.joined(separator: ", or "))): notifications reach history and the feed only")
        }
        var group = ServiceGroupConfiguration(
            // Named, so a shutdown logs when it starts (the HTTP server drains first, then the
            // background services in turn) and when it is done.
            services: [
                .init(
                    service: StoppingService(
                        name: "herald", base: application(onServerRunning: onServerRunning), logger: logger,
                        onStop: { [connections, streams, logger, drain = Self.drainTime(configuration.shutdownTimeout)] in
                            // In-flight requests get their time; connections still open after it
                            // (idle ones that missed the server's own close) are ended.
                            // Live streams never end by themselves: they end first.
                            streams.closeAll()
                            Task {
                                try? await Task.sleep(for: drain)
                                let closed = connections.closeAll()
                                if closed > 0 { logger.notice("closed \(closed) HTTP connections still open \(drain) into the shutdown") }
                            }
                        }
                    )
                )
            ],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger
        )
        group.maximumGracefulShutdownDuration = configuration.shutdownTimeout
        group.maximumCancellationDuration = .seconds(5)
        try await ServiceGroup(configuration: group).run()
    }
}
