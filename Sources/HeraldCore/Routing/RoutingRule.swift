import Foundation

/// An operator's routing rule: when a notification matches, sinks are added or removed.
///
/// Written as one line in configuration, conditions then `=>` then sink changes:
/// ```
/// type=violation => +webhook:moderation
/// type=hot,top distribution=information target=user_ids => -fcm +console
/// topic=sports- => +webhook:sports
/// ```
/// Conditions (all must hold): `type=` (comma-separated list), `distribution=`,
/// `target=` (`user_ids`, `topic`, `audience`, `broadcast`), `topic=` (a topic_key prefix).
public struct RoutingRule: Sendable, Equatable, CustomStringConvertible {
    /// `type=`: the types it matches, nil for every type.
    public var types: Set<String>?
    /// `distribution=`: nil for both.
    public var distribution: Distribution?
    /// `target=`: nil for every kind.
    public var targetKind: TargetKind?
    /// `topic=`: a prefix of the topic key, for topic targets only.
    public var topicPrefix: String?
    /// Sinks it adds (`+name`).
    public var add: [String]
    /// Sinks it removes (`-name`).
    public var remove: [String]

    /// A rule; conditions left nil match everything.
    public init(
        types: Set<String>? = nil, distribution: Distribution? = nil, targetKind: TargetKind? = nil,
        topicPrefix: String? = nil, add: [String] = [], remove: [String] = []
    ) {
        self.types = types
        self.distribution = distribution
        self.targetKind = targetKind
        self.topicPrefix = topicPrefix
        self.add = add
        self.remove = remove
    }

    /// The rule as one configuration line (``parse(_:)`` reads it back), for explanations.
    public var description: String {
        var conditions: [String] = []
        if let types { conditions.append("type=\(types.sorted().joined(separator: ","))") }
        if let distribution { conditions.append("distribution=\(distribution.rawValue)") }
        if let targetKind { conditions.append("target=\(targetKind.rawValue)") }
        if let topicPrefix { conditions.append("topic=\(topicPrefix)") }
        let changes = add.map { "+\($0)" } + remove.map { "-\($0)" }
        return (conditions + ["=>"] + changes).joined(separator: " ")
    }

    /// Whether every condition holds for `notification`.
    public func matches(_ notification: HeraldNotification) -> Bool {
        if let types, !types.contains(notification.type) { return false }
        if let distribution, distribution != notification.distribution { return false }
        if let targetKind, targetKind != notification.target.kind { return false }
        if let topicPrefix {
            guard case .topic(let key) = notification.target, key.hasPrefix(topicPrefix) else { return false }
        }
        return true
    }

    /// Parses one rule line; the error names the rule and what is wrong with it.
    public static func parse(_ line: String) throws -> RoutingRule {
        func fail(_ problem: String) -> HeraldError {
            HeraldError(.unprocessable, code: "invalid_config", "routing rule '\(line)': \(problem)")
        }
        let halves = line.components(separatedBy: "=>")
        guard halves.count == 2 else { throw fail("expected 'conditions => +sink -sink'") }
        var rule = RoutingRule()
        for condition in halves[0].split(whereSeparator: \.isWhitespace) {
            let parts = condition.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else { throw fail("condition '\(condition)' is not key=value") }
            switch parts[0] {
            case "type":
                rule.types = Set(parts[1].split(separator: ",").map(String.init))
            case "distribution":
                guard let value = Distribution(rawValue: parts[1]) else { throw fail("distribution must be alert or information") }
                rule.distribution = value
            case "target":
                guard let value = TargetKind(rawValue: parts[1]) else {
                    throw fail("target must be one of \(TargetKind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                rule.targetKind = value
            case "topic":
                rule.topicPrefix = parts[1]
            default:
                throw fail("unknown condition '\(parts[0])' (use type, distribution, target or topic)")
            }
        }
        for action in halves[1].split(whereSeparator: \.isWhitespace) {
            let name = String(action.dropFirst())
            guard !name.isEmpty else { throw fail("'\(action)' names no sink") }
            switch action.first {
            case "+": rule.add.append(name)
            case "-": rule.remove.append(name)
            default: throw fail("'\(action)' must start with + (add) or - (remove)")
            }
        }
        guard !rule.add.isEmpty || !rule.remove.isEmpty else { throw fail("changes no sink") }
        return rule
    }
}
