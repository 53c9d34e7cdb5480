import Foundation
import HeraldCore

/// The body of `POST` and `DELETE /api/notifications/register`: exactly one address form, plus
/// optional device facts. Unknown fields are ignored, as apps already send extra ones.
///
/// - `{"fcm_token": "…"}`: the Pong form, answered `{"device_id", "fcm_token"}`;
/// - `{"apns_token": "…", "apns_environment": "production|sandbox"}`;
/// - `{"web_push": {"endpoint", "keys": {"p256dh", "auth"}}}`;
/// - `{"provider": "…", "address": "…" or {…}}`, for any provider a plugin declares.
///
/// Each may carry `app` (the sink instance that serves the device) and `platform`,
/// `app_version`, `region`, `locale`. Answers are `{"device_id", "provider"}` plus the address
/// field as sent.
struct DeviceRegistrationBody: Decodable {
    /// Which address form the request used.
    enum Form: Equatable {
        case fcm, apns, webPush, general

        var field: String {
            switch self {
            case .fcm: "fcm_token"
            case .apns: "apns_token"
            case .webPush: "web_push"
            case .general: "address"
            }
        }
    }

    var fcmToken: JSONValue?
    var apnsToken: JSONValue?
    var apnsEnvironment: String?
    var webPush: JSONValue?
    var provider: String?
    var address: JSONValue?
    var app: String?
    var platform: String?
    var appVersion: String?
    var region: String?
    var locale: String?

    enum CodingKeys: String, CodingKey {
        case provider, address, app, platform, region, locale
        case fcmToken = "fcm_token"
        case apnsToken = "apns_token"
        case apnsEnvironment = "apns_environment"
        case webPush = "web_push"
        case appVersion = "app_version"
    }

    static let apnsEnvironments: Set<String> = ["production", "sandbox"]

    /// The one address form given; 422 for none or several.
    var form: Form {
        get throws {
            let given: [(Form, Bool)] = [
                (.fcm, fcmToken != nil), (.apns, apnsToken != nil), (.webPush, webPush != nil), (.general, provider != nil || address != nil),
            ]
            let forms = given.filter(\.1).map(\.0)
            guard let form = forms.first else {
                throw HeraldError.missingField("fcm_token")
            }
            guard forms.count == 1 else {
                throw HeraldError(
                    .unprocessable, code: "ambiguous_address",
                    "give one address form, not \(forms.map(\.field).joined(separator: " and ")) (fcm_token, apns_token, web_push, or provider with address)"
                )
            }
            return form
        }
    }

    /// The registration the body describes, before the provider's sink has checked it.
    func registration() throws -> DeviceRegistration {
        let form = try self.form
        let provider: String
        let value: JSONValue
        var options: [String: String] = [:]
        switch form {
        case .fcm:
            (provider, value) = ("fcm", try Self.token(fcmToken, field: form.field))
        case .apns:
            (provider, value) = ("apns", try Self.token(apnsToken, field: form.field))
            if let apnsEnvironment {
                guard Self.apnsEnvironments.contains(apnsEnvironment) else {
                    throw HeraldError.invalidField("apns_environment", "must be production or sandbox")
                }
                options["environment"] = apnsEnvironment
            }
        case .webPush:
            guard let webPush else { throw HeraldError.missingField("web_push") }
            try Self.checkSubscriptionShape(webPush)
            (provider, value) = ("webpush", webPush)
        case .general:
            guard let name = self.provider else { throw HeraldError.missingField("provider") }
            guard DeviceAddress.isValidProvider(name) else {
                throw HeraldError.invalidField("provider", "must be 1-\(DeviceAddress.maxProviderBytes) of a-z, 0-9, '_' or '-'")
            }
            guard let address else { throw HeraldError.missingField("address") }
            (provider, value) = (name, address)
        }
        if apnsEnvironment != nil && form != .apns { throw HeraldError.invalidField("apns_environment", "goes with apns_token only") }
        if let app, !SinkRegistry.isValidName(app) { throw HeraldError.invalidField("app", "must be the name of a configured sink") }
        return DeviceRegistration(
            address: DeviceAddress(provider: provider, value: value, key: Self.key(provider: provider, value)), addressField: form.field, app: app,
            options: options, platform: platform, appVersion: appVersion, region: region, locale: locale
        )
    }

    /// The shape every Web Push subscription has (a browser's `PushSubscription.toJSON()`),
    /// checked even when no Web Push sink is configured yet; the sink checks the rest.
    static func checkSubscriptionShape(_ value: JSONValue) throws {
        let shape = "must be a subscription object {endpoint, keys: {p256dh, auth}}"
        guard let fields = value.objectValue else { throw HeraldError.invalidField("web_push", shape) }
        guard let endpoint = fields["endpoint"]?.stringValue else { throw HeraldError.invalidField("web_push.endpoint", "must be a URL string") }
        guard let url = URLComponents(string: endpoint), let scheme = url.scheme, !scheme.isEmpty else {
            throw HeraldError.invalidField("web_push.endpoint", "must be an absolute URL")
        }
        guard let keys = fields["keys"]?.objectValue else { throw HeraldError.invalidField("web_push.keys", "must be an object {p256dh, auth}") }
        for name in ["p256dh", "auth"] where keys[name]?.stringValue == nil {
            throw HeraldError.invalidField("web_push.keys.\(name)", "must be a string")
        }
    }

    /// What identifies a token address: the token as sent, except that an APNs token in hex is
    /// keyed in lower case. It is the hex of the device's bytes, which APNs reads in either
    /// case, and apps change how they write it (an SDK that began upper-casing it): keyed as
    /// sent, one device registered both ways was two devices and got every push twice. The
    /// address itself stays as sent. Decided here rather than in the APNs sink's `prepare`:
    /// a device registered while no APNs sink is configured is kept too, and must be keyed alike.
    static func key(provider: String, _ value: JSONValue) -> String {
        guard let token = value.stringValue else { return "" }
        guard provider == "apns", token.utf8.allSatisfy({ (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0) }) else { return token }
        return token.lowercased()
    }

    private static func token(_ value: JSONValue?, field: String) throws -> JSONValue {
        guard let value, value.stringValue != nil else { throw HeraldError.invalidField(field, "must be a string") }
        return value
    }

    /// `{"device_id", "provider"}` plus the address field in the form the request used.
    static func answer(_ device: Device, form: Form) -> [String: JSONValue] {
        var body: [String: JSONValue] = ["device_id": .string(device.id.hex), "provider": .string(device.provider), form.field: device.address.value]
        if form == .apns, let environment = device.options["environment"] { body["apns_environment"] = .string(environment) }
        if let app = device.app { body["app"] = .string(app) }
        return body
    }
}
