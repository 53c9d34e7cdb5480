/// The sinks a server delivers through, by name. Built once from configuration.
public struct SinkRegistry: Sendable {
    /// The sinks in configuration order.
    public let sinks: [any NotificationSink]
    private let byName: [String: any NotificationSink]
    /// Channels the configuration set for instances (`sinks.<name>.channel`, `user_facing`).
    private let channels: [String: SinkChannel]

    /// - Parameter channels: channels the configuration sets per instance name, over the
    ///   sinks' own (``NotificationSink/channel``).
    /// - Throws: a configuration error for duplicate or malformed names.
    public init(_ sinks: [any NotificationSink], channels: [String: SinkChannel] = [:]) throws {
        var byName: [String: any NotificationSink] = [:]
        for sink in sinks {
            guard SinkRegistry.isValidName(sink.name) else {
                throw HeraldError(.unprocessable, code: "invalid_config", "sink name '\(sink.name)' must be 1-64 characters of a-z, 0-9, ':', '_' or '-'")
            }
            guard byName[sink.name] == nil else {
                throw HeraldError(.unprocessable, code: "invalid_config", "two sinks are named '\(sink.name)'")
            }
            byName[sink.name] = sink
        }
        self.sinks = sinks
        self.byName = byName
        self.channels = channels
    }

    /// The channel `sink` delivers on: the configuration's, else its own.
    public func channel(of sink: any NotificationSink) -> SinkChannel { channels[sink.name] ?? sink.channel }

    /// The channels users choose among on this server (``SinkChannel/isChoosable``), sorted.
    public var choosableChannels: [String] {
        Array(Set(sinks.map { channel(of: $0) }.filter(\.isChoosable).map(\.name))).sorted()
    }

    /// The sink named `name`, if one is.
    public subscript(name: String) -> (any NotificationSink)? { byName[name] }

    /// Every sink's name, in configuration order.
    public var names: [String] { sinks.map(\.name) }

    /// Whether `name` may name a sink instance: 1-64 of `a-z`, `0-9`, `_`, `-` and `:`.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45 || $0 == 58 }
    }
}
