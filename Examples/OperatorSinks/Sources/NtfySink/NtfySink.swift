import AsyncHTTPClient
import Foundation
import HeraldCore

/// Pushes to phones through an ntfy server: each device subscribes to a topic of its own in the
/// ntfy app and registers it with Herald as `{"ntfy_topic": "…", "ntfy_priority": "high"}`.
/// A provider Herald does not know, with its own registration field, added without touching
/// Herald's code (docs/sinks.md, "Registration and validation").
public struct NtfySink: NotificationSink {
    public let name: String
    public let capabilities: SinkCapabilities = .push
    public let providers: DeviceProviders = .only([RegistrationForm.ntfy.provider])
    /// The ntfy server, without a trailing slash.
    let server: String

    /// ntfy's own rule for topic names: 1-64 letters, digits, `-` and `_`. Anything else would
    /// be refused by the server at every send, so it is refused at registration.
    public func prepare(_ registration: inout DeviceRegistration) throws {
        try registration.validateCommonFields()
        guard let topic = registration.address.value.stringValue, (1...64).contains(topic.utf8.count),
            topic.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_") })
        else {
            throw HeraldError.invalidField(registration.addressField, "must be an ntfy topic: 1-64 letters, digits, '-' or '_'")
        }
    }

    public func deliver(_ batch: [Delivery]) async -> [DeliveryOutcome] {
        // Every push of the batch at once (the engine's batch size bounds it), outcomes in order.
        await deliverConcurrently(batch.count, limit: max(1, batch.count)) { index in await post(batch[index]) }
    }

    private func post(_ delivery: Delivery) async -> DeliveryOutcome {
        guard let device = delivery.recipient.device, let topic = device.token else {
            return .failed(reason: "an ntfy delivery needs a device", scope: .message)
        }
        let notification = delivery.notification
        var request = HTTPClientRequest(url: "\(server)/\(topic)")
        request.method = .POST
        request.headers.add(name: "Title", value: notification.title)
        request.headers.add(name: "Priority", value: device.options["priority"] ?? "default")
        // Information is silent data: ntfy's lowest priority shows no notification.
        if notification.distribution == .information { request.headers.replaceOrAdd(name: "Priority", value: "min") }
        request.body = .bytes(Data(notification.body.utf8))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            switch response.status.code {
            case 200..<300: return .delivered
            case 429, 500...599: return .retry(after: nil, reason: "ntfy answered \(response.status.code)", scope: .provider)
            default: return .failed(reason: "ntfy answered \(response.status.code)", scope: .message)
            }
        } catch {
            return .retry(after: nil, reason: "ntfy did not answer: \(error)", scope: .provider)
        }
    }
}

extension RegistrationForm {
    /// `{"ntfy_topic": "…"}` with an optional `ntfy_priority`, kept as the device's `priority`.
    public static let ntfy = RegistrationForm(
        provider: "ntfy", field: "ntfy_topic",
        options: [.init(field: "ntfy_priority", option: "priority", allowed: ["min", "low", "default", "high", "urgent"])]
    )
}

extension SinkFactory {
    /// `sinks.<name>: {type: ntfy, server: https://ntfy.example.org}`.
    public static let ntfy = SinkFactory(type: "ntfy", registrationForms: [.ntfy]) { context in
        let settings = context.settings
        let server = try settings.requiredString("server")
        if let problem = HTTPURL.problem(server) { throw settings.invalid("server", problem) }
        return NtfySink(name: context.name, server: server.hasSuffix("/") ? String(server.dropLast()) : server)
    }
}
