import Foundation
import HeraldCards
import HeraldContent
import HeraldCore
import HeraldFeed
import HeraldHTTP
import HeraldInbox
import HeraldLive
import HeraldTopics
public import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle

/// The HTTP side: the router with every module's routes, and the application serving it.
extension HeraldServer {
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
        // HEAD is answered wherever GET is (RFC 9110 §9.3.2), and listed in `Allow` with it.
        let router = Router(context: HeraldRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: RequestLogMiddleware())
        router.add(middleware: HTTPMetricsMiddleware(metrics: metrics))
        // Outside the error middleware: an error answer gets CORS headers too (a browser app
        // reads a 401's body only with them), and keeps Herald's error shape.
        if !configuration.corsOrigins.isEmpty { router.add(middleware: CrossOriginRequests<HeraldRequestContext>(origins: configuration.corsOrigins)) }
        router.add(middleware: ErrorMiddleware<HeraldRequestContext>())
        router.add(middleware: ExpectContinueMiddleware())
        router.add(middleware: MethodNotAllowedMiddleware(routes: routes))
        router.add(
            middleware: AuthMiddleware(
                keys: store, userTokens: userTokens, endedTokens: endedTokens, failures: failedAuth, proxies: trustedProxies))
        if managesMembership { router.add(middleware: MembershipWakeMiddleware(wake: { [membership] in membership.wake() })) }
        OperationsRoutes(
            store: store, sinks: sinks, circuits: engine.circuits, metricsRegistry: metricsRegistry, metrics: metrics,
            metricsPublic: configuration.metricsPublic
        )
        .register(on: router, table: routes)
        let inboxRoutes = InboxRoutes(
            store: inbox, knownType: { [types] in types.contains($0) },
            changed: { [inboxSync] user, madeBy in inboxSync?.changed(userID: user, madeBy: madeBy) })
        inboxRoutes.register(on: router, table: routes)
        UserRoutes(
            store: store, inbox: inboxRoutes, router: service.router, sinks: sinks, ids: ids,
            maxDevicesPerUser: configuration.maxDevicesPerUser, metrics: metrics, timestamps: configuration.timestamps, handOff: service.handOff,
            registrations: registrations, forms: registrationForms
        ).register(on: router, table: routes)
        ExplainRoutes(service: service, circuits: engine.circuits, maxDevicesPerUser: configuration.maxDevicesPerUser).register(on: router, table: routes)
        SettingsRoutes(store: store, types: types, channels: sinks.choosableChannels, preferences: configuration.preferences)
            .register(on: router, table: routes)
        NotificationRoutes(service: service, store: store, endedTokens: endedTokens).register(on: router, table: routes)
        let topics = SharedTopicStore(database: store)
        TopicRoutes(store: topics, ids: ids, publicRead: configuration.topicsPublicRead).register(on: router, table: routes)
        SubscriptionRoutes(store: topics).register(on: router, table: routes)
        MessageRoutes(service: service, store: store).register(on: router, table: routes)
        let feedDocuments = FeedDocuments(snapshot: feed)
        FeedRoutes(
            store: feedStore, snapshot: feed, documents: feedDocuments, resources: service.validator.resources, ids: ids,
            schemaFile: Bundle.module.url(forResource: "feed.schema", withExtension: "json")
        ).register(on: router, table: routes)
        let content = ContentRoutes(content: SharedContentStore(database: store), users: store)
        content.register(on: router, table: routes)
        CardRoutes(store: cards, history: store, metrics: metrics, timestamps: configuration.timestamps).register(on: router, table: routes)
        EventRoutes(store: cards, forwarder: EventForwarder(sinks: sinks.sinks, logger: logger), metrics: metrics, limiter: eventLimiter)
            .register(on: router, table: routes)
        DeviceAuthRoutes(
            store: store, cards: cards, userTokens: userTokens, endedTokens: endedTokens, signUp: configuration.deviceSignUp, limiter: signUpLimiter,
            failures: failedAuth, proxies: trustedProxies, tokenLifetime: configuration.deviceTokenLifetime,
            secretClaimUntil: configuration.deviceSecretClaimUntil
        ).register(on: router, table: routes)
        StreamRoutes(
            store: store, streams: streams, feedQuery: { try FeedRoutes.query($0) }, feedTag: { try feedDocuments.document(for: $0, at: Date()).tag },
            content: { try await content.document(for: $0, format: nil) }, inboxCounts: { [inbox] in try await inbox.counts(userID: $0).json },
            heartbeat: configuration.streamHeartbeat, timestamps: configuration.timestamps,
            tokenStillValid: { [endedTokens] in await endedTokens.stillValid($0) }
        )
        .register(on: router, table: routes)
        PortalRoutes(
            pages: portalPages, sessions: PortalSessions(store: store), store: store, topics: topics, service: service, circuits: engine.circuits,
            timeline: engine.timeline, ids: ids,
            secureCookies: configuration.resolvedPublicBaseURL.lowercased().hasPrefix("https://"), failures: failedAuth, proxies: trustedProxies
        ).register(on: router, table: routes)
        return router
    }

    /// The storage maintenance the application runs: the core's retention, and the inbox's and
    /// the cards module's purges beside it (tests run its passes themselves).
    public func storageMaintenance() -> StorageMaintenance {
        let policy = configuration.storagePolicy
        var inboxPurges: [StorageMaintenance.ModulePurge] = []
        if let retention = configuration.inboxArchivedRetention {
            inboxPurges.append(
                .init(kind: "inbox_archived", retention: retention, purge: { [inbox] in try await inbox.purge(archived: true, before: $0, limit: $1) }))
        }
        if let retention = configuration.inboxReadRetention {
            inboxPurges.append(
                .init(kind: "inbox_read", retention: retention, purge: { [inbox] in try await inbox.purge(archived: false, before: $0, limit: $1) }))
        }
        return StorageMaintenance(
            store: store, policy: policy,
            modulePurges: [
                .init(kind: "events", retention: configuration.eventRetention, purge: { [cards] in try await cards.purgeEvents(before: $0, limit: $1) })
            ] + inboxPurges,
            logger: logger, metrics: metrics)
    }

    /// The runnable application: the HTTP server, plus, unless `deliveryWorkers` is false (tests
    /// that drive ``DeliveryEngine/drain()`` themselves), the delivery workers, the sinks that
    /// are services and the store. At shutdown they stop in reverse order: the server stops
    /// accepting, the workers drain, the sinks release their clients, and the store closes,
    /// however the group ends.
    public func application(
        deliveryWorkers: Bool = true, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let maintenance = storageMaintenance()
        let named: [(String, any Service)] =
            [("storage", StorageService(store: store))] + sinks.sinks.compactMap { sink in (sink as? any Service).map { ("sink \(sink.name)", $0) } }
            + [
                ("fan-out", fanOut), ("digests", digests), ("delivery workers", engine),
                ("feed maintenance", FeedMaintenance(store: feedStore, snapshot: feed, logger: logger)),
                ("storage maintenance", maintenance), ("live updates", LiveUpdates(store: store, feed: feed, streams: streams, logger: logger)),
                (
                    "snoozes",
                    SnoozeEnding(store: inbox, logger: logger) { [inboxSync] users in
                        for user in users { inboxSync?.changed(userID: user, madeBy: nil) }
                    }
                ),
            ] + (managesMembership ? [("topic membership", membership)] : []) + (inboxSync.map { [("inbox sync pushes", $0)] } ?? [])
        let background: [any Service] = named.map { StoppingService(name: $0.0, base: $0.1, logger: logger) }
        let deadlines = RequestDeadlineLimits(
            head: TimeAmount(configuration.requestHeadTimeout),
            body: TimeAmount(configuration.requestBodyTimeout),
            bodyMinimumRate: configuration.requestBodyMinimumRate
        )
        return Application(
            router: router(),
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [
                        RequestDeadlines(limits: deadlines, connections: connections, metrics: metrics), MalformedRequestAnswer(metrics: metrics),
                        AfterDecoderInstaller(),
                    ],
                    idleTimeout: TimeAmount(configuration.idleTimeout)
                )
            ),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: "Herald",
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)
            ),
            services: deliveryWorkers ? background : [],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger
        )
    }
}
