public import Foundation

/// Users' channel preferences as a routing policy (docs/routing.md, "Channels and
/// preferences"): for every user-facing sink but history, ``ChannelPreferences/resolve(type:channel:settings:forced:)``
/// decides, and a critical type is required (it beats any other policy's opt-out).
public struct PreferencePolicy: RoutingPolicy {
    /// `preferences`, in explanations.
    public let name = "preferences"
    /// The operator's defaults and critical types.
    public let preferences: ChannelPreferences

    /// The policy over the operator's `preferences`.
    public init(_ preferences: ChannelPreferences = ChannelPreferences()) {
        self.preferences = preferences
    }

    /// The resolution's outcome for the sink's channel, as a verdict; nil for a sink users do
    /// not choose (an operator's own, history).
    public func verdict(on sink: NotificationRouter.Sink, for notification: HeraldNotification, recipient: RecipientContext, at now: Date) -> RoutingVerdict? {
        guard sink.channel.isChoosable else { return nil }
        let outcome = preferences.resolve(
            type: notification.type, channel: sink.channel, settings: recipient.settings, forced: recipient.subjectLevel == .forced)
        let step = outcome.step.rawValue
        let source = outcome.source.rawValue
        // Literal reasons where they can be: this runs for every recipient and sink of an accept.
        switch outcome.step {
        case .critical:
            return .required(
                because: recipient.subjectLevel == .forced && !preferences.critical.contains(notification.type)
                    ? "a Forced subject's messages are critical on push" : "the operator made this type critical", step: step, source: source)
        case .sinkDefault:
            return .included(because: "chosen for this notification, and nobody set otherwise", step: step, source: source)
        case .notUserFacing, .inApp:
            return nil
        case .masterSwitch:
            return .excluded(because: "the user turned notifications off", step: step, source: source)
        case .deliveryPull:
            return .excluded(because: "the user pulls from history instead of push", step: step, source: source)
        case .typeChannel:
            return outcome.delivers
                ? .included(because: "the user turned this type on for this channel", step: step, source: source)
                : .excluded(because: "the user turned this type off for this channel", step: step, source: source)
        case .channelSwitch:
            return outcome.delivers
                ? .included(because: "the user turned this channel on", step: step, source: source)
                : .excluded(because: "the user turned this channel off", step: step, source: source)
        case .operatorDefault:
            return outcome.delivers
                ? .included(because: "the operator's default turns this type on for this channel", step: step, source: source)
                : .excluded(because: "the operator's default turns this type off for this channel", step: step, source: source)
        }
    }
}
