import Foundation

/// Where configuration values come from (the YAML file, `HERALD_*` variables, command-line
/// options, layered by the server; a dictionary in tests). Keys are full dotted paths.
public protocol ConfigurationSource: Sendable {
    func string(_ key: String, isSecret: Bool) throws -> String?
    func int(_ key: String) throws -> Int?
    func double(_ key: String) throws -> Double?
    func bool(_ key: String) throws -> Bool?
    /// A YAML sequence, or one string of comma- or newline-separated entries.
    func stringList(_ key: String) throws -> [String]?
}

/// One sink instance's section of the configuration, `sinks.<name>.*`: what its factory
/// decodes and validates. Every error names the full key path (`sinks.chat.url is required`).
///
/// ```swift
/// let url = try settings.requiredString("url")          // sinks.<name>.url
/// let limit = try settings.int("max_concurrency") ?? 8  // sinks.<name>.max_concurrency
/// ```
public struct SinkSettings: Sendable {
    /// The instance's name: its key under `sinks:`.
    public let name: String
    /// Where its keys live, first match wins: `sinks.<name>`, then any documented alias
    /// (the top-level `fcm:` section for the `fcm` instance).
    public let prefixes: [String]
    private let source: any ConfigurationSource

    /// The settings of instance `name`, read from `source` under `sinks.<name>` and then each
    /// alias section.
    public init(name: String, source: any ConfigurationSource, aliases: [String] = []) {
        self.name = name
        self.prefixes = ["sinks.\(name)"] + aliases
        self.source = source
    }

    /// Settings from a dictionary of keys relative to the section (`["url": "…"]`), for tests
    /// and for embedders that build configuration in code.
    public init(name: String, values: [String: String]) {
        let prefix = "sinks.\(name)"
        self.init(name: name, source: DictionarySource(Dictionary(values.map { ("\(prefix).\($0.key)", $0.value) }) { _, last in last }))
    }

    /// The full key path of `key` in this section, as errors name it.
    public func path(_ key: String) -> String { "\(prefixes[0]).\(key)" }

    /// `key`'s text, nil when absent or empty; `isSecret` keeps it out of access logs.
    public func string(_ key: String, isSecret: Bool = false) throws -> String? {
        try first(key) { try source.string($0, isSecret: isSecret) }
    }

    /// `key`'s text; an absent key stops the server at start, naming it.
    public func requiredString(_ key: String, isSecret: Bool = false) throws -> String {
        guard let value = try string(key, isSecret: isSecret) else { throw invalid(key, "is required for a sink of this type") }
        return value
    }

    /// `key` as an integer, nil when absent; a value that is not one is an error naming the key.
    public func int(_ key: String) throws -> Int? { try first(key) { try source.int($0) } }

    /// `key` as a finite number, nil when absent; anything else is an error naming the key.
    public func double(_ key: String) throws -> Double? { try first(key) { try source.double($0) } }

    /// `key` as `true` or `false`, nil when absent; anything else is an error naming the key.
    public func bool(_ key: String) throws -> Bool? { try first(key) { try source.bool($0) } }

    /// `key` as a list: a YAML sequence, or one text with entries separated by commas or newlines.
    public func stringList(_ key: String) throws -> [String]? { try first(key) { try source.stringList($0) } }

    /// A path to a file this process can read (a certificate, a key), or nil when absent.
    public func readableFile(_ key: String) throws -> String? {
        guard let path = try string(key) else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else { throw invalid(key, "cannot be read") }
        return path
    }

    /// An integer within `range`, or `default` when absent.
    public func int(_ key: String, default value: Int, in range: ClosedRange<Int>) throws -> Int {
        let found = try int(key) ?? value
        guard range.contains(found) else { throw invalid(key, "must be \(range.lowerBound)-\(range.upperBound)") }
        return found
    }

    /// The configuration error for `key` of this section.
    public func invalid(_ key: String, _ problem: String) -> HeraldError {
        HeraldError(.unprocessable, code: "invalid_config", "\(path(key)) \(problem)")
    }

    private func first<T>(_ key: String, _ read: (String) throws -> T?) throws -> T? {
        for prefix in prefixes {
            if let value = try read("\(prefix).\(key)") { return value }
        }
        return nil
    }
}

/// A configuration source backed by a dictionary of full keys to text values.
public struct DictionarySource: ConfigurationSource {
    private let values: [String: String]

    /// A source of these full keys (`sinks.chat.url`) and their texts.
    public init(_ values: [String: String]) { self.values = values }

    /// The key's text; empty reads as absent.
    public func string(_ key: String, isSecret: Bool) throws -> String? { values[key].flatMap { $0.isEmpty ? nil : $0 } }

    /// The key's text as an integer.
    public func int(_ key: String) throws -> Int? { try parse(key) { Int($0) } }

    /// The key's text as a finite number.
    public func double(_ key: String) throws -> Double? { try parse(key) { Double($0).flatMap { $0.isFinite ? $0 : nil } } }

    /// The key's text as `true` or `false`, in any case.
    public func bool(_ key: String) throws -> Bool? { try parse(key) { ["true": true, "false": false][$0.lowercased()] } }

    /// The key's text split at commas and newlines, blanks dropped.
    public func stringList(_ key: String) throws -> [String]? {
        values[key].map { text in
            text.split(whereSeparator: { $0 == "," || $0 == "\n" }).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    private func parse<T>(_ key: String, _ convert: (String) -> T?) throws -> T? {
        guard let text = values[key] else { return nil }
        guard let value = convert(text) else {
            throw HeraldError(.unprocessable, code: "invalid_config", "\(key) has an invalid value: '\(text)'")
        }
        return value
    }
}
