import Configuration
import Foundation
import HeraldCore

/// `caps` (docs/timing.md, "Frequency caps and digests"): a section per rule, named by its key.
///
/// ```yaml
/// caps:
///   votes: {types: [upvote, like], channel: push, max: 3, per: 1h, title: "{{count}} new votes"}
/// ```
extension HeraldConfiguration {
    /// Reads every `caps.<name>` section the file sets.
    /// - Parameter fileKeys: the keys the configuration file sets, for the rules' names.
    static func readCaps(_ reader: ConfigReader, fileKeys: [String], types: NotificationTypes) throws -> [FrequencyCap] {
        var names: [String] = []
        for key in fileKeys where key.hasPrefix("caps.") {
            let parts = key.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3 else { throw invalid(key, "must be caps.<name>.<setting> (types, channel, max, per, digest_type, title, body)") }
            let name = String(parts[1])
            if !names.contains(name) { names.append(name) }
        }
        return try names.map { name in
            let prefix = "caps.\(name)"
            guard SinkChannel.isValidName(name) else {
                throw invalid(prefix, "'\(name)' is not a rule name (lowercase letters, digits and '_', starting with a letter)")
            }
            guard let typeList = try reader.optionalStringList(forKey: "\(prefix).types"), !typeList.isEmpty else {
                throw invalid("\(prefix).types", "must list the notification types the rule counts")
            }
            for type in typeList where !types.contains(type) {
                throw invalid("\(prefix).types", "names '\(type)', which is not a notification type (types: \(types.all.joined(separator: ", ")))")
            }
            let channel = try reader.requiredString(forKey: "\(prefix).channel", default: SinkChannel.push.name)
            guard SinkChannel.isValidName(channel) else { throw invalid("\(prefix).channel", "names '\(channel)', which is not a channel name") }
            guard let max = try reader.optionalInt(forKey: "\(prefix).max"), (0...10_000).contains(max) else {
                throw invalid("\(prefix).max", "must be the notifications let through per window, 0-10000")
            }
            guard let per = try reader.duration(forKey: "\(prefix).per", in: 1...Double(WindowLength.maxSeconds)) else {
                throw invalid("\(prefix).per", "must be the window, such as 1h (1 second to 7 days)")
            }
            let digestType = try reader.optionalString(forKey: "\(prefix).digest_type")
            if let digestType, !types.contains(digestType) {
                throw invalid("\(prefix).digest_type", "names '\(digestType)', which is not a notification type")
            }
            let cap = FrequencyCap(
                name: name, types: Set(typeList), channel: channel, max: max, seconds: Int64(per.components.seconds), digestType: digestType,
                title: try reader.optionalString(forKey: "\(prefix).title") ?? FrequencyCap.defaultTitle,
                body: try reader.optionalString(forKey: "\(prefix).body") ?? FrequencyCap.defaultBody)
            try cap.checkTemplates(field: prefix)
            return cap
        }
    }

    /// Refuses a cap on a channel no sink delivers on.
    /// - Parameter channels: the channels of this server's sinks.
    func checkCapChannels(_ channels: Set<String>) throws {
        for cap in caps where !channels.contains(cap.channel) {
            throw Self.invalid("caps.\(cap.name).channel", "names a channel no sink delivers on (channels: \(channels.sorted().joined(separator: ", ")))")
        }
    }
}
