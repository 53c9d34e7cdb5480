import Logging

/// The count a badge-carrying sink (``SinkCapabilities/badge``) shows on a user's app icon,
/// from the module that keeps it (an inbox's unread count).
public protocol BadgeCounts: Sendable {
    /// The badge of each user asked for; a user left out gets no badge. Throwing sends the
    /// pushes without one.
    func badges(for userIDs: Set<String>) async throws -> [String: Int]
}

extension DeliveryEngine {
    /// `deliveries` with their users' badges, for a sink that carries one; unchanged for any
    /// other sink or when no module keeps badges.
    func withBadges(_ deliveries: [Delivery], for sink: any NotificationSink) async -> [Delivery] {
        guard let badgeCounts, sink.capabilities.contains(.badge), !deliveries.isEmpty else { return deliveries }
        let users = Set(deliveries.map(\.recipient.userID).filter { !$0.isEmpty })
        guard !users.isEmpty else { return deliveries }
        do {
            let badges = try await badgeCounts.badges(for: users)
            return deliveries.map { delivery in
                var delivery = delivery
                // A count below zero is the module's slip; no icon shows one.
                delivery.badge = badges[delivery.recipient.userID].map { max(0, $0) }
                return delivery
            }
        } catch {
            logger.warning("could not read badges for sink '\(sink.name)': \(error); its pushes go without one")
            return deliveries
        }
    }
}
