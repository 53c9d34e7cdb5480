public import Foundation
import Synchronization

/// Tells a refusal of one recipient from a refusal of the operator's credentials, for a sink
/// whose recipients each name their own endpoint (Web Push): one endpoint answering 401 or 403
/// is about that subscription (it was made for another key, or its server is someone's own),
/// and anyone who may register a device can make one. The sink is judged degraded only when
/// a push service it trusts to judge its key (``witnesses``) refused at least ``threshold``
/// distinct endpoints within ``window`` and accepted none since the first of them: a wrong
/// key is refused everywhere, a hostile subscription only at its own endpoint.
public final class CredentialRefusals: Sendable {
    private struct Host {
        var endpoints: Set<String> = []
        var since: Date
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var fault: String?
        var faultHost: String?
    }

    /// The push services whose refusals can prove the key wrong: lower-case host names, or
    /// suffixes written with a leading dot (`.notify.windows.com`).
    public let witnesses: Set<String>
    /// Distinct endpoints a witness must refuse before the key is judged wrong.
    public let threshold: Int
    /// Seconds within which those refusals must fall.
    public let window: TimeInterval
    private let state = Mutex(State())

    /// A judge with no refusals yet: three endpoints in ten minutes by default.
    public init(witnesses: Set<String>, threshold: Int = 3, window: TimeInterval = 600) {
        self.witnesses = Set(witnesses.map { $0.lowercased() })
        self.threshold = max(1, threshold)
        self.window = window
    }

    /// Why the credentials are judged wrong, until a witness accepts a send again.
    public var fault: String? { state.withLock { $0.fault } }

    /// Whether `host` is one of ``witnesses``.
    public func isWitness(_ host: String) -> Bool {
        let host = host.lowercased()
        return witnesses.contains(host) || witnesses.contains { $0.hasPrefix(".") && host.hasSuffix($0) }
    }

    /// `host` accepted a send: its refusals so far were about their subscriptions.
    public func accepted(by host: String) {
        let host = host.lowercased()
        state.withLock { state in
            state.hosts[host] = nil
            if state.faultHost == host { (state.fault, state.faultHost) = (nil, nil) }
        }
    }

    /// `host` refused `endpoint` with an answer that could mean the key.
    /// - Returns: the fault, when this refusal completes the proof (for the caller to log once).
    @discardableResult
    public func refused(endpoint: String, by host: String, reason: String, at now: Date) -> String? {
        let host = host.lowercased()
        guard isWitness(host) else { return nil }
        return state.withLock { state in
            var entry = state.hosts[host] ?? Host(since: now)
            if now.timeIntervalSince(entry.since) > window { entry = Host(since: now) }
            // Bounded: past the threshold, more endpoints prove nothing more.
            if entry.endpoints.count < threshold { entry.endpoints.insert(endpoint) }
            state.hosts[host] = entry
            guard entry.endpoints.count >= threshold, state.fault == nil else { return nil }
            let fault = "\(reason) (refused on \(entry.endpoints.count) distinct subscriptions with no send accepted since)"
            (state.fault, state.faultHost) = (fault, host)
            return fault
        }
    }
}
