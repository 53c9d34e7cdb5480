import Foundation
import HeraldCore
import HeraldServer
import HeraldTestSupport
import Testing

/// `caps` (docs/timing.md, "Frequency caps and digests"): read from the file, every bad value
/// refused naming its key, and a cap on a channel no sink delivers on stopping the start.
@Suite(.cleansUp) struct CapsConfigurationTests {
    func file(_ yaml: String) throws -> String {
        let path = try TestResources.temporaryDirectory("herald-caps").appendingPathComponent("herald.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func rulesAreReadWithTheirDefaults() async throws {
        let configuration = try await HeraldConfiguration.load(
            configFile: try file(
                """
                caps:
                  votes: {types: [upvote, like], max: 3, per: 1h, title: "{{count}} new votes"}
                  replies: {types: [reply], channel: push, max: 0, per: 90, digest_type: generic}
                """), environment: [:])
        #expect(
            configuration.caps == [
                FrequencyCap(name: "votes", types: ["upvote", "like"], max: 3, seconds: 3600, title: "{{count}} new votes"),
                FrequencyCap(name: "replies", types: ["reply"], max: 0, seconds: 90, digestType: "generic"),
            ])
        #expect(try await HeraldConfiguration.load(configFile: nil, environment: [:]).caps.isEmpty, "none by default")
    }

    @Test func aBadRuleIsRefusedNamingItsKey() async throws {
        for (yaml, key) in [
            ("caps:\n  votes: {max: 3, per: 1h}", "caps.votes.types"),
            ("caps:\n  votes: {types: [nope], max: 3, per: 1h}", "caps.votes.types"),
            ("caps:\n  votes: {types: [upvote], per: 1h}", "caps.votes.max"),
            ("caps:\n  votes: {types: [upvote], max: -1, per: 1h}", "caps.votes.max"),
            ("caps:\n  votes: {types: [upvote], max: 3}", "caps.votes.per"),
            ("caps:\n  votes: {types: [upvote], max: 3, per: 0}", "caps.votes.per"),
            ("caps:\n  votes: {types: [upvote], max: 3, per: 8d}", "caps.votes.per"),
            ("caps:\n  votes: {types: [upvote], max: 3, per: 1h, digest_type: nope}", "caps.votes.digest_type"),
            ("caps:\n  votes: {types: [upvote], max: 3, per: 1h, title: \"{{#count}}\"}", "caps.votes.title"),
            ("caps:\n  Votes: {types: [upvote], max: 3, per: 1h}", "caps.Votes"),
            ("caps:\n  votes: 3", "caps.votes"),
        ] {
            let error = await #expect(throws: HeraldError.self) { _ = try await HeraldConfiguration.load(configFile: try file(yaml), environment: [:]) }
            #expect(error?.message.hasPrefix(key) == true, "\(yaml): \(error?.message ?? "")")
        }
    }

    @Test func aCapOnAChannelNoSinkDeliversOnStopsTheStart() async throws {
        var configuration = try await HeraldConfiguration.load(
            configFile: try file("caps:\n  votes: {types: [upvote], channel: sms, max: 3, per: 1h}"), environment: [:])
        configuration.database = "sqlite::memory:"
        let error = await #expect(throws: HeraldError.self) { _ = try await HeraldServer.start(configuration) }
        #expect(error?.message.hasPrefix("caps.votes.channel") == true, "\(error?.message ?? "")")
    }
}
