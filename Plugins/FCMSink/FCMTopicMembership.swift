import Foundation
import HeraldCore
import NIOHTTP1
import Synchronization

/// Topic membership through the Instance ID batch API: `POST /iid/v1:batchAdd` and
/// `:batchRemove`, one topic and up to 1 000 registration tokens per call, authorised with the
/// same OAuth access token as sends (`access_token_auth: true`).
extension FCMSink {
    /// Tokens per call, the API's limit.
    public static let membershipBatchLimit = 1_000

    public func updateTopicMembership(_ changes: [TopicMembershipChange]) async -> [TopicMembershipOutcome] {
        var outcomes = [TopicMembershipOutcome](repeating: .retry(after: nil, reason: "not sent"), count: changes.count)
        var groups: [TopicMembershipChange.Action: [String: [Int]]] = [:]
        var order: [(TopicMembershipChange.Action, String)] = []
        for (index, change) in changes.enumerated() {
            if groups[change.action]?[change.topic] == nil { order.append((change.action, change.topic)) }
            groups[change.action, default: [:]][change.topic, default: []].append(index)
        }
        for (action, topic) in order {
            let indices = groups[action]?[topic] ?? []
            var start = 0
            while start < indices.count {
                let chunk = Array(indices[start..<min(start + Self.membershipBatchLimit, indices.count)])
                start += chunk.count
                let answers = await batch(action, topic: topic, tokens: chunk.map { changes[$0].token })
                for (offset, index) in chunk.enumerated() { outcomes[index] = answers[offset] }
            }
        }
        return outcomes
    }

    struct BatchRequest: Encodable {
        var to: String
        var registration_tokens: [String]
    }

    /// One call (``FCMSink/authorizedPOST(_:json:headers:upTo:)`` retries a 401 once).
    func batch(_ action: TopicMembershipChange.Action, topic: String, tokens registrationTokens: [String]) async -> [TopicMembershipOutcome] {
        let all: (TopicMembershipOutcome) -> [TopicMembershipOutcome] = { outcome in registrationTokens.map { _ in outcome } }
        do {
            let method = action == .add ? "batchAdd" : "batchRemove"
            let answer = try await authorizedPOST(
                "\(configuration.iidEndpoint)/iid/v1:\(method)",
                json: try JSONEncoder().encode(BatchRequest(to: "/topics/\(topic)", registration_tokens: registrationTokens)),
                headers: [("access_token_auth", "true")], upTo: 1 << 22
            )
            counters.withLock { $0["membership_\(answer.status)", default: 0] += 1 }
            switch answer.status {
            case 200:
                return Self.outcomes(answer.body, action: action, count: registrationTokens.count)
            case 401, 408, 429, 500...599:
                let after = answer.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: clock()) }
                return all(.retry(after: after, reason: "Instance ID API answered \(answer.status)"))
            default:
                return all(.refused(reason: "Instance ID API answered \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))"))
            }
        } catch let error as FCMError {
            return all(.retry(after: nil, reason: error.description))
        } catch {
            // Adding or removing again is harmless: an unanswered call is simply retried.
            return all(.retry(after: nil, reason: "no answer from the Instance ID API: \(error)"))
        }
    }

    /// `{"results": [{}, {"error": "NOT_FOUND"}, …]}`, one per token in order.
    static func outcomes(_ body: Data, action: TopicMembershipChange.Action, count: Int) -> [TopicMembershipOutcome] {
        struct Answer: Decodable {
            struct Result: Decodable { var error: String? }
            var results: [Result]
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: body), answer.results.count == count else {
            return Array(repeating: .retry(after: nil, reason: "the Instance ID API's answer does not list one result per token"), count: count)
        }
        return answer.results.map { result in
            switch result.error {
            case nil: .applied
            // Removing a token that is not there leaves it not there, which was the point.
            case "NOT_FOUND"? where action == .remove: .applied
            case "INTERNAL"?, "UNAVAILABLE"?: .retry(after: nil, reason: result.error ?? "")
            case let error?: .refused(reason: error)
            }
        }
    }
}
