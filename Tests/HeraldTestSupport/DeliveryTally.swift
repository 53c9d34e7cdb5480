public import HeraldCore

/// What became of one sink's deliveries of some notifications: how many are in each state, for
/// the fault tests' "nothing lost" (nothing still pending) and "nothing twice" (as many delivered
/// as the provider accepted).
public enum DeliveryTally {
    public static func states(of ids: [ObjectID], sink: String, in store: some NotificationStore) async throws -> [DeliveryState: Int] {
        var states: [DeliveryState: Int] = [:]
        for id in ids {
            for delivery in try await store.status(of: id)?.deliveries ?? [] where delivery.sink == sink {
                states[delivery.state, default: 0] += 1
            }
        }
        return states
    }

    /// Keys seen more than once: a message the provider accepted twice.
    public static func repeated(_ keys: [String]) -> [String] {
        var counts: [String: Int] = [:]
        for key in keys { counts[key, default: 0] += 1 }
        return counts.filter { $0.value > 1 }.keys.sorted()
    }
}
