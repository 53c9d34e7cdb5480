import Foundation
import HeraldCore
import Testing

/// The resolution of users' channel preferences (docs/routing.md, "Channels and preferences"):
/// critical → the user's type×channel → the user's channel switch → the operator's default →
/// the sink's default, with the master switch and `delivery: pull` after critical.
@Suite struct ChannelPreferencesTests {
    typealias Step = ChannelPreferences.Step

    /// One combination of everything the resolution reads.
    struct Case: CustomStringConvertible {
        var channel: SinkChannel
        var critical = false
        var forced = false
        var enabled = true
        var pull = false
        var typeChannel: Bool?
        var channelSwitch: Bool?
        var operatorDefault: Bool?

        var description: String {
            "\(channel) critical=\(critical) forced=\(forced) enabled=\(enabled) pull=\(pull) type×channel=\(String(describing: typeChannel)) switch=\(String(describing: channelSwitch)) default=\(String(describing: operatorDefault))"
        }

        func resolve() -> ChannelPreferences.Outcome {
            var settings = UserSettings(enabled: enabled, delivery: pull ? .pull : .push)
            if let typeChannel { settings.setChoice(typeChannel, type: "comment", channel: channel.name) }
            if let channelSwitch { settings.channels[channel.name] = channelSwitch }
            var preferences = ChannelPreferences(critical: critical ? ["comment"] : [])
            if let operatorDefault { preferences.defaults["comment"] = [channel.name: operatorDefault] }
            return preferences.resolve(type: "comment", channel: channel, settings: settings, forced: forced)
        }
    }

    static let push = SinkChannel.push
    static let chat = SinkChannel("chat")
    static let audit = SinkChannel("audit", userFacing: false)

    /// Each row: what is set, and the rule that must decide.
    static let table: [(Case, Bool, Step)] = [
        (Case(channel: audit, enabled: false, typeChannel: false), true, .notUserFacing),
        (Case(channel: .inApp, enabled: false, channelSwitch: false), true, .inApp),
        (Case(channel: push, critical: true, enabled: false, pull: true, typeChannel: false, channelSwitch: false, operatorDefault: false), true, .critical),
        (Case(channel: push, forced: true, enabled: false, typeChannel: false), true, .critical),
        (Case(channel: chat, forced: true, typeChannel: false), false, .typeChannel),
        (Case(channel: chat, enabled: false, typeChannel: true, channelSwitch: true, operatorDefault: true), false, .masterSwitch),
        (Case(channel: push, pull: true, typeChannel: true, channelSwitch: true), false, .deliveryPull),
        (Case(channel: chat, pull: true), true, .sinkDefault),
        (Case(channel: push, typeChannel: true, channelSwitch: false, operatorDefault: false), true, .typeChannel),
        (Case(channel: chat, typeChannel: false, channelSwitch: true, operatorDefault: true), false, .typeChannel),
        (Case(channel: chat, channelSwitch: false, operatorDefault: true), false, .channelSwitch),
        (Case(channel: push, channelSwitch: true, operatorDefault: false), true, .channelSwitch),
        (Case(channel: chat, operatorDefault: false), false, .operatorDefault),
        (Case(channel: push, operatorDefault: true), true, .operatorDefault),
        (Case(channel: chat), true, .sinkDefault),
        (Case(channel: push), true, .sinkDefault),
    ]

    @Test func eachRuleDecidesInItsPlace() {
        for (row, delivers, step) in Self.table {
            let outcome = row.resolve()
            #expect(outcome.delivers == delivers && outcome.step == step, "\(row): \(outcome)")
        }
    }

    /// Every combination: the deciding rule is the first that is set, in the documented order,
    /// so changing anything a later rule reads never changes the outcome.
    @Test func noLaterRuleOverridesAnEarlierOne() {
        let order: [Step] = [.notUserFacing, .inApp, .critical, .masterSwitch, .deliveryPull, .typeChannel, .channelSwitch, .operatorDefault, .sinkDefault]
        var cases: [Case] = []
        for channel in [Self.audit, SinkChannel.inApp, Self.push, Self.chat] {
            for critical in [false, true] {
                for forced in [false, true] {
                    for enabled in [true, false] {
                        for pull in [false, true] {
                            for typeChannel in [nil, true, false] as [Bool?] {
                                for channelSwitch in [nil, true, false] as [Bool?] {
                                    for operatorDefault in [nil, true, false] as [Bool?] {
                                        cases.append(
                                            Case(
                                                channel: channel, critical: critical, forced: forced, enabled: enabled, pull: pull, typeChannel: typeChannel,
                                                channelSwitch: channelSwitch, operatorDefault: operatorDefault))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(cases.count == 1_728)
        for base in cases {
            let outcome = base.resolve()
            guard let rank = order.firstIndex(of: outcome.step) else { continue }
            // Every input a later rule reads, changed in every way.
            var variants: [Case] = []
            for value in [nil, true, false] as [Bool?] {
                if rank < order.firstIndex(of: .typeChannel)! { variants.append(with(base) { $0.typeChannel = value }) }
                if rank < order.firstIndex(of: .channelSwitch)! { variants.append(with(base) { $0.channelSwitch = value }) }
                if rank < order.firstIndex(of: .operatorDefault)! { variants.append(with(base) { $0.operatorDefault = value }) }
            }
            if rank < order.firstIndex(of: .masterSwitch)! { variants.append(with(base) { $0.enabled.toggle() }) }
            if rank < order.firstIndex(of: .deliveryPull)! { variants.append(with(base) { $0.pull.toggle() }) }
            for variant in variants {
                #expect(variant.resolve() == outcome, "\(base) decided by \(outcome.step); \(variant) decided otherwise")
            }
            // The deciding rule's own input is what it says: unset, a later rule decides.
            if outcome.step == .typeChannel { #expect(with(base) { $0.typeChannel = nil }.resolve().step != .typeChannel) }
            if outcome.step == .channelSwitch { #expect(with(base) { $0.channelSwitch = nil }.resolve().step != .channelSwitch) }
            if outcome.step == .operatorDefault { #expect(with(base) { $0.operatorDefault = nil }.resolve().step == .sinkDefault) }
        }
    }

    func with(_ base: Case, _ change: (inout Case) -> Void) -> Case {
        var copy = base
        change(&copy)
        return copy
    }

    @Test func pushIsOneSettingSeenTwoWays() throws {
        var settings = UserSettings(types: ["comment": false])
        #expect(settings.choice(type: "comment", channel: "push") == false)
        #expect(settings.allPreferences["comment"]?["push"] == false)
        settings.setChoice(true, type: "comment", channel: "push")
        #expect(settings.types["comment"] == true && settings.preferences["comment"] == nil)
        settings.setChoice(false, type: "comment", channel: "chat")
        let text = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
        let back = try JSONDecoder().decode(UserSettings.self, from: Data(text.utf8))
        #expect(back == settings, "stored JSON reads back as written: \(text)")
    }

    @Test func criticalTypesAreLockedOnEveryChoosableChannel() {
        let preferences = ChannelPreferences(critical: ["violation", "alert"])
        #expect(
            preferences.locked(channels: ["push", "chat"]) == [
                LockedPreference(type: "alert", channel: "chat"), LockedPreference(type: "alert", channel: "push"),
                LockedPreference(type: "violation", channel: "chat"), LockedPreference(type: "violation", channel: "push"),
            ])
    }

    @Test func aPatchRefusesUnknownChannelsAndLockedPairsAndChangesNothing() throws {
        let types = try NotificationTypes()
        let preferences = ChannelPreferences(critical: ["alert"])
        var settings = UserSettings()
        func refusal(_ patch: SettingsPatch) -> String? {
            do {
                try patch.apply(to: &settings, types: types, channels: ["push", "chat"], preferences: preferences)
                return nil
            } catch let error as HeraldError {
                return "\(error.kind == .unprocessable ? 422 : error.kind == .badRequest ? 400 : 500) \(error.message)"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(SettingsPatch(channels: ["sms": false]))?.hasPrefix("422 'channels.sms'") == true)
        #expect(refusal(SettingsPatch(channels: ["in_app": false]))?.hasPrefix("422 'channels.in_app'") == true)
        #expect(refusal(SettingsPatch(preferences: ["comment": ["sms": true]]))?.hasPrefix("422 'preferences.comment.sms'") == true)
        #expect(refusal(SettingsPatch(preferences: ["nope": ["chat": true]]))?.hasPrefix("400") == true)
        #expect(refusal(SettingsPatch(preferences: ["alert": ["chat": false]]))?.hasPrefix("422 'preferences.alert.chat' is locked") == true)
        #expect(refusal(SettingsPatch(types: ["alert": false]))?.hasPrefix("422 'types.alert' is locked") == true)
        #expect(settings == UserSettings(), "a refused patch changes nothing")
        #expect(refusal(SettingsPatch(types: ["alert": true], channels: ["chat": false], preferences: ["comment": ["chat": true, "push": false]])) == nil)
        #expect(settings.types == ["alert": true, "comment": false] && settings.channels == ["chat": false])
        #expect(settings.preferences == ["comment": ["chat": true]])
    }
}
