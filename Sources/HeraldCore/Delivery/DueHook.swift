public import Foundation

/// Runs when deliveries become due, before their sink is handed them (docs/architecture.md,
/// "Extension points"): a module holds a delivery for later (a snooze, a user's sending window,
/// a frequency cap's next slot) or drops it (folded into a digest) without editing the engine.
///
/// Called with one sink's part of a claimed batch, on the delivery path: keep it quick, and
/// answer `.send` for a delivery it cannot judge (its store unreachable, say), so a module's
/// fault delays nothing it does not own.
public protocol DueHook: Sendable {
    /// One decision per delivery, in order; fewer or more is the hook's mistake, and the
    /// deliveries without a decision are sent.
    func due(_ deliveries: [Delivery], at now: Date) async -> [DueDecision]
}

/// What a ``DueHook`` decides for one due delivery.
public enum DueDecision: Sendable, Equatable {
    /// Hand it to its sink now.
    case send
    /// Keep it pending until `until`, its attempt given back: holding is not failing.
    case hold(until: Date, because: String)
    /// Never send it: it is recorded failed with the reason (the notification stays in history).
    case drop(because: String)
}

extension DeliveryEngine {
    /// Asks the due hooks about `deliveries` (one sink's): those held or dropped, with their
    /// updates, and those to send. With no hook, all are sent as they are.
    func consultDueHooks(_ deliveries: [Delivery], now: Date) async -> ([(Delivery, DeliveryUpdate)], [Delivery]) {
        guard !dueHooks.isEmpty, !deliveries.isEmpty else { return ([], deliveries) }
        var decided = [DueDecision](repeating: .send, count: deliveries.count)
        for hook in dueHooks {
            // A delivery one hook holds or drops is not put to the next.
            let open = decided.indices.filter { decided[$0] == .send }
            guard !open.isEmpty else { break }
            let answers = await hook.due(open.map { deliveries[$0] }, at: now)
            for (index, answer) in zip(open, answers) { decided[index] = answer }
        }
        var screened: [(Delivery, DeliveryUpdate)] = []
        var send: [Delivery] = []
        for (delivery, decision) in zip(deliveries, decided) {
            switch decision {
            case .send:
                send.append(delivery)
            case .hold(let until, let reason):
                var update = DeliveryUpdate(id: delivery.id, state: .pending, attempts: delivery.attempt, lastError: "held: \(reason)", nextAttemptAt: until)
                update.givesBackAttempt = true
                screened.append((delivery, update))
            case .drop(let reason):
                screened.append((delivery, DeliveryUpdate(id: delivery.id, state: .failed, attempts: delivery.attempt, lastError: "dropped: \(reason)")))
            }
        }
        return (screened, send)
    }
}
