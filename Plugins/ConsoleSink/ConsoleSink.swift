public import HeraldCore

/// A development push sink: instead of calling a provider it writes one line per device
/// delivery, so a fresh checkout shows what would be pushed without any credentials.
///
/// Device tokens are never written, only device ids.
public struct ConsoleSink: NotificationSink {
    public let name: String
    public let capabilities: SinkCapabilities = .push
    /// Every provider: it shows what would be pushed to any device.
    public let providers: DeviceProviders = .all
    private let write: @Sendable (String) -> Void

    /// A sink that writes one line per delivery through `write` (standard output by default).
    public init(name: String = "console", write: @escaping @Sendable (String) -> Void = StandardStream.output.line) {
        self.name = name
        self.write = write
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        batch.map { delivery in
            let notification = delivery.notification
            let device = delivery.recipient.device.map { "\($0.id)" } ?? "none"
            write(
                "[\(name)] \(delivery.distribution.rawValue) \(notification.type) \(notification.id) → user \(delivery.recipient.userID) device \(device): "
                    + "\(notification.title.debugDescription) \(notification.body.debugDescription) url=\(notification.url ?? "null")"
            )
            return .delivered
        }
    }
}
