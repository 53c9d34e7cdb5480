import Configuration
import Foundation
import HeraldCore

extension ConfigReader {
    // The library returns the default when a value has the wrong type; Herald refuses to start
    // instead, naming the key, so a typo in a config file is never silently ignored.
    func requiredString(forKey key: String, default value: String) throws -> String {
        try wrap(key) { try self.requiredString(forKey: ConfigKey(key)) } ?? value
    }

    func optionalString(forKey key: String, isSecret: Bool = false) throws -> String? {
        try wrap(key) { try self.requiredString(forKey: ConfigKey(key), isSecret: isSecret) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    func requiredInt(forKey key: String, default value: Int) throws -> Int {
        try wrap(key) { try self.requiredInt(forKey: ConfigKey(key)) } ?? value
    }

    func requiredDouble(forKey key: String, default value: Double) throws -> Double {
        try wrap(key) { try self.requiredDouble(forKey: ConfigKey(key)) } ?? value
    }

    func requiredBool(forKey key: String, default value: Bool) throws -> Bool {
        try wrap(key) { try self.requiredBool(forKey: ConfigKey(key)) } ?? value
    }

    /// A duration: a number of seconds, or a number with a unit (`90s`, `15m`, `24h`, `7d`).
    func duration(forKey key: String, in range: ClosedRange<Double>) throws -> Duration? {
        let seconds: Double
        if let number = try? requiredDouble(forKey: ConfigKey(key)) {
            seconds = number
        } else if let text = try optionalString(forKey: key) {
            let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            guard let unit = trimmed.last.flatMap({ units[$0] }), let value = Double(trimmed.dropLast()), value.isFinite else {
                throw HeraldConfiguration.invalid(key, "must be seconds or a number with a unit (90s, 15m, 24h, 7d), not '\(text)'")
            }
            seconds = value * unit
        } else {
            return nil
        }
        guard seconds.isFinite, range.contains(seconds) else {
            throw HeraldConfiguration.invalid(key, "must be between \(Int(range.lowerBound)) and \(Int(range.upperBound)) seconds")
        }
        return .saturating(seconds: seconds)
    }

    func optionalInt(forKey key: String) throws -> Int? {
        try wrap(key) { try self.requiredInt(forKey: ConfigKey(key)) }
    }

    func optionalDouble(forKey key: String) throws -> Double? {
        try wrap(key) { try self.requiredDouble(forKey: ConfigKey(key)) }
    }

    func optionalBool(forKey key: String) throws -> Bool? {
        try wrap(key) { try self.requiredBool(forKey: ConfigKey(key)) }
    }

    /// `key`, or when it is not set the first of its aliases (``SinkShorthand/keyAliases``)
    /// that is; an error names the key or alias that holds the bad value. Every alias is read,
    /// so a file that sets both is not told its alias is unknown.
    func aliasedBool(forKey key: String, aliases: [(alias: String, key: String)]) throws -> Bool? {
        let value = try optionalBool(forKey: key)
        let aliased = try aliases.filter { $0.key == key }.map(\.alias).sorted().compactMap { try optionalBool(forKey: $0) }
        return value ?? aliased.first
    }

    /// A list from a YAML sequence, or from one string with entries separated by newlines or
    /// commas-with-no-`=>` (environment variables cannot hold sequences).
    func optionalStringList(forKey key: String) throws -> [String]? {
        if let list = try? requiredStringArray(forKey: ConfigKey(key)) { return list }
        guard let text = try optionalString(forKey: key) else { return nil }
        let separator: Character = text.contains("\n") || text.contains("=>") ? "\n" : ","
        return text.split(separator: separator).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    private func wrap<T>(_ key: String, _ read: () throws -> T) throws -> T? {
        do {
            return try read()
        } catch {
            // swift-configuration's error enum is package-internal; its description is the only
            // way to tell "absent" (use the default) from "present but not convertible" (refuse).
            if "\(error)".hasPrefix("Missing required config value") { return nil }
            throw HeraldConfiguration.invalid(key, "has an invalid value: \(error)")
        }
    }
}
