public import Configuration
import Foundation
import HeraldCards
public import HeraldCore
import HeraldHTTP
public import Logging
import SystemPackage

/// Everything a Herald server is configured with, read once at start-up.
///
/// Keys (file and environment, README.md, "Configuration"): a nested key maps to the environment by upper-casing
/// it and replacing `.` with `_` after the `HERALD_` prefix, so `delivery.max_attempts` is
/// `HERALD_DELIVERY_MAX_ATTEMPTS`. Command-line options win over the environment, which wins
/// over the file.
public struct HeraldConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    /// `sqlite:PATH` (default `sqlite:herald.sqlite`) or `sqlite::memory:`.
    public var database: String = "sqlite:herald.sqlite"
    /// `database_read_url`: a streaming replica of a PostgreSQL `database`, where history pages
    /// are read while it is current (docs/scaling.md, "Read replicas for history reads").
    public var databaseReadURL: String?
    /// Prefix for resource paths; defaults to `http://<host>:<port>`.
    public var publicBaseURL: String?
    /// An admin key created (or kept) at start-up, so a fresh server can be used at once.
    public var bootstrapAdminKey: String?
    /// Secret for HS256 user tokens; user tokens are refused when unset.
    public var userTokenSecret: String?
    public var extraTypes: [String] = []
    /// Routing rules, one per line: `type=violation => +webhook:moderation` (see ``RoutingRule``).
    public var routing: [String] = []
    /// `preferences.defaults` and `preferences.critical`: what users who never chose get, and the
    /// types user-facing channels always deliver (docs/routing.md, "Channels and preferences").
    public var preferences = ChannelPreferences()
    public var delivery: DeliveryEngineConfiguration = .init()
    /// The configured sink instances (`sinks.<name>` with a `type`), in order; each is built
    /// by the factory of its type, which reads its own settings. `history` and `feed` are
    /// always there and are not listed.
    public var sinks: [SinkInstance] = []
    public var logLevel: String = "info"

    /// `base` (by default Herald's own: lines on standard error) at ``logLevel``.
    public func logger(_ base: Logger? = nil) -> Logger {
        var logger = base ?? Logger(label: "herald", factory: DeferredMetadataLogHandler.standardError)
        if let level = Logger.Level(rawValue: logLevel) { logger.logLevel = level }
        return logger
    }
    /// What was set and is checked once the sinks are built (see ``UnreadSettings``).
    var unread: UnreadSettings?
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    /// How long SIGTERM/SIGINT may take: in-flight deliveries finish and are recorded within
    /// it; after it, what is left is cancelled and stays leased until another worker retries it.
    public var shutdownTimeout: Duration = .seconds(30)
    /// Whether `GET /metrics` answers without an admin key (for a scraper on a private network).
    public var metricsPublic = false
    /// Accepts that may wait for a group commit at once; one more is answered 503 with Retry-After.
    public var maxPendingAccepts = 10_000
    /// Open HTTP connections at once; further connections wait in the listen backlog.
    public var maxConnections = 4_096
    /// How long an idle keep-alive connection stays open.
    public var idleTimeout: Duration = .seconds(60)
    /// How long a client has to send a complete request head (slow-loris defence).
    public var requestHeadTimeout: Duration = .seconds(10)
    /// How long a client has to send a request body after its head, plus a second for each
    /// `requestBodyMinimumRate` bytes sent (slow-POST defence: a fair upload always fits).
    public var requestBodyTimeout: Duration = .seconds(20)
    /// Bytes a second a request body must average past `requestBodyTimeout`.
    public var requestBodyMinimumRate = 500
    /// Recipients a topic or audience fan-out may have to be written in the accepting
    /// transaction; larger ones are accepted with a cursor and written page by page afterwards.
    public var fanOutInlineLimit = 10_000
    /// Devices kept per user, across providers; registering one more removes the least recently
    /// registered.
    public var maxDevicesPerUser = 10
    /// `caps`: frequency caps folding into digests (docs/timing.md).
    public var caps: [FrequencyCap] = []
    /// `scheduling.default_timezone`: the zone of users whose settings name none.
    public var defaultTimeZone = QuietHours.utc
    /// Devices not registered again for this long are pruned (Firebase's advice for stale tokens).
    public var staleDevicesAfter: Duration = .seconds(60 * 86_400)
    /// How long finished (delivered, failed, dead) deliveries are kept.
    public var deliveryRetention: Duration = .seconds(7 * 86_400)
    /// How long idempotency keys are remembered for purging (they answer for 24 hours).
    public var idempotencyRetention: Duration = .seconds(86_400)
    /// How long history rows are kept; nil keeps them forever, as apps expect.
    public var historyRetention: Duration?
    /// How long Message Hub archive entries are kept; nil keeps them forever.
    public var archiveRetention: Duration?
    /// The share of the database's time a purge that is behind may take (`retention.purge_share`):
    /// after each batch it rests so that writes waiting behind it get the rest.
    public var purgeShare = StorageMaintenance.Policy.defaultWriterShare
    /// Whether `GET /channel` answers without credentials (`topics.public_read`).
    public var topicsPublicRead = false
    /// Whether Herald keeps provider-side topic membership equal to its subscriptions, through
    /// the sinks that keep it (FCM's Instance ID API): `topics.manage_membership`.
    public var manageTopicMembership = true
    /// How instants are written in history items and push data (openapi.yaml): Pong's form by default.
    public var timestamps: TimestampStyle = .pong
    /// How long engagement events are kept.
    public var eventRetention: Duration = .seconds(90 * 86_400)
    /// How long archived inbox items are kept (`retention.inbox_archived`); nil keeps them.
    public var inboxArchivedRetention: Duration?
    /// How long read inbox items are kept (`retention.inbox_read`); nil keeps them.
    public var inboxReadRetention: Duration?
    /// Whether an inbox change sends a silent push to the user's other devices (`inbox.sync_push`).
    public var inboxSyncPush = true
    /// The least time between two such pushes to one user (`inbox.sync_push_interval`): a
    /// burst of changes is one push.
    public var inboxSyncInterval: Duration = .seconds(3)
    /// Engagement events one user token may post per hour (a bucket that holds an hour's worth,
    /// so an app back online sends its backlog at once). Keys acting for a user are not counted.
    public var eventsPerUserPerHour = 20_000
    /// Whether `POST /api/auth/device` gives a device without a backend's proof an anonymous user.
    public var deviceSignUp = false
    /// Proxies in front of Herald whose `X-Forwarded-For` names the client (addresses and CIDR
    /// ranges), for per-client limits; empty: the connection's address is the client's.
    public var trustedProxies: [String] = []
    /// Origins of browser apps that may call the API across origins (CORS), or `*` for any;
    /// empty: no CORS headers, as before.
    public var corsOrigins: [String] = []
    /// Anonymous sign-ups allowed per client address per minute.
    public var deviceSignUpsPerMinute = 10
    /// How long a token from `POST /api/auth/device` is valid.
    public var deviceTokenLifetime: Duration = .seconds(30 * 86_400)
    /// How often an idle live stream (`GET /api/stream`) sends a heartbeat comment.
    public var streamHeartbeat: Duration = .seconds(15)
    /// Live streams a user may hold open; opening one more closes their oldest.
    public var maxStreamsPerUser = 5
    /// Live streams open at once in one process, all users together; nil: half of
    /// `server.max_connections`, so streams never take every connection.
    public var maxStreamsTotal: Int?
    /// Failed credential checks (a wrong key, a forged token, a bad proof or device secret) one
    /// client address may make per minute; past it, its requests with credentials are 429.
    public var failedAuthPerMinute = 60
    /// Until when an anonymous user that existed before device secrets may be claimed by the
    /// first device that signs in for it; nil: 30 days after the upgrade that added them.
    public var deviceSecretClaimUntil: Date?
    /// Device registrations (and unregistrations) one user may make per minute.
    public var registrationsPerUserPerMinute = 30
    /// Device registrations one API key may make per minute, for all the users it acts for.
    public var registrationsPerKeyPerMinute = 60_000

    /// What the configuration asks an operator to change (settings no longer read), logged at
    /// start.
    public var warnings: [String] = []

    /// ``maxStreamsTotal`` as configured, or its default.
    public var resolvedMaxStreamsTotal: Int { maxStreamsTotal ?? max(1, maxConnections / 2) }

    public init() {}

    /// The URL resource paths are joined to.
    public var resolvedPublicBaseURL: String {
        publicBaseURL ?? "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// Reads every key from `reader`, keeping the defaults above for keys that are absent.
    /// - Parameter sinkNames: the names under `sinks:` in the configuration file (the reader
    ///   cannot list keys); names in `sinks.instances` (and, for webhooks, `sinks.webhooks`)
    ///   are added to them.
    /// - Parameter shorthands: the sink types' configuration shorthands (``SinkShorthand``), by
    ///   type; by default those of Herald's own sink types.
    /// - Parameter fileKeys: every key the configuration file sets (the reader cannot list
    ///   them), for the entries of maps such as `preferences.defaults`.
    /// - Throws: ``HeraldError`` naming the key when a value has the wrong type or range.
    public init(
        reader: ConfigReader, sinkNames: [String] = [], shorthands: [String: SinkShorthand] = Self.builtInShorthands, fileKeys: [String] = []
    ) throws {
        self.init()
        host = try reader.requiredString(forKey: "host", default: host)
        port = try reader.requiredInt(forKey: "port", default: port)
        guard (0...65535).contains(port) else { throw Self.invalid("port", "must be 0-65535") }
        database = try reader.requiredString(forKey: "database", default: database)
        // A URL may carry a password: kept out of the configuration's access log like the keys.
        databaseReadURL = try reader.optionalString(forKey: "database_read_url", isSecret: true)
        if databaseReadURL != nil, StorageLocation.sqlitePath(database) != nil {
            throw Self.invalid("database_read_url", "names a PostgreSQL replica, so database must be a postgres:// URL (SQLite has one file and no replicas)")
        }
        publicBaseURL = try reader.optionalString(forKey: "public_base_url")
        bootstrapAdminKey = try reader.optionalString(forKey: "bootstrap_admin_key", isSecret: true)
        userTokenSecret = try reader.optionalString(forKey: "user_token_secret", isSecret: true)
        extraTypes = try reader.optionalStringList(forKey: "types.extra") ?? []
        routing = try reader.optionalStringList(forKey: "routing") ?? []
        preferences = try Self.readPreferences(reader, fileKeys: fileKeys, types: try NotificationTypes(extra: extraTypes))
        caps = try Self.readCaps(reader, fileKeys: fileKeys, types: try NotificationTypes(extra: extraTypes))
        logLevel = try reader.requiredString(forKey: "log_level", default: logLevel).lowercased()
        // swift-log's names, in either case (`DEBUG` is common in environments); anything else
        // was ignored, leaving `info` without a word.
        guard Self.logLevels.contains(logLevel) else { throw Self.invalid("log_level", "must be one of \(Self.logLevels.joined(separator: ", "))") }
        let shutdown = try reader.requiredDouble(forKey: "shutdown_timeout", default: shutdownTimeout.seconds)
        guard shutdown >= 0.1, shutdown <= 3600 else { throw Self.invalid("shutdown_timeout", "must be a number of seconds, 0.1-3600") }
        shutdownTimeout = .saturating(seconds: shutdown)
        try readDelivery(reader)
        try readServer(reader)
        try readFeatures(reader, shorthands: shorthands)
        try readAuthAndStreams(reader)
        sinks = try SinkInstance.read(from: reader, namesInFile: sinkNames, shorthands: shorthands)
    }

    /// `delivery.*` and `circuit.*`: how the engine works its queue.
    private mutating func readDelivery(_ reader: ConfigReader) throws {
        delivery.retry.maxAttempts = try reader.requiredInt(forKey: "delivery.max_attempts", default: delivery.retry.maxAttempts)
        guard (1...100).contains(delivery.retry.maxAttempts) else { throw Self.invalid("delivery.max_attempts", "must be 1-100") }
        let backoff = try reader.requiredDouble(forKey: "delivery.backoff", default: delivery.retry.baseDelay.seconds)
        guard backoff > 0, backoff <= 3600 else { throw Self.invalid("delivery.backoff", "must be a number of seconds, 0-3600") }
        delivery.retry.baseDelay = .saturating(seconds: backoff)
        let lease = try reader.requiredDouble(forKey: "delivery.lease", default: delivery.lease.seconds)
        guard lease >= 0.5, lease <= 3600 else { throw Self.invalid("delivery.lease", "must be a number of seconds, 0.5-3600") }
        delivery.lease = .saturating(seconds: lease)
        let maxRetryAfter = try reader.requiredDouble(forKey: "delivery.max_retry_after", default: delivery.maxRetryAfter.seconds)
        guard maxRetryAfter >= 1, maxRetryAfter <= 86_400 else { throw Self.invalid("delivery.max_retry_after", "must be a number of seconds, 1-86400") }
        delivery.maxRetryAfter = .saturating(seconds: maxRetryAfter)
        // Circuits used to open after `circuit.failures` failures in a row, which held a provider
        // that fails part of the time as if it were down; they now judge a window's success rate.
        if ((try? reader.optionalInt(forKey: "circuit.failures")) ?? nil) != nil || ((try? reader.optionalString(forKey: "circuit.failures")) ?? nil) != nil {
            warnings.append(
                "circuit.failures is no longer read: a circuit opens when fewer than circuit.success_floor (5 %) of its last circuit.window (100) deliveries get through; remove it (docs/durability.md)"
            )
        }
        delivery.circuit.window = try reader.requiredInt(forKey: "circuit.window", default: delivery.circuit.window)
        guard (1...100_000).contains(delivery.circuit.window) else { throw Self.invalid("circuit.window", "must be 1-100000") }
        delivery.circuit.minimumCalls = try reader.requiredInt(forKey: "circuit.min_calls", default: delivery.circuit.minimumCalls)
        guard (1...delivery.circuit.window).contains(delivery.circuit.minimumCalls) else {
            throw Self.invalid("circuit.min_calls", "must be 1-\(delivery.circuit.window) (circuit.window)")
        }
        delivery.circuit.successFloor = try reader.requiredDouble(forKey: "circuit.success_floor", default: delivery.circuit.successFloor)
        guard delivery.circuit.successFloor.isFinite, (0...1).contains(delivery.circuit.successFloor) else {
            throw Self.invalid("circuit.success_floor", "must be a share between 0 and 1 (0.05 is 5 %)")
        }
        delivery.circuit.probes = try reader.requiredInt(forKey: "circuit.probes", default: delivery.circuit.probes)
        guard (1...1_000).contains(delivery.circuit.probes) else { throw Self.invalid("circuit.probes", "must be 1-1000") }
        delivery.circuit.probeAfter = try reader.duration(forKey: "circuit.probe_after", in: 1...3_600) ?? delivery.circuit.probeAfter
        delivery.circuit.maxProbeInterval = try reader.duration(forKey: "circuit.max_probe_interval", in: 1...86_400) ?? delivery.circuit.maxProbeInterval
        delivery.workers = try reader.requiredInt(forKey: "delivery.workers", default: delivery.workers)
        guard (1...64).contains(delivery.workers) else { throw Self.invalid("delivery.workers", "must be 1-64") }
        delivery.batchSize = try reader.requiredInt(forKey: "delivery.batch_size", default: delivery.batchSize)
        guard (1...10_000).contains(delivery.batchSize) else { throw Self.invalid("delivery.batch_size", "must be 1-10000") }
    }

    /// `metrics.public`, `server.*`, `fanout.*`, `devices.*` and `retention.*`.
    private mutating func readServer(_ reader: ConfigReader) throws {
        metricsPublic = try reader.requiredBool(forKey: "metrics.public", default: metricsPublic)
        maxPendingAccepts = try reader.requiredInt(forKey: "server.max_pending_accepts", default: maxPendingAccepts)
        guard (1...1_000_000).contains(maxPendingAccepts) else { throw Self.invalid("server.max_pending_accepts", "must be 1-1000000") }
        maxConnections = try reader.requiredInt(forKey: "server.max_connections", default: maxConnections)
        guard (1...1_000_000).contains(maxConnections) else { throw Self.invalid("server.max_connections", "must be 1-1000000") }
        idleTimeout = try reader.duration(forKey: "server.idle_timeout", in: 1...86_400) ?? idleTimeout
        requestHeadTimeout = try reader.duration(forKey: "server.request_head_timeout", in: 1...3_600) ?? requestHeadTimeout
        requestBodyTimeout = try reader.duration(forKey: "server.request_body_timeout", in: 1...3_600) ?? requestBodyTimeout
        requestBodyMinimumRate = try reader.requiredInt(forKey: "server.request_body_min_rate", default: requestBodyMinimumRate)
        guard (1...1_000_000_000).contains(requestBodyMinimumRate) else {
            throw Self.invalid("server.request_body_min_rate", "must be 1-1000000000 (bytes a second)")
        }
        fanOutInlineLimit = try reader.requiredInt(forKey: "fanout.inline_limit", default: fanOutInlineLimit)
        guard (0...10_000_000).contains(fanOutInlineLimit) else { throw Self.invalid("fanout.inline_limit", "must be 0-10000000") }
        maxDevicesPerUser = try reader.requiredInt(forKey: "devices.max_per_user", default: maxDevicesPerUser)
        guard (1...1_000).contains(maxDevicesPerUser) else { throw Self.invalid("devices.max_per_user", "must be 1-1000") }
        let zone = try reader.requiredString(forKey: "scheduling.default_timezone", default: defaultTimeZone.identifier)
        guard let parsedZone = TimeZone(identifier: zone) else {
            throw Self.invalid("scheduling.default_timezone", "must be an IANA time zone such as Europe/Paris (got '\(zone)')")
        }
        defaultTimeZone = parsedZone
        staleDevicesAfter = try reader.duration(forKey: "devices.stale_after", in: 86_400...(3_650 * 86_400)) ?? staleDevicesAfter
        deliveryRetention = try reader.duration(forKey: "retention.deliveries", in: 3_600...(3_650 * 86_400)) ?? deliveryRetention
        idempotencyRetention = try reader.duration(forKey: "retention.idempotency", in: 86_400...(365 * 86_400)) ?? idempotencyRetention
        historyRetention = try reader.duration(forKey: "retention.history", in: 86_400...(36_500 * 86_400))
        archiveRetention = try reader.duration(forKey: "retention.archive", in: 86_400...(36_500 * 86_400))
        let share = try reader.requiredDouble(forKey: "retention.purge_share", default: purgeShare)
        guard share.isFinite, share >= 0.05, share <= 1 else { throw Self.invalid("retention.purge_share", "must be between 0.05 and 1") }
        purgeShare = share
    }

    /// `topics.*`, `timestamps`, `events.*` and `inbox.*`.
    private mutating func readFeatures(_ reader: ConfigReader, shorthands: [String: SinkShorthand]) throws {
        topicsPublicRead = try reader.requiredBool(forKey: "topics.public_read", default: topicsPublicRead)
        manageTopicMembership =
            try reader.aliasedBool(forKey: "topics.manage_membership", aliases: shorthands.values.flatMap(\.keyAliases)) ?? manageTopicMembership
        let style = try reader.requiredString(forKey: "timestamps", default: timestamps.rawValue)
        guard let parsedStyle = TimestampStyle(rawValue: style) else { throw Self.invalid("timestamps", "must be 'pong' or 'rfc3339'") }
        timestamps = parsedStyle
        eventRetention = try reader.duration(forKey: "retention.events", in: 86_400...(36_500 * 86_400)) ?? eventRetention
        inboxArchivedRetention = try reader.duration(forKey: "retention.inbox_archived", in: 86_400...(36_500 * 86_400))
        inboxReadRetention = try reader.duration(forKey: "retention.inbox_read", in: 86_400...(36_500 * 86_400))
        inboxSyncPush = try reader.requiredBool(forKey: "inbox.sync_push", default: inboxSyncPush)
        inboxSyncInterval = try reader.duration(forKey: "inbox.sync_push_interval", in: 0.1...3_600) ?? inboxSyncInterval
        eventsPerUserPerHour = try reader.requiredInt(forKey: "events.max_per_user_per_hour", default: eventsPerUserPerHour)
        // Below one full batch, a batch the API takes could never be stored.
        guard (EventRoutes.maxEventsPerRequest...1_000_000_000).contains(eventsPerUserPerHour) else {
            throw Self.invalid("events.max_per_user_per_hour", "must be \(EventRoutes.maxEventsPerRequest)-1000000000")
        }
    }

    /// `auth.*`, CORS and proxies, `stream.*` and registration limits (after `server.*`: `stream.max_total` is checked against `server.max_connections`).
    private mutating func readAuthAndStreams(_ reader: ConfigReader) throws {
        deviceSignUp = try reader.requiredBool(forKey: "auth.device_sign_up", default: deviceSignUp)
        deviceSignUpsPerMinute = try reader.requiredInt(forKey: "auth.device_sign_ups_per_minute", default: deviceSignUpsPerMinute)
        trustedProxies = try reader.optionalStringList(forKey: "server.trusted_proxies") ?? trustedProxies
        _ = try TrustedProxies.configured(trustedProxies)
        corsOrigins = try reader.optionalStringList(forKey: "server.cors_origins") ?? corsOrigins
        if let problem = corsOrigins.lazy.compactMap({ CrossOriginRequests<HeraldRequestContext>.problem($0) }).first {
            throw Self.invalid("server.cors_origins", problem)
        }
        guard (1...100_000).contains(deviceSignUpsPerMinute) else { throw Self.invalid("auth.device_sign_ups_per_minute", "must be 1-100000") }
        deviceTokenLifetime = try reader.duration(forKey: "auth.device_token_ttl", in: 60...(3_650 * 86_400)) ?? deviceTokenLifetime
        streamHeartbeat = try reader.duration(forKey: "stream.heartbeat", in: 1...300) ?? streamHeartbeat
        maxStreamsPerUser = try reader.requiredInt(forKey: "stream.max_per_user", default: maxStreamsPerUser)
        guard (1...100).contains(maxStreamsPerUser) else { throw Self.invalid("stream.max_per_user", "must be 1-100") }
        maxStreamsTotal = try reader.optionalInt(forKey: "stream.max_total") ?? maxStreamsTotal
        if let total = maxStreamsTotal, !(1...maxConnections).contains(total) {
            throw Self.invalid("stream.max_total", "must be 1-\(maxConnections) (server.max_connections)")
        }
        failedAuthPerMinute = try reader.requiredInt(forKey: "auth.failed_attempts_per_minute", default: failedAuthPerMinute)
        guard (1...1_000_000).contains(failedAuthPerMinute) else { throw Self.invalid("auth.failed_attempts_per_minute", "must be 1-1000000") }
        if let text = try reader.optionalString(forKey: "auth.device_secret_claim_until") {
            guard let date = Timestamp.parse(text) else {
                throw Self.invalid("auth.device_secret_claim_until", "must be an RFC 3339 instant with an offset (2027-01-31T00:00:00Z), not '\(text)'")
            }
            deviceSecretClaimUntil = date
        }
        registrationsPerUserPerMinute = try reader.requiredInt(forKey: "devices.registrations_per_user_per_minute", default: registrationsPerUserPerMinute)
        guard (1...100_000).contains(registrationsPerUserPerMinute) else {
            throw Self.invalid("devices.registrations_per_user_per_minute", "must be 1-100000")
        }
        registrationsPerKeyPerMinute = try reader.requiredInt(forKey: "devices.registrations_per_key_per_minute", default: registrationsPerKeyPerMinute)
        guard (1...100_000_000).contains(registrationsPerKeyPerMinute) else {
            throw Self.invalid("devices.registrations_per_key_per_minute", "must be 1-100000000")
        }
    }

    /// The configuration shorthands of Herald's own sink types, by type.
    public static let builtInShorthands = shorthands(of: SinkFactory.builtIn)

    /// The configuration shorthands `factories` offer, by type (the first factory of a type).
    public static func shorthands(of factories: [SinkFactory]) -> [String: SinkShorthand] {
        Dictionary(uniqueKeysWithValues: factories.firstOfEachType.compactMap { factory in factory.shorthand.map { (factory.type, $0) } })
    }

    /// Reads the layered configuration (see ``reader(configFile:overrides:environment:)``),
    /// including the sink instances declared in the file.
    /// - Parameter shorthands: as for ``init(reader:sinkNames:shorthands:fileKeys:)``; an operator's
    ///   server with its own sink types passes ``shorthands(of:)`` of its factories.
    public static func load(
        configFile: String?, overrides: [String: String] = [:], environment: [String: String]? = nil,
        shorthands: [String: SinkShorthand] = builtInShorthands
    ) async throws -> HeraldConfiguration {
        let read = ReadConfigurationKeys()
        let reader = try await reader(
            configFile: configFile, overrides: overrides, environment: environment, accessReporter: read, fallbacks: Array(shorthands.values))
        let file = configFile.flatMap(ConfigurationFileKeys.root(ofFile:))
        let keys = ConfigurationFileKeys.keys(in: file)
        var configuration = try HeraldConfiguration(
            reader: reader, sinkNames: ConfigurationFileKeys.sinkNames(in: file), shorthands: shorthands, fileKeys: keys)
        let sections = Set(shorthands.values.map(\.section))
        if let configFile, let section = keys.first(where: { ConfigurationFileKeys.isSinkSection($0, shorthands: sections) }) {
            let hint = ConfigurationFileKeys.sinkSectionHint(section, shorthands: Array(shorthands.values))
            throw Self.invalid(section, "in \(configFile) is a section, not a value: \(hint)")
        }
        if let configFile, let unknown = keys.first(where: { !read.contains($0) && !ConfigurationFileKeys.isSinkKey($0, shorthands: sections) }) {
            if let example = read.all.filter({ $0.hasPrefix(unknown + ".") }).min() {
                throw Self.invalid(unknown, "in \(configFile) is a section, not a value: its settings go under it (such as \(example))")
            }
            throw Self.invalid(unknown, "in \(configFile) is not a setting Herald has (README.md's Configuration table lists them)")
        }
        let variables = (environment ?? ProcessInfo.processInfo.environment).keys
        configuration.unread = UnreadSettings(file: configFile, fileKeys: keys, environmentNames: Array(variables), read: read, shorthands: sections)
        return configuration
    }

    /// Adds a sink instance configured in code, its settings relative to its section
    /// (`["url": "…", "secret": "…"]`).
    public mutating func addSink(_ name: String, type: String, _ values: [String: String] = [:]) {
        sinks.append(SinkInstance(name: name, type: type, settings: SinkSettings(name: name, values: values)))
    }

    static func invalid(_ key: String, _ problem: String) -> HeraldError {
        HeraldError(.unprocessable, code: "invalid_config", "\(key) \(problem)")
    }
}
