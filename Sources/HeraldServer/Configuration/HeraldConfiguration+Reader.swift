public import Configuration
import Foundation
public import HeraldCore
import SystemPackage

extension HeraldConfiguration {
    /// Builds the layered reader: `overrides` (command-line options), then `HERALD_*`
    /// environment variables, then the YAML file at `configFile` (if it exists), then
    /// the sink shorthands' fallback variables (`GOOGLE_APPLICATION_CREDENTIALS` as
    /// `fcm.credentials`), then defaults.
    /// - Parameter accessReporter: told of every key read.
    /// - Parameter fallbacks: the shorthands whose fallback variables count; by default Herald's own.
    public static func reader(
        configFile: String?, overrides: [String: String] = [:], environment: [String: String]? = nil, accessReporter: (any AccessReporter)? = nil,
        fallbacks: [SinkShorthand] = Array(builtInShorthands.values)
    ) async throws -> ConfigReader {
        var providers: [any ConfigProvider] = []
        if !overrides.isEmpty {
            // Command-line values are text, like environment values: serving them through the
            // environment provider gives them the same parsing ("8080" reads as an int).
            let asEnvironment = Dictionary(overrides.map { ($0.key.uppercased().replacingOccurrences(of: ".", with: "_"), $0.value) }) { _, last in last }
            providers.append(EnvironmentVariablesProvider(environmentVariables: asEnvironment))
        }
        let env: EnvironmentVariablesProvider
        if let environment {
            env = EnvironmentVariablesProvider(environmentVariables: environment)
        } else {
            env = EnvironmentVariablesProvider()
        }
        providers.append(env.prefixKeys(with: "herald"))
        if let configFile {
            try ConfigurationFileKeys.checkSize(ofFile: configFile)
            do {
                providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(configFile), allowMissing: false))
            } catch {
                throw HeraldError(.unprocessable, code: "invalid_config", "cannot read configuration file '\(configFile)': \(error)")
            }
        }
        // A provider's own variable (every Google client finds its service account through
        // GOOGLE_APPLICATION_CREDENTIALS) stands for its shorthand's key when nothing above names one.
        var standIns: [String: String] = [:]
        for shorthand in fallbacks {
            guard let (variable, key) = shorthand.fallback else { continue }
            let value = (environment ?? ProcessInfo.processInfo.environment)[variable] ?? ""
            if !value.isEmpty { standIns["\(shorthand.section)_\(key)".uppercased().replacingOccurrences(of: ".", with: "_")] = value }
        }
        if !standIns.isEmpty { providers.append(EnvironmentVariablesProvider(environmentVariables: standIns)) }
        return ConfigReader(providers: providers, accessReporter: accessReporter)
    }
}
