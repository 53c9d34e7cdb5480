/// Whether a sink instance can deliver now (``NotificationSink/health()``).
public enum SinkHealth: Sendable, Equatable {
    case ok
    /// Deliveries are kept and retried, but something needs an operator: the reason says what.
    case degraded(reason: String)

    public var isOK: Bool { self == .ok }

    public var reason: String? {
        if case .degraded(let reason) = self { reason } else { nil }
    }
}

/// What a provider said about a delivery it was asked to validate without sending it.
public enum DryRunResult: Sendable, Equatable {
    case valid
    case invalid(reason: String)
    /// The sink has no way to ask its provider.
    case unsupported
}
