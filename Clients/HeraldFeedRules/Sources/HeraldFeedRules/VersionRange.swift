import Foundation

/// An npm-style semver range: comparators `< <= > >= =`, caret `^`, tilde `~`, x-ranges
/// (`1.x`, `1.2.*`), hyphen ranges (`1.2 - 2.3.4`), space = AND, `||` = OR.
///
/// A prerelease version satisfies a range only when one of the comparators of the matching
/// set names a prerelease of the same `MAJOR.MINOR.PATCH` (npm's rule): `>=1.2.3-beta` admits
/// `1.2.3-rc.1` but `^1.2.0` admits no prerelease at all.
public struct VersionRange: Sendable, Equatable, CustomStringConvertible {
    struct Comparator: Sendable, Equatable {
        enum Operator: String, Sendable {
            case less = "<"
            case lessOrEqual = "<="
            case greater = ">"
            case greaterOrEqual = ">="
            case equal = "="
        }
        var op: Operator
        var version: SemanticVersion

        func test(_ v: SemanticVersion) -> Bool {
            switch op {
            case .less: v < version
            case .lessOrEqual: v <= version
            case .greater: v > version
            case .greaterOrEqual: v >= version
            case .equal: v == version
            }
        }
    }

    /// OR of AND-sets.
    let sets: [[Comparator]]
    public let description: String

    /// - Throws: ``ParseError`` saying which part does not parse.
    public init(_ text: String) throws(ParseError) {
        description = text
        let alternatives = text.components(separatedBy: "||")
        var sets: [[Comparator]] = []
        for alternative in alternatives { sets.append(try Self.parseSet(alternative.trimmingCharacters(in: .whitespaces), whole: text)) }
        self.sets = sets
    }

    /// Whether `version` is in the range. A pre-release is, as npm reads ranges, only where a
    /// comparator of the same major, minor and patch names a pre-release itself.
    public func isSatisfied(by version: SemanticVersion) -> Bool {
        sets.contains { set in
            guard set.allSatisfy({ $0.test(version) }) else { return false }
            guard !version.prerelease.isEmpty else { return true }
            return set.contains { !$0.version.prerelease.isEmpty && $0.version.tuple == version.tuple && !$0.isSyntheticBound }
        }
    }

    /// A range that does not parse, and the part that does not.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The whole range as given.
        public var range: String
        /// The part of it that does not parse.
        public var part: String

        /// Says which part does not parse and which forms do.
        public var description: String {
            "'\(range)' is not a semver range ('\(part)' does not parse); use forms like >=2.1.0 <3, ^1.4, ~1.2.3, 1.x, 1.2 - 2.3.4"
        }
    }

    private static func invalid(_ whole: String, _ part: String) -> ParseError {
        ParseError(range: whole, part: part)
    }

    private static func parseSet(_ text: String, whole: String) throws(ParseError) -> [Comparator] {
        if text.isEmpty { return [Comparator(op: .greaterOrEqual, version: SemanticVersion(0, 0, 0))] }
        // Hyphen range: "A - B" (spaces required around the hyphen).
        let hyphen = text.components(separatedBy: " - ")
        if hyphen.count == 2 {
            let low = hyphen[0].trimmingCharacters(in: .whitespaces)
            let high = hyphen[1].trimmingCharacters(in: .whitespaces)
            guard let from = PartialVersion(low), let to = PartialVersion(high), !low.contains(" "), !high.contains(" ") else { throw invalid(whole, text) }
            return lowerBound(from, inclusive: true) + upperBound(to, inclusive: true)
        }
        guard hyphen.count == 1 else { throw invalid(whole, text) }
        // Tokens; an operator may stand apart from its version (">= 1.2.3").
        var tokens: [String] = []
        var pending = ""
        for word in text.split(whereSeparator: \.isWhitespace).map(String.init) {
            if ["<", "<=", ">", ">=", "=", "~", "^"].contains(word) {
                pending += word
            } else {
                tokens.append(pending + word)
                pending = ""
            }
        }
        guard pending.isEmpty else { throw invalid(whole, pending) }
        var comparators: [Comparator] = []
        for token in tokens { comparators += try parseComparator(token, whole: whole) }
        return comparators
    }

    private static func parseComparator(_ token: String, whole: String) throws(ParseError) -> [Comparator] {
        for prefix in [">=", "<=", ">", "<", "=", "~>", "~", "^"] where token.hasPrefix(prefix) {
            let rest = String(token.dropFirst(prefix.count))
            guard let p = PartialVersion(rest) else { throw invalid(whole, token) }
            switch prefix {
            case ">=": return lowerBound(p, inclusive: true)
            case ">": return lowerBound(p, inclusive: false)
            case "<=": return upperBound(p, inclusive: true)
            case "<": return upperBound(p, inclusive: false)
            case "=": return xRange(p)
            case "~", "~>": return tilde(p)
            default: return caret(p)
            }
        }
        guard let p = PartialVersion(token) else { throw invalid(whole, token) }
        return xRange(p)
    }

    // MARK: Desugaring, as npm does it. `-0` upper bounds keep the next version's prereleases out.

    private static func version(_ major: Int, _ minor: Int, _ patch: Int, pre: [SemanticVersion.Identifier] = []) -> SemanticVersion {
        SemanticVersion(major, minor, patch, prerelease: pre)
    }

    private static let zero: [SemanticVersion.Identifier] = [.numeric(0)]
    private static let any = [Comparator(op: .greaterOrEqual, version: SemanticVersion(0, 0, 0))]

    private static func xRange(_ p: PartialVersion) -> [Comparator] {
        guard let major = p.major else { return any }
        guard let minor = p.minor else {
            return [Comparator(op: .greaterOrEqual, version: version(major, 0, 0)), Comparator(op: .less, version: version(major + 1, 0, 0, pre: zero))]
        }
        guard let patch = p.patch else {
            return [
                Comparator(op: .greaterOrEqual, version: version(major, minor, 0)), Comparator(op: .less, version: version(major, minor + 1, 0, pre: zero)),
            ]
        }
        return [Comparator(op: .equal, version: version(major, minor, patch, pre: p.prerelease))]
    }

    private static func lowerBound(_ p: PartialVersion, inclusive: Bool) -> [Comparator] {
        guard let major = p.major else { return inclusive ? any : [Comparator(op: .less, version: version(0, 0, 0, pre: zero))] }
        if inclusive {
            return [Comparator(op: .greaterOrEqual, version: version(major, p.minor ?? 0, p.patch ?? 0, pre: p.prerelease))]
        }
        // ">1" means above every 1.x.x: at least 2.0.0.
        guard let minor = p.minor else { return [Comparator(op: .greaterOrEqual, version: version(major + 1, 0, 0))] }
        guard let patch = p.patch else { return [Comparator(op: .greaterOrEqual, version: version(major, minor + 1, 0))] }
        return [Comparator(op: .greater, version: version(major, minor, patch, pre: p.prerelease))]
    }

    private static func upperBound(_ p: PartialVersion, inclusive: Bool) -> [Comparator] {
        guard let major = p.major else { return inclusive ? any : [Comparator(op: .less, version: version(0, 0, 0, pre: zero))] }
        if !inclusive {
            return [Comparator(op: .less, version: version(major, p.minor ?? 0, p.patch ?? 0, pre: p.patch == nil ? zero : p.prerelease))]
        }
        // "<=1.2" means up to every 1.2.x.
        guard let minor = p.minor else { return [Comparator(op: .less, version: version(major + 1, 0, 0, pre: zero))] }
        guard let patch = p.patch else { return [Comparator(op: .less, version: version(major, minor + 1, 0, pre: zero))] }
        return [Comparator(op: .lessOrEqual, version: version(major, minor, patch, pre: p.prerelease))]
    }

    private static func tilde(_ p: PartialVersion) -> [Comparator] {
        guard let major = p.major else { return any }
        guard let minor = p.minor else { return xRange(p) }
        return [
            Comparator(op: .greaterOrEqual, version: version(major, minor, p.patch ?? 0, pre: p.prerelease)),
            Comparator(op: .less, version: version(major, minor + 1, 0, pre: zero)),
        ]
    }

    private static func caret(_ p: PartialVersion) -> [Comparator] {
        guard let major = p.major else { return any }
        let low = Comparator(op: .greaterOrEqual, version: version(major, p.minor ?? 0, p.patch ?? 0, pre: p.prerelease))
        let high: SemanticVersion
        if major > 0 || p.minor == nil {
            high = version(major + 1, 0, 0, pre: zero)
        } else if let minor = p.minor, minor > 0 || p.patch == nil {
            high = version(0, minor + 1, 0, pre: zero)
        } else {
            high = version(0, 0, (p.patch ?? 0) + 1, pre: zero)
        }
        return [low, Comparator(op: .less, version: high)]
    }
}

extension VersionRange.Comparator {
    /// The `-0` bounds the desugaring adds do not admit prereleases of their own version.
    var isSyntheticBound: Bool { op == .less && version.prerelease == [.numeric(0)] }
}
