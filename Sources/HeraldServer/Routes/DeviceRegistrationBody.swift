import Foundation
import HeraldCore

/// The body of `POST` and `DELETE /api/notifications/register`: exactly one address form, plus
/// optional device facts. Unknown fields are ignored, as apps already send extra ones.
///
/// The address forms are the providers' own (``RegistrationForm``, declared by their sink
/// modules: `{"fcm_token": "…"}`, `{"apns_token": "…", "apns_environment": "…"}`,
/// `{"web_push": {…}}` with Herald's sinks), and `{"provider": "…", "address": "…" or {…}}`
/// for any provider. Each may carry `app` (the sink instance that serves the device) and
/// `platform`, `app_version`, `region`, `locale`. Answers are `{"device_id", "provider"}` plus
/// the address field as sent, and its options.
struct DeviceRegistrationBody: Decodable {
    /// The facts every form may carry.
    struct Facts: Decodable {
        var provider: String?
        var address: JSONValue?
        var app: String?
        var platform: String?
        var appVersion: String?
        var region: String?
        var locale: String?

        enum CodingKeys: String, CodingKey {
            case provider, address, app, platform, region, locale
            case appVersion = "app_version"
        }
    }

    /// Which address form the request used: a provider's own, or `provider` with `address`.
    enum Form {
        case provider(RegistrationForm)
        case general

        var field: String {
            switch self {
            case .provider(let form): form.field
            case .general: "address"
            }
        }
    }

    let facts: Facts
    /// Every field of the body, for the providers' own fields.
    let fields: [String: JSONValue]

    init(from decoder: any Decoder) throws {
        facts = try Facts(from: decoder)
        fields = try decoder.singleValueContainer().decode([String: JSONValue].self)
    }

    /// A field's value; null is absent, as it always was.
    private func value(_ name: String) -> JSONValue? {
        guard let value = fields[name], value != .null else { return nil }
        return value
    }

    /// The one address form given; 422 for none or several.
    func form(among forms: [RegistrationForm]) throws -> Form {
        var given: [Form] = forms.filter { value($0.field) != nil }.map { .provider($0) }
        if facts.provider != nil || facts.address != nil { given.append(.general) }
        guard let form = given.first else { throw HeraldError.missingField(forms.first?.field ?? "provider") }
        guard given.count == 1 else {
            let all = forms.map(\.field) + ["provider with address"]
            throw HeraldError(
                .unprocessable, code: "ambiguous_address",
                "give one address form, not \(given.map(\.field).joined(separator: " and ")) (\(all.joined(separator: ", ")))")
        }
        return form
    }

    /// The registration the body describes, before the provider's sink has checked it.
    func registration(among forms: [RegistrationForm]) throws -> DeviceRegistration {
        let form = try form(among: forms)
        let provider: String
        let address: JSONValue
        var options: [String: String] = [:]
        switch form {
        case .provider(let declared):
            guard let given = value(declared.field) else { throw HeraldError.missingField(declared.field) }
            switch declared.address {
            case .token: guard given.stringValue != nil else { throw HeraldError.invalidField(declared.field, "must be a string") }
            case .object(let check): try check(given, declared.field)
            }
            (provider, address) = (declared.provider, given)
        case .general:
            guard let name = facts.provider else { throw HeraldError.missingField("provider") }
            guard DeviceAddress.isValidProvider(name) else {
                throw HeraldError.invalidField("provider", "must be 1-\(DeviceAddress.maxProviderBytes) of a-z, 0-9, '_' or '-'")
            }
            guard let given = facts.address else { throw HeraldError.missingField("address") }
            (provider, address) = (name, given)
        }
        // A form's options go with that form only.
        for other in forms {
            for option in other.options {
                guard let given = value(option.field) else { continue }
                guard case .provider(let chosen) = form, chosen.field == other.field else {
                    throw HeraldError.invalidField(option.field, "goes with \(other.field) only")
                }
                guard let text = given.stringValue else { throw HeraldError.invalidField(option.field, "must be a string") }
                guard option.allowed.isEmpty || option.allowed.contains(text) else {
                    throw HeraldError.invalidField(option.field, "must be \(option.allowed.joined(separator: " or "))")
                }
                options[option.option] = text
            }
        }
        if let app = facts.app, !SinkRegistry.isValidName(app) { throw HeraldError.invalidField("app", "must be the name of a configured sink") }
        // The general form keys an address as its provider's own form would.
        let key = forms.first { $0.provider == provider }?.key(of: address) ?? address.stringValue ?? ""
        return DeviceRegistration(
            address: DeviceAddress(provider: provider, value: address, key: key), addressField: form.field, app: facts.app, options: options,
            platform: facts.platform, appVersion: facts.appVersion, region: facts.region, locale: facts.locale
        )
    }

    /// `{"device_id", "provider"}` plus the address field in the form the request used, and
    /// that form's options the device has.
    static func answer(_ device: Device, form: Form) -> [String: JSONValue] {
        var body: [String: JSONValue] = ["device_id": .string(device.id.hex), "provider": .string(device.provider), form.field: device.address.value]
        if case .provider(let declared) = form {
            for option in declared.options { if let value = device.options[option.option] { body[option.field] = .string(value) } }
        }
        if let app = device.app { body["app"] = .string(app) }
        return body
    }
}
