import Configuration
import Foundation
import Synchronization
import Yams

/// The keys a YAML configuration file sets, for finding those Herald never reads: a misspelt key
/// (`delivery.wrokers`) or a section written as a value (`delivery: 5`) was ignored without a
/// word, leaving the default in force.
enum ConfigurationFileKeys {
    /// Every key `path` gives a value, dotted (`delivery.max_attempts`), in file order. A list is
    /// one value (`routing`, `types.extra`); a key set to null sets nothing and is left out.
    static func keys(inFile path: String) -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), let root = try? Yams.compose(yaml: text), let mapping = root.mapping
        else { return [] }
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

    /// Sections whose keys belong to sink types, a plugin's included, and are read when the
    /// sinks are built: not checked here.
    static func isSinkKey(_ key: String) -> Bool {
        key == "sinks" || key.hasPrefix("sinks.") || key == "fcm" || key.hasPrefix("fcm.")
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
}

/// The keys a configuration file sets in sinks' sections, checked once the sinks are built:
/// each factory reads its own keys then, so a key none of them read (`sinks.fcm.max_concurency`)
/// is a misspelling. Sections of instances not built (`enabled: false`) are not checked.
final class UnreadSinkKeys: Sendable {
    let file: String
    private let keys: [String]
    private let read: ReadConfigurationKeys

    init(file: String, keys: [String], read: ReadConfigurationKeys) {
        self.file = file
        self.keys = keys.filter(ConfigurationFileKeys.isSinkKey)
        self.read = read
    }

    /// The first key in the sections of `instances` that no one read. The `fcm:` section is an
    /// alias of `sinks.fcm`, read under either spelling.
    func first(among instances: [String]) -> String? {
        keys.first { key in
            let canonical = key.hasPrefix("fcm.") ? "sinks." + key : key
            guard let name = instances.first(where: { canonical.hasPrefix("sinks.\($0).") }) else { return false }
            let alias = name == "fcm" ? "fcm." + canonical.dropFirst("sinks.fcm.".count) : canonical
            return !read.contains(canonical) && !read.contains(alias)
        }
    }
}
