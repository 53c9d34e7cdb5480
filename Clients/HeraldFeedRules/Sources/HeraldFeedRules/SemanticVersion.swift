/// A semantic version (semver 2.0.0): `MAJOR.MINOR.PATCH[-prerelease][+build]`.
public struct SemanticVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// A prerelease identifier: numeric ones compare as numbers and sort before alphanumeric ones.
    public enum Identifier: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// Digits only, compared as a number.
        case numeric(Int)
        /// Anything else, compared as ASCII text, after every numeric one.
        case alphanumeric(String)

        init?(_ text: Substring) {
            guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else { return nil }
            if text.allSatisfy(\.isNumber) {
                guard text == "0" || !text.hasPrefix("0"), let value = Int(text) else { return nil }
                self = .numeric(value)
            } else {
                self = .alphanumeric(String(text))
            }
        }

        public static func < (lhs: Identifier, rhs: Identifier) -> Bool {
            switch (lhs, rhs) {
            case (.numeric(let a), .numeric(let b)): a < b
            case (.numeric, .alphanumeric): true
            case (.alphanumeric, .numeric): false
            case (.alphanumeric(let a), .alphanumeric(let b)): a < b
            }
        }

        public var description: String {
            switch self {
            case .numeric(let value): String(value)
            case .alphanumeric(let value): value
            }
        }
    }

    /// The major number.
    public var major: Int
    /// The minor number.
    public var minor: Int
    /// The patch number.
    public var patch: Int
    /// The pre-release identifiers (`1.2.0-beta.2`: `beta`, `2`); empty for a release.
    public var prerelease: [Identifier]

    /// The largest major, minor or patch number read (npm's too: 2^53 - 1). A range's upper
    /// bound is the next number (`1.x` is `>=1.0.0 <2.0.0-0`), which for Int.max would trap.
    public static let maxComponent = 9_007_199_254_740_991

    /// A version from its parts.
    public init(_ major: Int, _ minor: Int, _ patch: Int, prerelease: [Identifier] = []) {
        self.major = major
        self.minor = minor
        self.patch = patch
        self.prerelease = prerelease
    }

    /// Parses a full version; a leading `v` or `=` is allowed, build metadata is ignored.
    public init?(_ text: String) {
        guard let partial = PartialVersion(text), let major = partial.major, let minor = partial.minor, let patch = partial.patch else { return nil }
        self.init(major, minor, patch, prerelease: partial.prerelease)
    }

    /// Parses what apps report, completing missing parts with 0: `2` is 2.0.0, `2.1` is 2.1.0.
    public init?(coercing text: String) {
        guard let partial = PartialVersion(text), let major = partial.major, partial.minor != nil || partial.patch == nil else { return nil }
        self.init(major, partial.minor ?? 0, partial.patch ?? 0, prerelease: partial.prerelease)
    }

    /// Major, minor and patch, for comparing releases.
    public var tuple: [Int] { [major, minor, patch] }

    public static func < (lhs: SemanticVersion, rhs: SemanticVersion) -> Bool {
        if lhs.tuple != rhs.tuple { return lhs.tuple.lexicographicallyPrecedes(rhs.tuple) }
        // A prerelease sorts before its release; otherwise identifiers compare left to right.
        switch (lhs.prerelease.isEmpty, rhs.prerelease.isEmpty) {
        case (true, true), (true, false): return false
        case (false, true): return true
        case (false, false): return lhs.prerelease.lexicographicallyPrecedes(rhs.prerelease)
        }
    }

    public var description: String {
        "\(major).\(minor).\(patch)" + (prerelease.isEmpty ? "" : "-" + prerelease.map(\.description).joined(separator: "."))
    }
}

/// `1`, `1.2`, `1.x`, `1.2.*`, `1.2.3-beta.1`: missing or wildcard parts are nil.
struct PartialVersion {
    var major: Int?
    var minor: Int?
    var patch: Int?
    var prerelease: [SemanticVersion.Identifier] = []

    init?(_ raw: String) {
        var text = Substring(raw)
        while let first = text.first, first == "v" || first == "V" || first == "=" { text = text.dropFirst() }
        guard !text.isEmpty else { return nil }
        if let plus = text.firstIndex(of: "+") { text = text[..<plus] }
        var core = text
        var prereleaseText: Substring?
        if let dash = text.firstIndex(of: "-") {
            core = text[..<dash]
            prereleaseText = text[text.index(after: dash)...]
        }
        let parts = core.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count) else { return nil }
        var numbers: [Int?] = []
        var wildcard = false
        for part in parts {
            if part == "x" || part == "X" || part == "*" {
                wildcard = true
                numbers.append(nil)
            } else {
                // A number after a wildcard (1.x.3) is not a version.
                guard !wildcard, !part.isEmpty, part.allSatisfy(\.isNumber), part == "0" || !part.hasPrefix("0"), let value = Int(part),
                    value <= SemanticVersion.maxComponent
                else { return nil }
                numbers.append(value)
            }
        }
        while numbers.count < 3 { numbers.append(nil) }
        major = numbers[0]
        minor = numbers[1]
        patch = numbers[2]
        if let prereleaseText {
            guard patch != nil else { return nil }
            let identifiers = prereleaseText.split(separator: ".", omittingEmptySubsequences: false).map(SemanticVersion.Identifier.init)
            guard !identifiers.isEmpty, identifiers.allSatisfy({ $0 != nil }) else { return nil }
            prerelease = identifiers.compactMap { $0 }
        }
    }
}
