import AsyncHTTPClient
import Foundation
import HeraldCore

/// Posts `{"text": "…"}` to a chat room's incoming-webhook URL (Slack, Mattermost, Rocket.Chat
/// and Google Chat all take this shape) for each notification that matches its rule.
public struct ChatSink: NotificationSink {
    public let name: String
    // One delivery per user recipient, when the user's preferences let the chat channel through.
    public let capabilities: SinkCapabilities = .perUser
    /// A user-facing channel of its own: users turn `chat` on or off, per type or altogether.
    public let channel = SinkChannel("chat")
    /// Which notifications reach the room: those of the configured types.
    public let routingRules: [RoutingRule]
    let url: String

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        var outcomes: [DeliveryOutcome] = []
        for delivery in batch {
            outcomes.append(await post(delivery))
        }
        return outcomes
    }

    private func post(_ delivery: Delivery) async -> DeliveryOutcome {
        let n = delivery.notification
        let text = "*\(n.title)*: \(n.body) (for \(delivery.recipient.userID))"
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        // A retry keeps the delivery id, so the receiver can drop a repeat.
        request.headers.add(name: "Idempotency-Key", value: "herald-\(delivery.id)")
        do {
            request.body = .bytes(try JSONEncoder().encode(["text": text]))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            switch response.status.code {
            case 200..<300: return .delivered
            case 429, 500...599: return .retry(after: nil, reason: "chat answered \(response.status.code)", scope: .provider)
            default: return .failed(reason: "chat answered \(response.status.code)", scope: .message)
            }
        } catch {
            return .retry(after: nil, reason: "chat did not answer: \(error)", scope: .provider)
        }
    }
}

extension SinkFactory {
    /// `sinks.<name>: {type: chat, url: …, types: [violation, alert]}`.
    public static let chat = SinkFactory(type: "chat") { context in
        let settings = context.settings
        let url = try settings.requiredString("url")
        if let problem = HTTPURL.problem(url) { throw settings.invalid("url", problem) }
        let types = try settings.stringList("types") ?? []
        let rule = RoutingRule(types: types.isEmpty ? nil : Set(types), add: [context.name])
        return ChatSink(name: context.name, routingRules: [rule], url: url)
    }
}
