import Configuration
public import HeraldCore

/// One configured sink: its name (the key under `sinks:`), its type (which factory builds it)
/// and its section of the configuration, which only that factory reads.
public struct SinkInstance: Sendable {
    public var name: String
    public var type: String
    public var settings: SinkSettings

    public init(name: String, type: String, settings: SinkSettings) {
        self.name = name
        self.type = type
        self.settings = settings
    }

    /// Names every server has, which configuration cannot take.
    static let reservedNames: Set<String> = ["history", "feed", "instances", "webhooks"]

    /// The instances a configuration declares, in order:
    /// - every entry under `sinks:` in the file (`sinksInFile`), and the names listed in
    ///   `sinks.instances` (the only way to declare one from the environment:
    ///   `HERALD_SINKS_INSTANCES=chat` with `HERALD_SINKS_CHAT_TYPE=webhook`, …);
    /// - a sink type's shorthand instance (``SinkShorthand``: `fcm` when `fcm.credentials` or
    ///   `sinks.fcm.credentials` is set), and `console` when `sinks.console.enabled` is true;
    /// - names in `sinks.webhooks`, whose type defaults to `webhook`.
    ///
    /// `sinks.<name>.type` names the factory; a shorthand's instance defaults to its factory's
    /// type, and `console` to its own.
    /// `sinks.<name>.enabled: false` leaves an instance out; the `console` shorthand needs
    /// `enabled: true` (or an explicit type).
    /// - Parameter shorthands: each sink type's shorthand, by type.
    static func read(from reader: ConfigReader, namesInFile: [String], shorthands: [String: SinkShorthand]) throws -> [SinkInstance] {
        let source = ConfigReaderSource(reader: reader)
        let webhooks = try reader.optionalStringList(forKey: "sinks.webhooks") ?? []
        var names: [String] = []
        func add(_ name: String) { if !names.contains(name) { names.append(name) } }
        namesInFile.forEach(add)
        try (reader.optionalStringList(forKey: "sinks.instances") ?? []).forEach(add)
        for shorthand in shorthands.values.sorted(by: { $0.section < $1.section }) {
            let (section, key) = (shorthand.section, shorthand.declaringKey)
            if try reader.optionalString(forKey: "\(section).\(key)") != nil || reader.optionalString(forKey: "sinks.\(section).\(key)") != nil {
                add(section)
            }
        }
        if try reader.requiredBool(forKey: "sinks.console.enabled", default: false) { add("console") }
        webhooks.forEach(add)

        var instances: [SinkInstance] = []
        for name in names {
            guard SinkRegistry.isValidName(name), !name.contains(":"), !reservedNames.contains(name) else {
                throw HeraldConfiguration.invalid(
                    "sinks.\(name)", "is not a valid sink name (1-64 of a-z, 0-9, '_', '-'; not \(reservedNames.sorted().joined(separator: ", ")))")
            }
            let shorthand = shorthands.first { $0.value.section == name }
            let settings = SinkSettings(name: name, source: source, aliases: shorthand == nil ? [] : [name])
            let enabled = try settings.bool("enabled")
            let explicitType = try settings.string("type")
            let defaultType: String? = shorthand?.key ?? (name == "console" ? name : webhooks.contains(name) ? "webhook" : nil)
            guard let type = explicitType ?? defaultType else {
                throw settings.invalid("type", "is required (the sink's type: one of Herald's, such as webhook or console, or a type a plugin adds)")
            }
            if enabled == false || (name == "console" && explicitType == nil && enabled != true) { continue }
            instances.append(SinkInstance(name: name, type: type, settings: settings))
        }
        return instances
    }
}

/// The layered configuration reader as a sink's settings source, with the same strictness as
/// the rest of the configuration: a present value of the wrong type is an error naming the key.
struct ConfigReaderSource: ConfigurationSource {
    let reader: ConfigReader

    func string(_ key: String, isSecret: Bool) throws -> String? { try reader.optionalString(forKey: key, isSecret: isSecret) }

    func int(_ key: String) throws -> Int? { try reader.optionalInt(forKey: key) }

    func double(_ key: String) throws -> Double? { try reader.optionalDouble(forKey: key) }

    func bool(_ key: String) throws -> Bool? { try reader.optionalBool(forKey: key) }

    func stringList(_ key: String) throws -> [String]? { try reader.optionalStringList(forKey: key) }
}
