/// How apps name one provider's device address in `POST /api/notifications/register`: a field
/// of its own (`{"fcm_token": "…"}`), what that field holds, the options that may go with it
/// (`apns_environment`), and how a device's key is made from it. Declared by the provider's
/// sink module on its ``SinkFactory``, so the server knows no provider: a provider added
/// outside Herald brings its own field (docs/sinks.md, "Registration and validation"). Every
/// provider can also be registered as `{"provider": "…", "address": …}`.
public struct RegistrationForm: Sendable {
    /// What the address field holds.
    public enum Address: Sendable {
        /// A string: the token.
        case token
        /// A JSON value whose shape `check` judges, throwing
        /// ``HeraldError/invalidField(_:_:)`` naming the part that is wrong (its argument is the
        /// form's field name, the prefix of those names). It runs whether or not a sink of the
        /// provider is configured yet; the sink's ``NotificationSink/prepare(_:)`` checks the rest.
        case object(check: @Sendable (JSONValue, String) throws -> Void)
    }

    /// A field that may accompany the address, stored as one of the device's options.
    public struct Option: Sendable {
        /// The request's field (`apns_environment`).
        public let field: String
        /// The device option it becomes (`environment`).
        public let option: String
        /// The values it may take; empty takes any string.
        public let allowed: [String]

        /// An option read from `field` into the device's `option`; `allowed` empty takes any string.
        public init(field: String, option: String, allowed: [String] = []) {
            self.field = field
            self.option = option
            self.allowed = allowed
        }
    }

    /// The provider the address is for (``DeviceAddress/provider``).
    public let provider: String
    /// The request's field for the address, also used in the answer.
    public let field: String
    /// What the field holds: a token, or an object with its shape check.
    public let address: Address
    /// The fields that may accompany the address.
    public let options: [Option]
    private let tokenKey: @Sendable (String) -> String

    /// - Parameters:
    ///   - provider: the provider the devices registered this way belong to.
    ///   - field: the registration body's field that carries the address.
    ///   - address: a token, or an object with its shape check.
    ///   - options: the fields that may accompany the address.
    ///   - key: a token address's key (what identifies the device within the provider) from
    ///     the token as sent; by default the token itself. An object address's key is chosen
    ///     by the provider's sink.
    public init(
        provider: String, field: String, address: Address = .token, options: [Option] = [], key: @escaping @Sendable (String) -> String = { $0 }
    ) {
        self.provider = provider
        self.field = field
        self.address = address
        self.options = options
        self.tokenKey = key
    }

    /// The key of a device registered with `value`: for a token, as ``init(provider:field:address:options:key:)``
    /// says; empty for an object, whose sink chooses it.
    public func key(of value: JSONValue) -> String {
        value.stringValue.map(tokenKey) ?? ""
    }
}
