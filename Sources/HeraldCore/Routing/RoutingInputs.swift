public import Foundation

/// What routed a notification besides its recipients' own state: the sinks configured with
/// their channels, the routing rules (the sinks' own, then the operator's), the operator's
/// preferences and the names of the other policies. Stored once per configuration a process
/// started with; every notification names the one it was accepted under
/// (``HeraldNotification/routingInputs``), so an accepted notification is explained as it was
/// decided, not as today's configuration would decide it (docs/routing.md, "Explaining a
/// decision").
public struct RoutingInputs: Sendable, Equatable, Codable {
    /// A sink as the router saw it.
    public struct Sink: Sendable, Equatable, Codable {
        /// The sink's name.
        public var name: String
        /// Its capabilities, by name (``RoutingInputs/capabilityNames``).
        public var capabilities: [String]
        /// The device providers it serves, sorted; nil for every provider.
        public var providers: [String]?
        /// Its channel's name.
        public var channel: String
        /// Whether users' preferences apply to its channel.
        public var userFacing: Bool

        enum CodingKeys: String, CodingKey {
            case name, capabilities, providers, channel
            case userFacing = "user_facing"
        }
    }

    /// Every configured sink, in configuration order.
    public var sinks: [Sink]
    /// Every routing rule as its configuration line, in the order applied.
    public var rules: [String]
    /// `preferences.defaults`.
    public var defaults: [String: [String: Bool]]
    /// `preferences.critical`, sorted.
    public var critical: [String]
    /// The names of the policies besides the preferences, in order.
    public var policies: [String]
    /// `scheduling.default_timezone`; nil (inputs recorded before it was) for UTC.
    public var defaultTimeZone: String?

    enum CodingKeys: String, CodingKey {
        case sinks, rules, defaults, critical, policies
        case defaultTimeZone = "default_timezone"
    }

    /// Capabilities by the names stored: a bit's meaning can change between builds, a name's cannot.
    static let capabilityNames: [(String, SinkCapabilities)] = [
        ("push", .push), ("per_user", .perUser), ("topics", .topics), ("broadcast", .broadcast), ("events", .events),
        ("topic_membership", .topicMembership), ("endpoint_per_device", .endpointPerDevice),
    ]

    /// The inputs `router` decides with.
    public init(router: NotificationRouter) {
        sinks = router.sinks.map { sink in
            let providers: [String]? =
                switch sink.providers {
                case .all: nil
                case .only(let names): names.sorted()
                }
            return Sink(
                name: sink.name, capabilities: Self.capabilityNames.filter { sink.capabilities.contains($0.1) }.map(\.0), providers: providers,
                channel: sink.channel.name, userFacing: sink.channel.userFacing)
        }
        rules = router.rules.map(\.description)
        let preferences = router.policies.lazy.compactMap { $0 as? PreferencePolicy }.first?.preferences ?? ChannelPreferences()
        defaults = preferences.defaults
        critical = preferences.critical.sorted()
        policies = router.policies.filter { !($0 is PreferencePolicy) }.map(\.name)
        defaultTimeZone = router.defaultTimeZone.identifier
    }

    /// The inputs as stored: JSON with sorted keys, so one configuration is always one text.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, booleans, arrays and maps of them: nothing here fails to encode.
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Inputs read back from ``json``.
    /// - Throws: a decoding error for text that is not stored inputs.
    public init(json: String) throws {
        self = try JSONDecoder().decode(Self.self, from: Data(json.utf8))
    }

    /// What notifications name their inputs by: 16 hex digits of the FNV-1a hash of ``json``.
    /// Not a security measure; two configurations that collide (one chance in 2⁶⁴ per pair)
    /// would share one stored text, the first recorded.
    public var id: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in json.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return Hex.lowercase((0..<8).reversed().map { UInt8(truncatingIfNeeded: hash >> ($0 * 8)) })
    }

    /// A router that decides as the one these inputs were taken from: its sinks, rules and
    /// preferences. Of `policies` (this process's), those named in the inputs are kept.
    /// - Throws: a configuration error when a stored rule no longer parses.
    public func router(policies current: [any RoutingPolicy]) throws -> NotificationRouter {
        let routerSinks = sinks.map { sink in
            var capabilities: SinkCapabilities = []
            for (name, capability) in Self.capabilityNames where sink.capabilities.contains(name) { capabilities.insert(capability) }
            return NotificationRouter.Sink(
                name: sink.name, capabilities: capabilities, providers: sink.providers.map { .only(Set($0)) } ?? .all,
                channel: SinkChannel(sink.channel, userFacing: sink.userFacing))
        }
        let preferences = PreferencePolicy(ChannelPreferences(defaults: defaults, critical: Set(critical)))
        let others = current.filter { !($0 is PreferencePolicy) && self.policies.contains($0.name) }
        return try NotificationRouter(
            sinks: routerSinks, rules: try rules.map(RoutingRule.parse), policies: [preferences] + others,
            defaultTimeZone: defaultTimeZone.flatMap(TimeZone.init(identifier:)) ?? QuietHours.utc)
    }
}
