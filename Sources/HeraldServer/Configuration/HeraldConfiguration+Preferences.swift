import Configuration
import Foundation
import HeraldCore

/// `preferences.defaults` and `preferences.critical` (docs/routing.md, "Channels and
/// preferences").
extension HeraldConfiguration {
    /// Reads the operator's preferences. `preferences.defaults` is a map in the file
    /// (`upvote: {push: false}`), or, where a map cannot be written (an environment variable),
    /// a list of `type.channel=true|false` entries; its channels are checked once the sinks are
    /// built (``checkPreferenceChannels(_:)``).
    /// - Parameter fileKeys: the keys the configuration file sets, for the map's entries.
    static func readPreferences(_ reader: ConfigReader, fileKeys: [String], types: NotificationTypes) throws -> ChannelPreferences {
        var preferences = ChannelPreferences()
        func checkType(_ type: String, key: String) throws {
            guard types.contains(type) else {
                throw invalid(key, "names '\(type)', which is not a notification type (types: \(types.all.joined(separator: ", ")))")
            }
        }
        for type in try reader.optionalStringList(forKey: "preferences.critical") ?? [] {
            try checkType(type, key: "preferences.critical")
            preferences.critical.insert(type)
        }
        func add(type: String, channel: String, value: Bool, key: String) throws {
            try checkType(type, key: key)
            guard SinkChannel.isValidName(channel) else { throw invalid(key, "names '\(channel)', which is not a channel name") }
            preferences.defaults[type, default: [:]][channel] = value
        }
        let prefix = "preferences.defaults."
        for key in fileKeys where key.hasPrefix(prefix) {
            let parts = key.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw invalid(key, "must be preferences.defaults.<type>.<channel>: true or false") }
            guard let value = try reader.optionalBool(forKey: key) else { continue }
            try add(type: String(parts[0]), channel: String(parts[1]), value: value, key: key)
        }
        if !fileKeys.contains(where: { $0.hasPrefix(prefix) }) {
            for entry in try reader.optionalStringList(forKey: "preferences.defaults") ?? [] {
                let pair = entry.split(separator: "=", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
                let path = pair.first?.split(separator: ".", omittingEmptySubsequences: false) ?? []
                guard pair.count == 2, path.count == 2, let value = Bool(pair[1]) else {
                    throw invalid("preferences.defaults", "entry '\(entry)' must be type.channel=true or type.channel=false")
                }
                try add(type: String(path[0]), channel: String(path[1]), value: value, key: "preferences.defaults")
            }
        }
        return preferences
    }

    /// Refuses a default for a channel no sink delivers on, or one users cannot choose.
    /// - Parameter channels: the channels users choose on this server.
    func checkPreferenceChannels(_ channels: [String]) throws {
        let choosable = Set(channels + [SinkChannel.push.name])
        for (type, byChannel) in preferences.defaults.sorted(by: { $0.key < $1.key }) {
            for channel in byChannel.keys.sorted() where !choosable.contains(channel) {
                throw Self.invalid(
                    "preferences.defaults.\(type).\(channel)",
                    "names a channel users do not choose on this server (channels: \(choosable.sorted().joined(separator: ", ")))")
            }
        }
    }
}
