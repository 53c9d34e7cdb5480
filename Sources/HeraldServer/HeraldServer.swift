import Foundation
public import HeraldCore
import HeraldConsoleSink
import HeraldFeedSink
import HeraldFCMSink
import HeraldHistorySink
import HeraldWebhookSink
public import Hummingbird
public import Logging
public import Prometheus
import ServiceLifecycle
import UnixSignals

/// The composition root: storage, sinks, router, delivery engine and HTTP routes, built from
/// one ``HeraldConfiguration``. `herald serve` and the tests build the server the same way.
///
/// ```swift
/// let server = try await HeraldServer.start(configuration)
/// try await server.application().runService()
/// ```
public struct HeraldServer: Sendable {
    public let configuration: HeraldConfiguration
    public let store: any HeraldStorage
    public let sinks: SinkRegistry
    public let engine: DeliveryEngine
    public let service: NotificationService
    /// The pull feed as served, rebuilt on change.
    public let feed: FeedSnapshot
    public let logger: Logger
    /// Where this server's metrics are collected, exported at `GET /metrics`.
    public let metricsRegistry: PrometheusCollectorRegistry
    let metrics: HeraldMetrics
    let portalPages: PortalPages
    let userTokens: UserTokenVerifier?
    let types: NotificationTypes
    let ids: ObjectIDGenerator

    /// Opens and migrates storage, ensures the bootstrap admin key, and wires every part.
    /// - Parameter extraSinks: sinks an embedder adds beside the configured ones.
    public static func start(_ configuration: HeraldConfiguration, extraSinks: [any NotificationSink] = [], logger: Logger? = nil) async throws -> HeraldServer {
        var logger = logger ?? Logger(label: "herald")
        if let level = Logger.Level(rawValue: configuration.logLevel) { logger.logLevel = level }
        // One registry per server (not the process-wide swift-metrics bootstrap), so servers
        // started side by side in one process (the tests) keep separate counts.
        let metricsRegistry = PrometheusCollectorRegistry()
        let metrics = HeraldMetrics(factory: PrometheusMetricsFactory(registry: metricsRegistry))
        let store = try StorageLocation.open(configuration.database)
        try await store.migrate()
        let ids = ObjectIDGenerator()
        if let key = configuration.bootstrapAdminKey {
            try await ensureBootstrapKey(key, store: store, ids: ids)
        }
        let types = try NotificationTypes(extra: configuration.extraTypes)
        let feed = FeedSnapshot()
        try await feed.reload(from: store)
        var sinkList: [any NotificationSink] = [HistorySink(store: store), FeedSink(store: store, snapshot: feed)]
        if configuration.consoleSink { sinkList.append(ConsoleSink()) }
        if let fcm = configuration.fcm {
            sinkList.append(try await makeFCMSink(fcm, logger: logger, metrics: metrics))
        }
        for webhook in configuration.webhooks {
            sinkList.append(WebhookSink(configuration: .init(name: webhook.name, url: webhook.url, secret: webhook.secret), logger: logger))
        }
        sinkList.append(contentsOf: extraSinks)
        let sinks = try SinkRegistry(sinkList)
        // Webhook matches first, so an operator's routing rule can still remove a webhook.
        let rules = try configuration.webhooks.flatMap(\.rules) + configuration.routing.map(RoutingRule.parse)
        let router = try NotificationRouter(registry: sinks, rules: rules)
        let engine = DeliveryEngine(queue: store, sinks: sinks, configuration: configuration.delivery, logger: logger, metrics: metrics)
        var service = NotificationService(
            validator: NotificationValidator(types: types, resources: try ResourceResolver(publicBaseURL: configuration.resolvedPublicBaseURL)),
            router: router, sinks: sinks, store: store, ids: ids, onAccepted: { [engine] in engine.wake() }
        )
        service.metrics = metrics
        var userTokens: UserTokenVerifier?
        if let secret = configuration.userTokenSecret {
            // HS256 keys shorter than the hash output are weak, and jwt-kit refuses them.
            guard secret.utf8.count >= UserTokenVerifier.minimumSecretBytes else {
                throw HeraldError(.unprocessable, code: "invalid_config", "user_token_secret must be at least \(UserTokenVerifier.minimumSecretBytes) bytes")
            }
            userTokens = await UserTokenVerifier(secret: secret)
        }
        return HeraldServer(
            configuration: configuration, store: store, sinks: sinks, engine: engine, service: service, feed: feed,
            logger: logger, metricsRegistry: metricsRegistry, metrics: metrics, portalPages: try await PortalPages.load(), userTokens: userTokens,
            types: types, ids: ids
        )
    }

    static func makeFCMSink(_ settings: HeraldConfiguration.FCMSettings, logger: Logger, metrics: HeraldMetrics) async throws -> FCMSink {
        do {
            let account = try ServiceAccount.load(path: settings.credentials)
            return try await FCMSink(
                configuration: FCMConfiguration(account: account, endpoint: settings.endpoint, maxConcurrency: settings.maxConcurrency), logger: logger,
                metrics: metrics
            )
        } catch let error as FCMError {
            throw HeraldError(.unprocessable, code: "invalid_config", error.description)
        }
    }

    static func ensureBootstrapKey(_ secret: String, store: any HeraldStorage, ids: ObjectIDGenerator) async throws {
        guard secret.hasPrefix(APIKeySecret.prefix), secret.utf8.count >= APIKeySecret.prefix.utf8.count + 32 else {
            throw HeraldError(.unprocessable, code: "invalid_config", "bootstrap_admin_key must start with '\(APIKeySecret.prefix)' and have at least 32 characters after it (herald keys generate prints one)")
        }
        let hash = APIKeySecret.hash(secret)
        if try await store.key(secretHash: hash) == nil {
            try await store.createKey(APIKeyRecord(id: ids.next(), name: "bootstrap-admin", role: .admin, createdAt: Date()), secretHash: hash)
        }
    }

    /// The Hummingbird router with every route, the auth and error middleware.
    public func router() -> Router<HeraldRequestContext> {
        makeRouter(recordingInto: RouteTable())
    }

    /// Every (method, path) the router serves, for checking the OpenAPI document.
    public var routes: [RouteTable.Route] {
        let table = RouteTable()
        _ = makeRouter(recordingInto: table)
        return table.routes
    }

    private func makeRouter(recordingInto routes: RouteTable) -> Router<HeraldRequestContext> {
        let router = Router(context: HeraldRequestContext.self)
        router.add(middleware: RequestLogMiddleware())
        router.add(middleware: HTTPMetricsMiddleware(metrics: metrics))
        router.add(middleware: ErrorMiddleware<HeraldRequestContext>())
        router.add(middleware: AuthMiddleware(keys: store, userTokens: userTokens))
        OperationsRoutes(store: store, metricsRegistry: metricsRegistry, metrics: metrics, metricsPublic: configuration.metricsPublic)
            .register(on: router, table: routes)
        UserRoutes(store: store, types: types, ids: ids).register(on: router, table: routes)
        NotificationRoutes(service: service, store: store).register(on: router, table: routes)
        TopicRoutes(store: store, ids: ids).register(on: router, table: routes)
        SubscriptionRoutes(store: store).register(on: router, table: routes)
        MessageRoutes(service: service, store: store, checksFCMTopicLimit: sinks["fcm"] != nil).register(on: router, table: routes)
        FeedRoutes(store: store, snapshot: feed, resources: service.validator.resources, ids: ids).register(on: router, table: routes)
        ContentRoutes(store: store).register(on: router, table: routes)
        PortalRoutes(
            pages: portalPages, sessions: PortalSessions(store: store), store: store, service: service, ids: ids, checksFCMTopicLimit: sinks["fcm"] != nil
        ).register(on: router)
        return router
    }

    /// The runnable application: the HTTP server, plus the delivery workers unless
    /// `deliveryWorkers` is false (tests that drive ``DeliveryEngine/drain()`` themselves).
    public func application(
        deliveryWorkers: Bool = true, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "Herald"),
            services: deliveryWorkers ? [engine, FeedMaintenance(store: store, snapshot: feed, logger: logger)] : [],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger
        )
    }

    /// Serves until SIGTERM or SIGINT, then drains: stops accepting, lets in-flight deliveries
    /// finish and record their outcomes, and returns, all within `shutdown_timeout`. Past it,
    /// the rest is cancelled: deliveries without an outcome stay leased and are retried once
    /// the lease runs out, so nothing accepted is lost.
    public func run(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        var group = ServiceGroupConfiguration(
            services: [.init(service: application(onServerRunning: onServerRunning))],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger
        )
        group.maximumGracefulShutdownDuration = configuration.shutdownTimeout
        group.maximumCancellationDuration = .seconds(5)
        try await ServiceGroup(configuration: group).run()
        await store.close()
    }
}
