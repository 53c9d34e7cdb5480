import Configuration
import Foundation
import HeraldCore
import Synchronization
import Yams

/// What a YAML configuration file declares, read from one parse of it: its sink instances, and
/// the keys it sets, for finding those Herald never reads (a misspelt key, `delivery.wrokers`, or
/// a section written as a value, `delivery: 5`, was ignored without a word, leaving the default
/// in force).
enum ConfigurationFileKeys {
    /// The file's top node, or nil when it cannot be read as YAML (the configuration reader
    /// reports that file itself).
    static func root(ofFile path: String) -> Node? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return try? Yams.compose(yaml: text)
    }

    /// The most values a configuration file may hold once its aliases are expanded.
    static let maxValues = 100_000

    /// Refuses a file whose aliases (`*name`) repeat sections into more than ``maxValues``
    /// values: nine nested levels of nine aliases each are a few lines that expand to 43 million
    /// keys, and reading them kept Herald from starting for as long as the reader took (over a
    /// minute for a file of 8 lines). Counts by walking the composed document, stopping at the
    /// limit, so the check itself stays short.
    static func checkSize(ofFile path: String) throws {
        guard let root = root(ofFile: path) else { return }
        var count = 0
        func walk(_ node: Node) -> Bool {
            count += 1
            guard count <= maxValues else { return false }
            if let mapping = node.mapping { return mapping.allSatisfy { walk($0.key) && walk($0.value) } }
            if let sequence = node.sequence { return sequence.allSatisfy(walk) }
            return true
        }
        guard walk(root) else {
            throw HeraldError(
                .unprocessable, code: "invalid_config",
                "configuration file '\(path)' expands to more than \(maxValues) values (YAML aliases, `*name`, repeat what they name)")
        }
    }

    /// The names under `sinks:` whose values are sections, in file order.
    static func sinkNames(in root: Node?) -> [String] {
        guard let sinks = root?["sinks"]?.mapping else { return [] }
        return sinks.compactMap { key, value in value.mapping == nil ? nil : key.string }
    }

    /// Every key the file gives a value, dotted (`delivery.max_attempts`), in file order. A list
    /// is one value (`routing`, `types.extra`); a key set to null sets nothing and is left out.
    static func keys(in root: Node?) -> [String] {
        guard let mapping = root?.mapping else { return [] }
        var keys: [String] = []
        func walk(_ mapping: Node.Mapping, prefix: String) {
            for (key, value) in mapping {
                let name = prefix + (key.string ?? "?")
                if let nested = value.mapping {
                    walk(nested, prefix: name + ".")
                } else if value.null == nil {
                    keys.append(name)
                }
            }
        }
        walk(mapping, prefix: "")
        return keys
    }

    /// Whether `key`, which the file gives a value (``keys(in:)``), is one of the sections that
    /// hold sink instances: `sinks: 5`, `sinks: [fcm]`, `sinks: {console: true}` or `fcm: 3`
    /// configure no sink, and the sink checks never look at them. `shorthands` are the sink
    /// types' shorthand sections (``SinkShorthand/section``).
    static func isSinkSection(_ key: String, shorthands: Set<String>) -> Bool {
        key == "sinks" || shorthands.contains(key) || (key.hasPrefix("sinks.") && key.split(separator: ".", omittingEmptySubsequences: false).count == 2)
    }

    /// What goes under a sink section that ``isSinkSection(_:shorthands:)`` found written as a value.
    static func sinkSectionHint(_ key: String, shorthands: [SinkShorthand]) -> String {
        if key == "sinks" {
            return "one section per sink instance goes under it (such as sinks.console.enabled, or sinks.NAME.type and that type's keys)"
        }
        if let shorthand = shorthands.first(where: { $0.section == key }) {
            return "the \(key) sink's settings go under it (such as \(key).\(shorthand.declaringKey))"
        }
        return "the sink's settings go under it (such as \(key).enabled, or \(key).type and that type's keys)"
    }

    /// Sections whose keys belong to sink types, a plugin's included, and are read when the
    /// sinks are built: not checked here.
    static func isSinkKey(_ key: String, shorthands: Set<String>) -> Bool {
        key == "sinks" || key.hasPrefix("sinks.") || shorthands.contains(key) || shorthands.contains { key.hasPrefix($0 + ".") }
    }
}

/// Records the keys a ``ConfigReader`` was asked for.
final class ReadConfigurationKeys: AccessReporter {
    private let keys = Mutex<Set<String>>([])

    func report(_ event: AccessEvent) {
        let key = event.metadata.key.components.joined(separator: ".")
        keys.withLock { _ = $0.insert(key) }
    }

    func contains(_ key: String) -> Bool { keys.withLock { $0.contains(key) } }

    var all: Set<String> { keys.withLock { $0 } }
}

/// What was set but not read, checked once the sinks are built (each factory reads its own keys
/// then): a key in a built sink's section of the file that no factory read
/// (`sinks.fcm.max_concurency`) is a misspelling, and so is a `HERALD_*` variable no key reads.
/// Sections of instances not built (`enabled: false`) are not checked.
final class UnreadSettings: Sendable {
    let file: String?
    private let sinkKeys: [String]
    private let environmentNames: [String]
    private let read: ReadConfigurationKeys
    /// The sink types' shorthand sections (`fcm`), aliases of `sinks.<section>`.
    private let shorthands: Set<String>
    /// `HERALD_*` variables that are not settings: read by the command-line tools, tests and
    /// scripts, which share the environment.
    static let otherVariables: Set<String> = ["HERALD_CONFIG", "HERALD_API_KEY", "HERALD_NOTIFSIM_USER", "HERALD_URL"]
    static let otherPrefixes = ["HERALD_TEST_", "HERALD_PG_", "HERALD_BENCH_"]

    init(file: String?, fileKeys: [String], environmentNames: [String], read: ReadConfigurationKeys, shorthands: Set<String>) {
        self.file = file
        self.shorthands = shorthands
        self.sinkKeys = fileKeys.filter { ConfigurationFileKeys.isSinkKey($0, shorthands: shorthands) }
        self.environmentNames = environmentNames.filter { name in
            name.hasPrefix("HERALD_") && !Self.otherVariables.contains(name) && !Self.otherPrefixes.contains { name.hasPrefix($0) }
        }
        self.read = read
    }

    /// The first key in the file's sections of `instances` that no one read. A shorthand
    /// section (`fcm:`) is an alias of `sinks.<section>`, read under either spelling.
    func firstSinkKey(among instances: [String]) -> String? {
        sinkKeys.first { key in
            let canonical = shorthands.contains { key.hasPrefix($0 + ".") } ? "sinks." + key : key
            guard let name = instances.first(where: { canonical.hasPrefix("sinks.\($0).") }) else { return false }
            let alias = shorthands.contains(name) ? String(canonical.dropFirst("sinks.".count)) : canonical
            return !read.contains(canonical) && !read.contains(alias)
        }
    }

    /// `HERALD_*` variables that no key read, sorted: a key reads `HERALD_` and its path in upper
    /// case with `_` for `.`. A variable of a sink instance that is not built counts as read.
    func environmentVariables(among instances: [String]) -> [String] {
        let names = Set(read.all.map { "HERALD_" + $0.uppercased().replacingOccurrences(of: ".", with: "_") })
        let built = instances.map { "HERALD_SINKS_\($0.uppercased().replacingOccurrences(of: "-", with: "_"))_" }
        return environmentNames.filter { name in
            guard !names.contains(name) else { return false }
            // A sink's own variables, when the sink is not built, were never going to be read.
            if name.hasPrefix("HERALD_SINKS_") { return built.contains { name.hasPrefix($0) } }
            // A shorthand section's (HERALD_FCM_*), likewise.
            if let section = shorthands.first(where: { name.hasPrefix("HERALD_\($0.uppercased().replacingOccurrences(of: "-", with: "_"))_") }) {
                return instances.contains(section)
            }
            return true
        }.sorted()
    }
}
