import Foundation
import HeraldCore
import HeraldServer
import HeraldTestSupport
import Testing

/// `preferences.defaults`, `preferences.critical`, `sinks.<name>.channel` and `.user_facing`
/// (docs/routing.md, "Channels and preferences"): read from a file or the environment, every
/// bad value refused naming its key.
@Suite(.cleansUp) struct PreferenceConfigurationTests {
    static let secret = "a-webhook-secret-of-some-length"

    func file(_ yaml: String) throws -> String {
        let path = try TestResources.temporaryDirectory("herald-preferences").appendingPathComponent("herald.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func start(_ configuration: HeraldConfiguration) async throws -> HeraldServer {
        var copy = configuration
        copy.database = "sqlite::memory:"
        let server = try await HeraldServer.start(copy)
        TestResources.register { await server.close() }
        return server
    }

    @Test func defaultsAndCriticalTypesReadFromAFileOrTheEnvironment() async throws {
        let fromFile = try await HeraldConfiguration.load(
            configFile: try file(
                """
                types:
                  extra: [digest]
                preferences:
                  defaults:
                    upvote: {push: false}
                    digest: {push: true}
                  critical: [alert, violation]
                """), environment: [:])
        #expect(fromFile.preferences == ChannelPreferences(defaults: ["upvote": ["push": false], "digest": ["push": true]], critical: ["alert", "violation"]))
        let fromEnvironment = try await HeraldConfiguration.load(
            configFile: nil, environment: ["HERALD_PREFERENCES_DEFAULTS": "upvote.push=false, like.push=true", "HERALD_PREFERENCES_CRITICAL": "alert"])
        #expect(fromEnvironment.preferences == ChannelPreferences(defaults: ["upvote": ["push": false], "like": ["push": true]], critical: ["alert"]))
        #expect(try await HeraldConfiguration.load(configFile: nil, environment: [:]).preferences == ChannelPreferences())
    }

    @Test(arguments: [
        (["HERALD_PREFERENCES_CRITICAL": "alert,nope"], "preferences.critical"),
        (["HERALD_PREFERENCES_DEFAULTS": "nope.push=false"], "preferences.defaults"),
        (["HERALD_PREFERENCES_DEFAULTS": "upvote.push=maybe"], "preferences.defaults"),
        (["HERALD_PREFERENCES_DEFAULTS": "upvote=false"], "preferences.defaults"),
        (["HERALD_PREFERENCES_DEFAULTS": "upvote.Push=false"], "preferences.defaults"),
        (["HERALD_SCHEDULING_DEFAULT_TIMEZONE": "Mars/Olympus"], "scheduling.default_timezone"),
    ])
    func aBadValueIsRefusedNamingItsKey(_ environment: [String: String], _ key: String) async throws {
        let error = await #expect(throws: HeraldError.self) { _ = try await HeraldConfiguration.load(configFile: nil, environment: environment) }
        #expect(error?.code == "invalid_config")
        #expect(error?.message.hasPrefix(key) == true, "\(error?.message ?? "")")
    }

    @Test func aBadMapEntryIsRefusedNamingItsKey() async throws {
        for (yaml, key) in [
            ("preferences:\n  defaults:\n    upvote: {push: sometimes}", "preferences.defaults.upvote.push"),
            ("preferences:\n  defaults:\n    nope: {push: false}", "preferences.defaults.nope.push"),
            ("preferences:\n  defaults:\n    upvote: false", "preferences.defaults.upvote"),
        ] {
            let error = await #expect(throws: HeraldError.self) { _ = try await HeraldConfiguration.load(configFile: try file(yaml), environment: [:]) }
            #expect(error?.message.hasPrefix(key) == true, "\(yaml): \(error?.message ?? "")")
        }
    }

    @Test func aDefaultForAChannelNoSinkDeliversOnStopsTheStart() async throws {
        let configuration = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_PREFERENCES_DEFAULTS": "message.chat=true"])
        let error = await #expect(throws: HeraldError.self) { _ = try await start(configuration) }
        #expect(error?.message.hasPrefix("preferences.defaults.message.chat") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("push") == true, "the channels there are are listed")
    }

    @Test func anInstancesChannelIsSetByConfigurationAndShownWithItsHealth() async throws {
        let configuration = try await HeraldConfiguration.load(
            configFile: nil,
            environment: [
                "HERALD_SINKS_WEBHOOKS": "team,audit", "HERALD_SINKS_TEAM_URL": "https://chat.example/hook", "HERALD_SINKS_TEAM_CHANNEL": "chat",
                "HERALD_SINKS_TEAM_SECRET": Self.secret, "HERALD_SINKS_AUDIT_URL": "https://audit.example/hook",
                "HERALD_SINKS_AUDIT_SECRET": Self.secret, "HERALD_SINKS_AUDIT_USER_FACING": "false",
                "HERALD_PREFERENCES_DEFAULTS": "message.chat=false",
            ])
        let server = try await start(configuration)
        let reports = Dictionary(uniqueKeysWithValues: await SinkHealthReport.collect(server.sinks).map { ($0.name, $0) })
        #expect(reports["webhook:team"].map { "\($0.channel) \($0.userFacing)" } == "chat true")
        #expect(reports["webhook:audit"].map { "\($0.channel) \($0.userFacing)" } == "operator false")
        #expect(reports["history"].map { "\($0.channel) \($0.userFacing)" } == "in_app true")
        #expect(reports["feed"].map { "\($0.channel) \($0.userFacing)" } == "feed false")
        #expect(server.sinks.choosableChannels == ["chat"])

        for (environment, key) in [
            (["HERALD_SINKS_TEAM_CHANNEL": "Chat!"], "sinks.team.channel"),
            (["HERALD_SINKS_TEAM_CHANNEL": "in_app"], "sinks.team.channel"),
            (["HERALD_SINKS_TEAM_USER_FACING": "perhaps"], "sinks.team.user_facing"),
        ] {
            let bad = try await HeraldConfiguration.load(
                configFile: nil,
                environment: ["HERALD_SINKS_WEBHOOKS": "team", "HERALD_SINKS_TEAM_URL": "https://chat.example/hook", "HERALD_SINKS_TEAM_SECRET": Self.secret]
                    .merging(environment) { $1 })
            let error = await #expect(throws: HeraldError.self) { _ = try await start(bad) }
            #expect(error?.message.hasPrefix(key) == true, "\(environment): \(error?.message ?? "")")
        }
    }

    @Test func theDefaultTimeZoneIsUTCUnlessConfigured() async throws {
        #expect(
            try await HeraldConfiguration.load(configFile: nil, environment: [:]).defaultTimeZone.secondsFromGMT(for: Date(timeIntervalSince1970: 0)) == 0,
            "UTC")
        let configured = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_SCHEDULING_DEFAULT_TIMEZONE": "Asia/Tokyo"])
        #expect(configured.defaultTimeZone.identifier == "Asia/Tokyo")
    }
}
