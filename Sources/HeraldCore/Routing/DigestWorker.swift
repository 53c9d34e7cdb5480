import Foundation
public import Logging
import Mustache
public import ServiceLifecycle

/// Counts held deliveries against their caps and digest windows, and delivers each digest when
/// its window ends (docs/timing.md). Wakes when an accept or a fan-out page may have held
/// deliveries, and sleeps no longer than until the next digest is due, so a digest goes out
/// within moments of its window's end.
public final class DigestWorker: Service {
    private let store: any DigestStore
    private let composer: DigestComposer
    private let batch: Int
    private let interval: Duration
    private let logger: Logger
    private let onWork: @Sendable () -> Void
    private let signal = WakeSignal()

    /// - Parameters:
    ///   - store: where held deliveries, counters and digests are.
    ///   - router: plans a digest's deliveries; its ``NotificationRouter/folding`` holds the
    ///     caps' templates.
    ///   - ids: the digest notifications' ids.
    ///   - batch: notifications decided, or digests released, per transaction.
    ///   - interval: how often to look for work nobody woke the worker for (another process's).
    ///   - logger: where storage errors are reported.
    ///   - onWork: called after deliveries were let through or digests stored, typically
    ///     ``DeliveryEngine/wake()``.
    public init(
        store: any DigestStore, router: NotificationRouter, ids: ObjectIDGenerator, batch: Int = 500, interval: Duration = .seconds(5),
        logger: Logger = DeliveryEngine.silentLogger, onWork: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        self.composer = DigestComposer(router: router, ids: ids)
        self.batch = max(batch, 1)
        self.interval = interval
        self.logger = logger
        self.onWork = onWork
    }

    /// Tells the worker deliveries may be held.
    public func wake() { signal.notify() }

    public func run() async throws {
        // Each step is one transaction: after a storage error nothing is half-decided.
        await DueWorkLoop.run(
            interval: interval, signal: signal, logger: logger, paused: "digests paused after a storage error, resuming",
            work: { try await self.drain() }, untilDue: { try await self.store.untilNextDigest() },
            // Woken by each accept that held a delivery: a held push waits at most this for its count.
            settle: .milliseconds(20))
    }

    /// Decides every held delivery and releases every digest due (tests, and `run`'s loop).
    public func drain() async throws {
        while !Task.isCancelled {
            let decided = try await store.foldHeld(limit: batch)
            let composer = self.composer
            let released = try await store.releaseDueDigests(limit: batch) { composer.compose($0, for: $1) }
            if decided + released > 0 { onWork() }
            if decided < batch && released < batch { return }
        }
    }
}

/// Makes a digest's notification (docs/timing.md): of the cap's `digest_type` (else the first
/// item's type), its title and body from the cap's templates (`{{count}}`, `{{first_title}}`,
/// `{{types}}`; the defaults for a `digest_key` or quiet hours), its data naming the folded
/// notifications; delivered on the folded channel only, nothing in history.
struct DigestComposer: Sendable {
    let router: NotificationRouter
    let ids: ObjectIDGenerator
    typealias Templates = (title: MustacheTemplate, body: MustacheTemplate)
    /// Each cap's, by its key (``FoldMark/key``).
    private let templates: [String: Templates]
    /// A `digest_key`'s and quiet hours' (``FrequencyCap/defaultTitle``, ``FrequencyCap/defaultBody``).
    private let defaults: Templates?

    init(router: NotificationRouter, ids: ObjectIDGenerator) {
        self.router = router
        self.ids = ids
        // Checked when the configuration was read (``FrequencyCap/checkTemplates(field:)``).
        func parsed(_ title: String, _ body: String) -> Templates? {
            guard let title = try? Self.template(title), let body = try? Self.template(body) else { return nil }
            return (title, body)
        }
        var templates: [String: Templates] = [:]
        for cap in router.folding.caps { templates[cap.mark.key] = parsed(cap.title, cap.body) }
        self.templates = templates
        defaults = parsed(FrequencyCap.defaultTitle, FrequencyCap.defaultBody)
    }

    /// A template rendering plain text (a push title is not HTML: nothing is escaped).
    static func template(_ text: String) throws -> MustacheTemplate {
        try MustacheTemplate(string: "{{% CONTENT_TYPE: TEXT}}" + text)
    }

    func compose(_ digest: DueDigest, for recipient: RecipientContext) -> ComposedDigest {
        let cap = router.folding.rule(forKey: digest.key)
        let template = templates[digest.key] ?? defaults
        let first = digest.items.first
        var types: [String] = []
        for item in digest.items where !types.contains(item.type) { types.append(item.type) }
        let values: [String: Any] = [
            "count": digest.items.count, "first_title": first?.title ?? "", "types": types.joined(separator: ", "),
        ]
        let notification = HeraldNotification(
            id: ids.next(at: digest.dueAt), type: cap?.digestType ?? first?.type ?? "generic",
            title: String((template?.title.render(values) ?? "\(digest.items.count) new notifications").prefix(NotificationValidator.maxTitleLength)),
            body: String((template?.body.render(values) ?? first?.title ?? "").prefix(NotificationValidator.maxBodyLength)), url: nil,
            data: ["digest_of": digest.items.map(\.id.hex).joined(separator: ","), "digest_count": String(digest.items.count)],
            timestamp: digest.dueAt, distribution: .alert, target: .users([digest.userID]))
        // The folded channel only: a cap's, else push; nothing folds twice.
        let channel = cap?.channel
        let deliveries = router.plan(notification, for: recipient, at: digest.dueAt).compactMap { planned -> PlannedDelivery? in
            guard let sink = router.sinks.first(where: { $0.name == planned.sink }), sink.name != NotificationRouter.historySink else { return nil }
            guard channel.map({ sink.channel.name == $0 }) ?? sink.capabilities.contains(.push) else { return nil }
            var delivery = planned
            delivery.fold = nil
            return delivery
        }
        return ComposedDigest(notification: notification, deliveries: deliveries)
    }
}
