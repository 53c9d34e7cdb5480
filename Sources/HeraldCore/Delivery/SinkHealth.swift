/// Whether a sink instance can deliver now (``NotificationSink/health()``).
public enum SinkHealth: Sendable, Equatable {
    /// Delivering.
    case ok
    /// Deliveries are kept and retried, but something needs an operator: the reason says what.
    case degraded(reason: String)

    /// Whether the sink is ``ok``.
    public var isOK: Bool { self == .ok }

    /// The degraded reason, nil when ``ok``.
    public var reason: String? {
        if case .degraded(let reason) = self { reason } else { nil }
    }
}

/// What a provider said about a delivery it was asked to validate without sending it.
public enum DryRunResult: Sendable, Equatable {
    /// The provider would take it.
    case valid
    /// The provider refused it, for `reason`.
    case invalid(reason: String)
    /// The sink has no way to ask its provider.
    case unsupported
}
