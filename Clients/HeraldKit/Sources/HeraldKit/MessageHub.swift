import Foundation
import HeraldAPI

/// A Message Hub subject as the user sees it (docs/topics.md).
public struct HubSubject: Sendable, Equatable {
    /// The key to subscribe with (`channel-area-subject` ids).
    public var topicKey: String
    /// Its name.
    public var name: String
    /// Whether the user receives it.
    public var subscribed: Bool
    /// Forced by the operator: shown, always subscribed, never left.
    public var locked: Bool
}

/// An area and its subjects.
public struct HubArea: Sendable, Equatable {
    /// Its name.
    public var name: String
    /// Its subjects, as Herald lists them.
    public var subjects: [HubSubject]
}

/// A channel and its areas.
public struct HubChannel: Sendable, Equatable {
    /// Its name.
    public var name: String
    /// Its areas, as Herald lists them.
    public var areas: [HubArea]
}

/// The Message Hub (docs/topics.md, docs/heraldkit.md "Message Hub"): the channel → area →
/// subject tree the user may see, with their subscriptions; Forced subjects are locked.
extension Herald {
    /// The tree with the user's subscriptions.
    public func messageHub() async throws(HeraldKitError) -> [HubChannel] {
        var channels: [HubChannel] = []
        for status in try await subscriptions() {
            let subject = HubSubject(topicKey: status.topicKey, name: status.subject, subscribed: status.subscribed, locked: status.level == .forced)
            if let c = channels.firstIndex(where: { $0.name == status.channel }) {
                if let a = channels[c].areas.firstIndex(where: { $0.name == status.area }) {
                    channels[c].areas[a].subjects.append(subject)
                } else {
                    channels[c].areas.append(HubArea(name: status.area, subjects: [subject]))
                }
            } else {
                channels.append(HubChannel(name: status.channel, areas: [HubArea(name: status.area, subjects: [subject])]))
            }
        }
        return channels
    }

    /// Opts in to a subject.
    public func subscribe(_ topicKey: String) async throws(HeraldKitError) {
        let output = try await calling { try await client.subscribe(path: .init(topicKey: topicKey)) }
        guard case .noContent = output else { throw .unexpectedAnswer("PUT /api/notifications/subscriptions/\(topicKey)") }
    }

    /// Opts out of a subject; a Forced one throws ``HeraldKitError/locked(topicKey:)`` without
    /// asking Herald.
    public func unsubscribe(_ topicKey: String) async throws(HeraldKitError) {
        if try await subscriptions().contains(where: { $0.topicKey == topicKey && $0.level == .forced }) { throw .locked(topicKey: topicKey) }
        let output = try await calling { try await client.unsubscribe(path: .init(topicKey: topicKey)) }
        guard case .noContent = output else { throw .unexpectedAnswer("DELETE /api/notifications/subscriptions/\(topicKey)") }
    }

    private func subscriptions() async throws(HeraldKitError) -> [Components.Schemas.SubscriptionStatus] {
        let output = try await calling { try await client.listSubscriptions() }
        guard case .ok(let ok) = output, case .json(let list) = ok.body else { throw .unexpectedAnswer("GET /api/notifications/subscriptions") }
        return list
    }
}
