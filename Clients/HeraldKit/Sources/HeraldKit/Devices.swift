public import Foundation
public import HeraldAPI
import OpenAPIRuntime

/// The user's notification settings (docs/routing.md "Settings").
public typealias Settings = Components.Schemas.Settings
/// A change to them: every field optional, absent ones unchanged.
public typealias SettingsChange = Operations.PatchSettings.Input.Body.JsonPayload

/// Where pushes reach this device.
public enum PushAddress: Sendable, Equatable {
    /// A Firebase Cloud Messaging registration token.
    case fcm(token: String)
    /// An APNs device token (hex) and its environment.
    case apns(token: String, sandbox: Bool)
    /// A Web Push subscription.
    case webPush(endpoint: String, p256dh: String, auth: String)
    /// A provider an operator's plugin declares, and its address.
    case other(provider: String, address: String)
}

/// Devices and settings (docs/pong.md, docs/routing.md, docs/heraldkit.md "Devices").
extension Herald {
    /// Registers where pushes reach this device (again after a token refresh).
    public func register(_ address: PushAddress) async throws(HeraldKitError) {
        let output = try await calling { try await client.registerDevice(body: .json(try Self.registration(address))) }
        guard case .ok = output else { throw .unexpectedAnswer("POST /api/notifications/register") }
    }

    /// Stops pushes to that address.
    public func unregister(_ address: PushAddress) async throws(HeraldKitError) {
        let output = try await calling { try await client.unregisterDevice(body: .json(try Self.registration(address))) }
        guard case .noContent = output else { throw .unexpectedAnswer("DELETE /api/notifications/register") }
    }

    /// The user's settings.
    public func settings() async throws(HeraldKitError) -> Settings {
        let output = try await calling { try await client.getSettings() }
        guard case .ok(let ok) = output, case .json(let settings) = ok.body else { throw .unexpectedAnswer("GET /api/notifications/settings") }
        return settings
    }

    /// Changes the given settings (types, channels, per-type channel preferences, delivery,
    /// time zone); returns them all.
    @discardableResult
    public func updateSettings(_ change: SettingsChange) async throws(HeraldKitError) -> Settings {
        let output = try await calling { try await client.patchSettings(body: .json(change)) }
        guard case .ok(let ok) = output, case .json(let settings) = ok.body else { throw .unexpectedAnswer("PATCH /api/notifications/settings") }
        return settings
    }

    /// Sets the user's time zone to the device's (or `identifier`), for scheduled sends in local
    /// time and quiet hours.
    @discardableResult
    public func updateTimeZone(_ identifier: String = TimeZone.current.identifier) async throws(HeraldKitError) -> Settings {
        try await updateSettings(SettingsChange(timezone: identifier))
    }

    private static func registration(_ address: PushAddress) throws(HeraldKitError) -> Components.Schemas.DeviceRegistration {
        switch address {
        case .fcm(let token):
            return .case1(.init(fcmToken: token))
        case .apns(let token, let sandbox):
            return .case2(.init(apnsToken: token, apnsEnvironment: sandbox ? .sandbox : .production))
        case .webPush(let endpoint, let p256dh, let auth):
            let subscription: [String: (any Sendable)?] = ["endpoint": endpoint, "keys": ["p256dh": p256dh, "auth": auth]]
            do {
                return .case3(.init(webPush: try .init(unvalidatedValue: subscription)))
            } catch {
                throw .invalidArgument("web push subscription: \(error)")
            }
        case .other(let provider, let address):
            return .case4(.init(provider: provider, address: address))
        }
    }
}
