import HeraldCore
import HeraldFeedRuleVectors
import HeraldFeedRules
import Testing

/// npm's answers, from the vectors HeraldKit's tests check too (Clients/HeraldFeedRules).
@Suite struct VersionRangeTests {
    static let vectors: FeedRuleVectors? = try? FeedRuleVectors.load()

    @Test func npmAnswers() throws {
        let vectors = try #require(Self.vectors)
        #expect(vectors.ranges.count >= 60)
        #expect(vectors.ranges.contains { $0.range.contains("||") })
        #expect(vectors.ranges.contains { $0.version.contains("-") })
        for vector in vectors.ranges {
            let version = try #require(SemanticVersion(vector.version))
            #expect(try VersionRange(vector.range).isSatisfied(by: version) == vector.satisfied, "\(vector.range) with \(vector.version)")
        }
    }

    /// Includes components past npm's 2^53 - 1: a range's upper bound is the next number, so a
    /// component of Int.max trapped the process (`9223372036854775807.x` from a feed message or
    /// a broadcast).
    @Test func refusesWhatDoesNotParse() throws {
        let vectors = try #require(Self.vectors)
        #expect(!vectors.invalidRanges.isEmpty)
        for text in vectors.invalidRanges {
            #expect(throws: VersionRange.ParseError.self, "\(text)") { try VersionRange(text) }
        }
    }

    @Test func appVersionsAreCoerced() throws {
        let vectors = try #require(Self.vectors)
        for vector in vectors.coercedVersions {
            #expect(SemanticVersion(coercing: vector.text) == vector.version.flatMap { SemanticVersion($0) }, "\(vector.text)")
        }
    }

    @Test func theLargestNumberWorksInEveryForm() throws {
        let top = SemanticVersion.maxComponent
        let version = try #require(SemanticVersion("\(top).\(top).\(top)"))
        for range in ["\(top).x", "^\(top)", "~\(top).\(top)", "\(top).\(top).x", ">=\(top).0.0", "^0.\(top)", "^0.0.\(top)"] {
            let satisfied = try VersionRange(range).isSatisfied(by: version)
            #expect(satisfied == !range.hasPrefix("^0."), "\(range)")
        }
    }

    @Test func precedenceFollowsSemver2() throws {
        let ordered = [
            "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0",
        ]
        let versions = try ordered.map { try #require(SemanticVersion($0)) }
        #expect(versions == versions.sorted())
        for (a, b) in zip(versions, versions.dropFirst()) { #expect(a < b, "\(a) < \(b)") }
        #expect(SemanticVersion("1.0.0+build.5") == SemanticVersion("1.0.0"))
    }
}

/// Properties checked on seeded random versions, beside the table of known answers.
@Suite struct VersionRangePropertyTests {
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state
        }
    }

    static func randomVersion(_ rng: inout SeededGenerator) -> SemanticVersion {
        let pre: [SemanticVersion.Identifier] =
            Int.random(in: 0..<4, using: &rng) == 0
            ? [
                Bool.random(using: &rng)
                    ? .alphanumeric(["alpha", "beta", "rc"].randomElement(using: &rng) ?? "rc") : .numeric(Int.random(in: 0...3, using: &rng))
            ]
            : []
        return SemanticVersion(Int.random(in: 0...3, using: &rng), Int.random(in: 0...3, using: &rng), Int.random(in: 0...3, using: &rng), prerelease: pre)
    }

    @Test func caretAndTildeEqualTheirComparatorForms() throws {
        var rng = SeededGenerator(state: 42)
        for _ in 0..<300 {
            let base = Self.randomVersion(&rng)
            let probe = Self.randomVersion(&rng)
            let b = SemanticVersion(base.major, base.minor, base.patch)
            let caretHigh = b.major > 0 ? "\(b.major + 1).0.0-0" : b.minor > 0 ? "0.\(b.minor + 1).0-0" : "0.0.\(b.patch + 1)-0"
            #expect(try VersionRange("^\(b)").isSatisfied(by: probe) == VersionRange(">=\(b) <\(caretHigh)").isSatisfied(by: probe), "^\(b) vs \(probe)")
            #expect(
                try VersionRange("~\(b)").isSatisfied(by: probe) == VersionRange(">=\(b) <\(b.major).\(b.minor + 1).0-0").isSatisfied(by: probe),
                "~\(b) vs \(probe)")
            #expect(try VersionRange("\(b.major).\(b.minor).x").isSatisfied(by: probe) == VersionRange("~\(b.major).\(b.minor).0").isSatisfied(by: probe))
            // OR is union, space is intersection.
            let r1 = try VersionRange(">=\(b)")
            let r2 = try VersionRange("<\(base)")
            #expect(try VersionRange(">=\(b) || <\(base)").isSatisfied(by: probe) == (r1.isSatisfied(by: probe) || r2.isSatisfied(by: probe)))
            #expect(try VersionRange("=\(probe)").isSatisfied(by: probe), "a version satisfies itself exactly")
        }
    }

    @Test func precedenceIsATotalOrder() {
        var rng = SeededGenerator(state: 7)
        let versions = (0..<200).map { _ in Self.randomVersion(&rng) }
        for a in versions.prefix(60) {
            for b in versions.prefix(60) {
                #expect([a < b, b < a, a == b].filter { $0 }.count == 1, "exactly one of <, >, = for \(a), \(b)")
                if a < b, let c = versions.first(where: { b < $0 }) { #expect(a < c, "transitive") }
            }
        }
    }
}
