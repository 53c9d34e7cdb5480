import Foundation
import Synchronization

/// VAPID `Authorization` values, reused per push-service origin. A token names its origin and
/// is valid for 12 hours, and push services take it for every message to that origin until
/// then (RFC 8292 §2): signing one per push cost a key collection and an ES256 signature per
/// message. A value is reused for half its lifetime, so none reaches a push service close to
/// expiring, and forgotten when a push service refuses it. Pushes that find none at once share
/// one signing.
final class VAPIDHeaders: Sendable {
    private enum Entry {
        case signing(Task<String, any Error>, startedAt: Date)
        case signed(String, at: Date)
    }

    static let reuseFor: TimeInterval = 6 * 3600
    /// Origins come from subscriptions, which users send: a bound, not a guess at how many push
    /// services there are. When full, it starts over.
    static let capacity = 1_000

    private let entries = Mutex<[String: Entry]>([:])

    func authorization(for endpoint: URL, key: VAPIDKey, subject: String, now: Date) async throws -> String {
        guard let origin = VAPIDKey.origin(of: endpoint) else { throw VAPIDError.invalidEndpoint(endpoint.absoluteString) }
        // The entry to use: a value young enough, or a signing (one under way, or started here).
        let found = entries.withLock { entries -> Entry in
            // A clock that went back does not make an old value young.
            if let entry = entries[origin] {
                switch entry {
                case .signed(_, let at) where now >= at && now.timeIntervalSince(at) < Self.reuseFor: return entry
                case .signing: return entry
                case .signed: break
                }
            }
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            let signing = Entry.signing(Task { try await key.authorization(for: endpoint, subject: subject, now: now) }, startedAt: now)
            entries[origin] = signing
            return signing
        }
        let task: Task<String, any Error>
        let startedAt: Date
        switch found {
        case .signed(let value, _): return value
        case .signing(let signing, let started): (task, startedAt) = (signing, started)
        }
        do {
            let value = try await task.value
            settle(origin, task) { .signed(value, at: startedAt) }
            return value
        } catch {
            settle(origin, task) { nil }
            throw error
        }
    }

    /// The push service at `endpoint`'s origin refused its value: the next push signs afresh.
    func forget(_ endpoint: URL) {
        guard let origin = VAPIDKey.origin(of: endpoint) else { return }
        _ = entries.withLock { $0.removeValue(forKey: origin) }
    }

    /// Replaces `origin`'s entry if it is still `task`'s signing.
    private func settle(_ origin: String, _ task: Task<String, any Error>, _ entry: () -> Entry?) {
        entries.withLock { entries in
            guard case .signing(let current, _) = entries[origin], current == task else { return }
            entries[origin] = entry()
        }
    }
}
