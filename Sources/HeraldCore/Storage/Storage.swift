public import Foundation

/// API keys, stored by a hash of their secret.
public protocol APIKeyStore: Sendable {
    func createKey(_ key: APIKeyRecord, secretHash: String) async throws
    /// Stores `key` unless a key (revoked or not) already has this hash. - Returns: the stored
    /// key: the new one, or the one that was there, with its revocation.
    func ensureKey(_ key: APIKeyRecord, secretHash: String) async throws -> APIKeyRecord
    /// The active (not revoked) key with this hash.
    func key(secretHash: String) async throws -> APIKeyRecord?
    func keys() async throws -> [APIKeyRecord]
    /// - Returns: false when no active key has this id.
    func revokeKey(id: ObjectID, at date: Date) async throws -> Bool
}

/// Users' settings, attributes and devices.
public protocol UserStore: Sendable {
    func settings(userID: String) async throws -> UserSettings
    /// Reads, changes and saves a user's settings in one transaction. `change` is escaping: a
    /// store may run it on a task of its own (PostgreSQL's supervised operations), which can
    /// release it after the call returns, and may run it twice (SQLite's group commit retries a
    /// failed batch's requests one by one), so it must only change the settings it is given.
    func updateSettings(userID: String, _ change: @escaping @Sendable (inout UserSettings) throws -> Void) async throws -> UserSettings
    /// The settings `userID` had at `date`: the version saved last at or before it; nil when
    /// they had saved none by then (they had the defaults). Every change
    /// ``updateSettings(userID:_:)`` saves is a version; versions older than the one in force
    /// at the oldest stored notification are removed as new ones are saved.
    func settingsVersion(userID: String, at date: Date) async throws -> SettingsVersion?
    func setAttributes(_ attributes: UserAttributes, userID: String) async throws
    func attributes(userID: String) async throws -> UserAttributes?
    /// Registers a device for `userID`, keyed by its provider and address key, moving it from
    /// any other user (whose pending pushes to it fail: they must never reach the new owner).
    /// Registering again updates the address, app and facts given. Idempotent. With `keep`, the
    /// call then keeps the user's `keep` most recently registered devices and removes the rest
    /// (their pending pushes fail), in the registration's transaction or one of its own.
    func registerDevice(
        userID: String, registration: DeviceRegistration, newID: ObjectID, at date: Date, keepingAtMost keep: Int?
    ) async throws
        -> RegisteredDevice
    /// - Returns: false when the user had no device with this provider and address key.
    func unregisterDevice(userID: String, provider: String, addressKey: String, at date: Date) async throws -> Bool
    func devices(userID: String) async throws -> [Device]
    /// Removes up to `limit` devices not registered again since `before`. - Returns: how many.
    func pruneDevices(registeredBefore before: Date, limit: Int, at date: Date) async throws -> Int
    /// Settings and devices for each id, in the order given; unknown users get defaults.
    func recipients(userIDs: [String]) async throws -> [RecipientContext]
    /// Erases what Herald holds for `userID`, in one transaction: settings and attributes, devices
    /// (their queued pushes fail, as when a device is unregistered), subscriptions, history,
    /// engagement events and card state. Idempotent: an unknown user erases nothing.
    func eraseUser(userID: String, at date: Date) async throws -> UserErasure
}

/// What ``UserStore/eraseUser(userID:at:)`` removed, by kind.
public struct UserErasure: Sendable, Equatable, Encodable {
    /// Devices removed.
    public var devices = 0
    /// Topic subscriptions removed.
    public var subscriptions = 0
    /// History rows removed.
    public var history = 0
    /// Engagement events removed.
    public var events = 0
    /// Card pool and history rows removed.
    public var cards = 0

    /// Counts as given; none by default.
    public init(devices: Int = 0, subscriptions: Int = 0, history: Int = 0, events: Int = 0, cards: Int = 0) {
        (self.devices, self.subscriptions, self.history, self.events, self.cards) = (devices, subscriptions, history, events, cards)
    }
}

extension UserStore {
    /// Registers a device with no limit on the user's devices.
    public func registerDevice(userID: String, registration: DeviceRegistration, newID: ObjectID, at date: Date) async throws -> Device {
        try await registerDevice(userID: userID, registration: registration, newID: newID, at: date, keepingAtMost: nil).device
    }
}

/// A registered device, and the user's devices removed to keep the limit.
public struct RegisteredDevice: Sendable, Equatable {
    /// The device as stored.
    public var device: Device
    /// The user's oldest devices removed to make room, if any.
    public var evicted: [Device]

    /// A registration's result.
    public init(device: Device, evicted: [Device]) {
        self.device = device
        self.evicted = evicted
    }
}

/// Notifications and their deliveries.
public protocol NotificationStore: Sendable {
    /// Stores the notification and all its deliveries in one transaction, unless its
    /// idempotency key was accepted since `idempotencySince`, in which case nothing is stored
    /// and the first receipt is returned.
    func accept(
        _ notification: HeraldNotification, recipients: Int, deliveries: [PlannedDelivery], idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult
    /// Stores a notification for `userIDs` like ``accept(_:recipients:deliveries:idempotency:idempotencySince:)``,
    /// reading the users' settings and devices in the accepting transaction and planning each
    /// with `route`, so an accept is one database hop. Every id named is a recipient, as in
    /// ``UserStore/recipients(userIDs:)``. Their history rows (the planned deliveries to
    /// ``NotificationRouter/historySink``) are written in the same transaction and those
    /// deliveries stored as delivered: a user's history holds the notification once it is
    /// accepted. With a `handOff`, each other delivery it admits is stored leased until
    /// ``DeliveryHandOff/leaseEnd(from:)`` of the notification's timestamp, its first attempt
    /// counted (as ``DeliveryQueue/claimDue(now:limit:lease:sinks:)`` leaves it), and handed to
    /// it once the transaction has committed.
    func acceptUsers(
        _ notification: HeraldNotification, userIDs: [String], route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery],
        idempotency: IdempotencyClaim?, idempotencySince: Date, handOff: DeliveryHandOff?
    ) async throws -> AcceptResult
    /// Stores a notification for every subscriber of `topic`. Up to `inlineLimit` subscribers
    /// are written in the accepting transaction, read and written in pages of `pageSize` so
    /// memory does not grow with the topic. Above it the transaction commits the notification
    /// with a ``FanOutJob`` (recipients counted, cursor at the start) and the rows are written
    /// afterwards by ``FanOutWorker``. `extra` deliveries (topic sends) and the `archive` entry
    /// are stored with the notification either way. Subscribers of a Forced subject are every
    /// user Herald knows.
    func acceptFanOut(
        _ notification: HeraldNotification, topic: String, level: SubscriptionLevel, plan: FanOutPlan, extra: [PlannedDelivery],
        archive: ArchivedMessage?, pageSize: Int, inlineLimit: Int, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult
    /// Stores a notification for every user the audience names (docs/routing.md: `all`, or any of the
    /// tiers, groups and user ids, OR-ed, as content visibility is), routing each page of
    /// `pageSize` users with `route`: in the accepting transaction up to `inlineLimit` users,
    /// as a ``FanOutJob`` above it, as ``acceptFanOut(_:topic:level:plan:extra:archive:pageSize:inlineLimit:idempotency:idempotencySince:)``.
    func acceptAudience(
        _ notification: HeraldNotification, audience: Audience, route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery], pageSize: Int,
        inlineLimit: Int, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult
    /// Stores a notification to be sent at `dueAt` (docs/timing.md): the notification with a
    /// fan-out job due then and nothing else, so its recipients are read, routed (settings,
    /// preferences, quiet hours as they are at `dueAt`) and given their deliveries and history
    /// rows by ``FanOutWorker`` from that instant, page by page. `recipients` is counted now:
    /// users named, or a topic's or audience's as they stand at the accept.
    ///
    /// With `dueAt` nil the notification goes out in each recipient's own time
    /// (``HeraldNotification/sendAtLocal``): the job pages them at once, giving each an instant
    /// (``FanOutJobStore/writeFanOutPages(_:pageSize:)``), and each is routed
    /// when theirs comes (``FanOutJobStore/writeDueRecipients(limit:route:)``).
    func acceptScheduled(
        _ notification: HeraldNotification, recipients: ScheduledRecipients, dueAt: Date?, idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult
    /// Cancels what of notification `id` has not gone out, in one transaction: its fan-out
    /// job, if not done, stops where it is; recipients waiting for their own instant get
    /// nothing; its deliveries waiting for an attempt become ``DeliveryState/cancelled``.
    /// Deliveries a worker holds go out. nil for an unknown id.
    func cancel(id: ObjectID, at date: Date) async throws -> Cancellation?
    /// The Message Hub archive, newest first, optionally for one topic.
    func messages(topicKey: String?, limit: Int, before: String?) async throws -> MessagePage
    /// The archived Message Hub message with this `msi_key` (its notification's id); nil when none is.
    func archivedMessage(msiKey: String) async throws -> ArchivedMessage?
    /// What an idempotency key claimed since `since` stands for: `.replayed` with the first
    /// receipt for the same request, `.keyReused` for another request, nil when unclaimed.
    func receipt(for claim: IdempotencyClaim, since: Date) async throws -> AcceptResult?
    func status(of id: ObjectID) async throws -> NotificationStatus?
    /// Notification `id` as stored, without its deliveries; nil when unknown.
    func notification(id: ObjectID) async throws -> HeraldNotification?
    /// Stores `inputs` under their id (``RoutingInputs/id``) unless stored already: each
    /// process records its own as it starts, before it accepts anything.
    func recordRoutingInputs(_ inputs: RoutingInputs) async throws
    /// The routing inputs stored under `id`; nil when none are.
    func routingInputs(id: String) async throws -> RoutingInputs?
    /// Every delivery of notification `id` to `userID`, in creation order (one recipient's
    /// explanation, however many deliveries the notification has).
    func deliveries(of id: ObjectID, userID: String) async throws -> [DeliveryRecord]
    /// Deliveries per sink and state, sorted by sink name: those waiting now (pending, held),
    /// and those that reached another state since `finishedSince`; with each sink's latest
    /// error, of a delivery still retrying or one finished since then. Read through indexes, so
    /// its cost is the backlog and the window's traffic, not every delivery kept.
    func sinkCounters(finishedSince: Date) async throws -> [SinkCounters]
}

extension NotificationStore {
    /// An accept for users whose deliveries all wait in the queue for a worker's claim.
    public func acceptUsers(
        _ notification: HeraldNotification, userIDs: [String], route: @escaping @Sendable (RecipientContext) -> [PlannedDelivery],
        idempotency: IdempotencyClaim?, idempotencySince: Date
    ) async throws -> AcceptResult {
        try await acceptUsers(notification, userIDs: userIDs, route: route, idempotency: idempotency, idempotencySince: idempotencySince, handOff: nil)
    }

    /// An accept whose idempotency key (if any) is scoped to nobody and compared by key alone:
    /// for tools and tests that store notifications directly.
    public func accept(_ notification: HeraldNotification, recipients: Int, deliveries: [PlannedDelivery], idempotencySince: Date) async throws -> AcceptResult
    {
        try await accept(
            notification, recipients: recipients, deliveries: deliveries, idempotency: notification.unscopedClaim, idempotencySince: idempotencySince
        )
    }

    /// ``acceptFanOut(_:topic:level:plan:extra:archive:pageSize:inlineLimit:idempotency:idempotencySince:)`` with the notification's own, unscoped idempotency key.
    public func acceptFanOut(
        _ notification: HeraldNotification, topic: String, level: SubscriptionLevel, plan: FanOutPlan, extra: [PlannedDelivery],
        archive: ArchivedMessage?, pageSize: Int, inlineLimit: Int = .max, idempotencySince: Date
    ) async throws -> AcceptResult {
        try await acceptFanOut(
            notification, topic: topic, level: level, plan: plan, extra: extra, archive: archive, pageSize: pageSize, inlineLimit: inlineLimit,
            idempotency: notification.unscopedClaim, idempotencySince: idempotencySince
        )
    }
}

extension HeraldNotification {
    var unscopedClaim: IdempotencyClaim? {
        idempotencyKey.map { IdempotencyClaim(scope: "", key: $0, requestHash: "") }
    }
}

/// Work for the delivery engine.
public protocol DeliveryQueue: Sendable {
    /// Leases up to `limit` pending deliveries due at `now` until `now + lease`; a delivery
    /// whose lease ran out (its worker died) is due again. Each claim counts an attempt, and the
    /// attempt number is the lease's token (``Delivery/attempt``).
    /// `sinks` limits the claim: deliveries of sinks whose circuit is open stay untouched (no
    /// attempt spent), and a probe claims from one sink only. Oldest due first, except that
    /// retries take at most ``RetryShare/of(_:firstAttempts:)`` of a claim while first attempts
    /// wait: a retry storm cannot starve new notifications.
    func claimDue(now: Date, limit: Int, lease: Duration, sinks: SinkFilter) async throws -> [Delivery]
    /// Records outcomes and releases their leases; removes reported-gone devices. Fenced: an
    /// outcome applies only while its delivery is still pending under the same attempt
    /// (``DeliveryUpdate/attempts``), so a worker whose lease was taken over cannot overwrite
    /// the newer worker's outcome.
    func record(_ updates: [DeliveryUpdate], at date: Date) async throws
    /// Extends the leases of deliveries still being worked (claimed under `attempt` and not
    /// yet recorded) until `until`: the heartbeat of a batch that outlives its lease.
    func extendLeases(_ leases: [DeliveryLease], until: Date) async throws
    /// When the earliest pending delivery the filter lets through becomes due, if any.
    func nextDueDate(sinks: SinkFilter) async throws -> Date?
    /// How many deliveries are pending, and when the oldest of them was accepted.
    func queueStats() async throws -> QueueStats
    /// When the oldest pending delivery of each sink with deliveries pending was accepted: what
    /// `/health/sinks` shows as its oldest waiting delivery (a query of its own, so a metrics
    /// scrape does not pay for it).
    func oldestPendingBySink() async throws -> [String: Date]
    /// Tells this process what other processes committed (PostgreSQL `NOTIFY`), until the task
    /// is cancelled: ``WorkNotice/work`` when any process commits new work, and
    /// ``WorkNotice/withdrawn(_:)`` with the ids of leased deliveries it failed (a device it
    /// removed or saw registered by another user, a user it erased), which this process may
    /// hold in its ``DeliveryHandOff`` and would send without reading their rows again. A store
    /// that only one process writes (SQLite) returns at once: that process wakes its own workers
    /// and withdraws its own copies.
    func watchForWork(_ heard: @escaping @Sendable (WorkNotice) -> Void) async throws
}

/// How a claim shares its batch between first attempts and retries (docs/durability.md, "A
/// provider that fails part of the time").
public enum RetryShare {
    /// Retries a claim of `limit` takes when `firstAttempts` first attempts are due: whatever
    /// first attempts leave, and at least half the batch, so neither starves the other.
    public static func of(_ limit: Int, firstAttempts: Int) -> Int {
        max(limit - firstAttempts, (limit + 1) / 2)
    }
}

/// What ``DeliveryQueue/watchForWork(_:)`` hears from other processes.
public enum WorkNotice: Sendable, Equatable {
    /// New work was committed: idle workers look for it.
    case work
    /// These leased deliveries were failed: copies waiting in a hand-off must not be sent.
    case withdrawn([Int64])
}

extension DeliveryQueue {
    /// Hears nothing: a store with one process has no other process to hear from.
    public func watchForWork(_ heard: @escaping @Sendable (WorkNotice) -> Void) async throws {}

    /// A claim from every sink.
    public func claimDue(now: Date, limit: Int, lease: Duration) async throws -> [Delivery] {
        try await claimDue(now: now, limit: limit, lease: lease, sinks: .all)
    }

    /// When the next delivery of any sink falls due; nil for none.
    public func nextDueDate() async throws -> Date? {
        try await nextDueDate(sinks: .all)
    }
}

/// Per-user history (openapi.yaml), written by the history sink.
public protocol HistoryStore: Sendable {
    /// Adds one row per (notification, user); a second write of the same pair changes nothing.
    /// With `leases` (one per entry, the history sink's claimed deliveries), an entry is written
    /// only while its delivery is still pending under that lease: a delivery failed since its
    /// claim, its user erased, writes no row after the erasure deleted theirs.
    func appendHistory(_ entries: [(notificationID: ObjectID, userID: String)], at date: Date, leases: [DeliveryLease]?) async throws
    /// Newest first. `before` is a cursor from an earlier page.
    func history(userID: String, limit: Int, before: String?) async throws -> HistoryPage
    /// The user's rows written after `sequence`, oldest first: what a resumed stream replays.
    /// Sequences grow in commit order for each user, so reading from the last one seen misses
    /// nothing.
    func history(userID: String, after sequence: Int64, limit: Int) async throws -> [SequencedHistoryItem]
    /// The sequence of the user's newest row, 0 when there is none.
    func lastHistorySequence(userID: String) async throws -> Int64
}

extension HistoryStore {
    /// Adds one row per (notification, user), whatever became of any delivery.
    public func appendHistory(_ entries: [(notificationID: ObjectID, userID: String)], at date: Date) async throws {
        try await appendHistory(entries, at: date, leases: nil)
    }
}

/// What routing a notification to a topic reads of the channel → area → subject hierarchy
/// (docs/topics.md): the subject and its distribution. The hierarchy's own routes and users'
/// subscriptions are the topics module's (HeraldTopics).
public protocol TopicLookup: Sendable {
    /// The subject `topicKey` names, with its channel's and area's names; nil when there is none.
    func subject(topicKey: String) async throws -> SubjectEntry?
    /// Whether the user's subscription to the subject `topicKey` names is stored (a Forced
    /// subject reaches everyone without one).
    func isSubscribed(userID: String, topicKey: String) async throws -> Bool
}

/// What one step of the notifications' purge did (``RetentionStore/purgeNotifications(before:after:limit:)``).
public struct NotificationPurgeStep: Sendable, Equatable {
    /// The notifications deleted.
    public var deleted: Int
    /// The last id looked at, where the next step goes on; nil when the step reached the end.
    public var last: String?

    /// A step's outcome.
    public init(deleted: Int, last: String?) {
        self.deleted = deleted
        self.last = last
    }
}

/// What the maintenance loop purges, in small batches so no purge holds a write lock for long.
public protocol RetentionStore: Sendable {
    /// Delivered, failed and dead deliveries last changed before `before`.
    func purgeFinishedDeliveries(before: Date, limit: Int) async throws -> Int
    /// Idempotency keys claimed before `before`.
    func purgeIdempotencyKeys(before: Date, limit: Int) async throws -> Int
    /// History rows written before `before`.
    func purgeHistory(before: Date, limit: Int) async throws -> Int
    /// Message Hub archive entries posted before `before`.
    func purgeArchive(before: Date, limit: Int) async throws -> Int
    /// One step through the notifications accepted before `before`: looks at up to `limit` of
    /// them whose ids follow `after` (from the first when nil), in id order, and deletes those
    /// that no delivery, history row, fan-out, scheduled recipient or digest refers to. Steps
    /// go on from the `last` one returned, so that a pass never reads again the notifications
    /// still referred to that it has passed (docs/durability.md, "Retention").
    func purgeNotifications(before: Date, after: String?, limit: Int) async throws -> NotificationPurgeStep
    /// Makes what the coming weeks' writes need before they arrive: on PostgreSQL, history's, deliveries' and events'
    /// partitions for this month and the next two (docs/durability.md).
    func prepareAhead(now: Date) async throws
}

extension RetentionStore {
    /// Nothing to prepare: an engine without partitions.
    public func prepareAhead(now: Date) async throws {}
}

/// Everything Herald stores. SQLite and PostgreSQL implement it and pass one conformance suite.
public protocol HeraldStorage: APIKeyStore, UserStore, NotificationStore, DeliveryQueue, HistoryStore, TopicLookup,
    RetentionStore, ChangeStore, FanOutJobStore, DigestStore
{
    /// Creates or upgrades the schema; safe to run again.
    /// - Returns: the migrations the database has that this build does not know, sorted: a
    ///   newer Herald migrated it (the older side of a rolling update, or a rollback).
    @discardableResult func migrate() async throws -> [String]
    /// Whether the database holds Herald's schema (a migration recorded): false for a new,
    /// empty database, or another program's, until ``migrate()`` runs. The admin commands that
    /// only read or change what is there refuse one, rather than fill a mistyped database with
    /// Herald's tables and report success.
    func holdsSchema() async throws -> Bool
    /// Whether storage answers now (for `/health/ready`).
    func ping() async throws
    /// Releases connections; the store is not used afterwards.
    func close() async
}

extension HeraldStorage {
    /// Nothing to release.
    public func close() async {}
}
