public import Foundation
import Mustache

/// Why a planned delivery may not go out at once but be folded into a digest (docs/timing.md):
/// a frequency cap, a sender's `digest_key`, or quiet hours that hold. Deliveries with a mark
/// are stored `held`; the digest worker counts each notification once per user and key, lets
/// the first ``max`` of a window through, and folds the rest into one push at the window's end.
public struct FoldMark: Sendable, Hashable {
    /// What is counted together, per user: `cap:<rule>`, `key:<digest_key>` or `quiet_hours`.
    public var key: String
    /// Notifications let through per window before the rest fold (0: every one folds).
    public var max: Int
    /// How long a window lasts from its first notification, in whole seconds; nil when it
    /// ends at ``until``.
    public var seconds: Int64?
    /// When the window ends, for one with a fixed end (quiet hours' close).
    public var until: Date?

    /// A mark.
    public init(key: String, max: Int, seconds: Int64? = nil, until: Date? = nil) {
        self.key = key
        self.max = max
        self.seconds = seconds
        self.until = until
    }

    /// When a window opened at `now` ends.
    public func windowEnd(openedAt now: Date) -> Date {
        if let until { return Swift.max(until, now) }
        return now.addingTimeInterval(TimeInterval(seconds ?? 0))
    }

    /// As stored on the delivery: `max|seconds|until-microseconds|key`.
    public var stored: String {
        "\(max)|\(seconds.map(String.init) ?? "")|\(until.map { String(Timestamp.microseconds($0)) } ?? "")|\(key)"
    }

    /// Reads ``stored``; nil for text that is not one.
    public init?(stored text: String) {
        let parts = text.split(separator: "|", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let max = Int(parts[0]), max >= 0 else { return nil }
        self.max = max
        seconds = parts[1].isEmpty ? nil : Int64(parts[1])
        until = parts[2].isEmpty ? nil : Int64(parts[2]).map { Timestamp.date(microseconds: $0) }
        guard seconds != nil || until != nil else { return nil }
        key = String(parts[3])
    }

    /// The key of a sender's `digest_key`.
    public static func digestKey(_ key: String) -> String { "key:" + key }
    /// The key of quiet hours that hold.
    public static let quietHoursKey = "quiet_hours"
}

/// A `caps` rule (docs/timing.md): at most ``max`` notifications of ``types`` per user on
/// ``channel`` every ``seconds``; past that they fold into a digest, delivered when the window
/// ends with ``title`` and ``body`` rendered from the folded items.
public struct FrequencyCap: Sendable, Equatable {
    /// The rule's name: what users' counters are kept under (`cap:<name>`).
    public var name: String
    /// Types counted.
    public var types: Set<String>
    /// The channel capped (`push`).
    public var channel: String
    /// Notifications per window.
    public var max: Int
    /// The window, in seconds.
    public var seconds: Int64
    /// The digest's type; nil for the first folded item's.
    public var digestType: String?
    /// The digest's title template (`{{count}}`, `{{first_title}}`, `{{types}}`).
    public var title: String
    /// The digest's body template.
    public var body: String

    /// The default digest title.
    public static let defaultTitle = "{{count}} new notifications"
    /// The default digest body.
    public static let defaultBody = "{{first_title}}"

    /// A rule as configured.
    public init(
        name: String, types: Set<String>, channel: String = "push", max: Int, seconds: Int64, digestType: String? = nil,
        title: String = FrequencyCap.defaultTitle, body: String = FrequencyCap.defaultBody
    ) {
        self.name = name
        self.types = types
        self.channel = channel
        self.max = max
        self.seconds = seconds
        self.digestType = digestType
        self.title = title
        self.body = body
    }

    /// Its mark.
    public var mark: FoldMark { FoldMark(key: "cap:" + name, max: max, seconds: seconds) }

    /// - Throws: a configuration error naming `field` (`caps[0]`) when a template does not parse.
    public func checkTemplates(field: String) throws {
        for (name, text) in [("title", title), ("body", body)] {
            do {
                _ = try DigestComposer.template(text)
            } catch {
                throw HeraldError(.unprocessable, code: "invalid_config", "\(field).\(name) is not a Mustache template: \(error)")
            }
        }
    }
}

/// What folds, for the router: the operator's `caps` and the types never capped or held.
public struct Folding: Sendable, Equatable {
    /// The `caps` rules, in configuration order (the first matching a delivery counts it).
    public var caps: [FrequencyCap]
    /// Types never capped or held (`preferences.critical`).
    public var critical: Set<String>

    /// Folding as configured; none by default.
    public init(caps: [FrequencyCap] = [], critical: Set<String> = []) {
        self.caps = caps
        self.critical = critical
    }

    /// The rule a digest with `key` was folded under, for its templates; nil for a
    /// `digest_key` or quiet hours, which use the defaults.
    public func rule(forKey key: String) -> FrequencyCap? {
        caps.first { $0.mark.key == key }
    }
}
