import HeraldCore
import Testing

@Suite struct VersionRangeTests {
    /// (range, version, satisfied) — npm's answers.
    static let table: [(String, String, Bool)] = [
        // Comparators
        (">=2.1.0 <3", "2.1.0", true), (">=2.1.0 <3", "2.9.9", true), (">=2.1.0 <3", "3.0.0", false), (">=2.1.0 <3", "2.0.9", false),
        ("=1.0.0", "1.0.0", true), ("=1.0.0", "1.0.1", false), ("1.0.0", "1.0.0", true), ("v1.0.0", "1.0.0", true),
        (">1.2.3", "1.2.4", true), (">1.2.3", "1.2.3", false), ("<1.2.3", "1.2.2", true), ("<1.2.3", "1.2.3", false),
        ("<=1.2.3", "1.2.3", true), ("<=1.2.3", "1.2.4", false), (">= 1.2.3", "1.2.3", true), ("> 1.2.3 < 1.3", "1.2.9", true),
        (">1", "1.9.9", false), (">1", "2.0.0", true), (">1.2", "1.2.9", false), (">1.2", "1.3.0", true),
        ("<1.2", "1.1.9", true), ("<1.2", "1.2.0", false), ("<=1.2", "1.2.9", true), ("<=1.2", "1.3.0", false), ("<=1", "1.9.9", true),
        // Caret
        ("^1.4", "1.4.0", true), ("^1.4", "1.9.0", true), ("^1.4", "2.0.0", false), ("^1.4", "1.3.9", false),
        ("^1.2.3", "1.2.3", true), ("^1.2.3", "1.99.0", true), ("^1.2.3", "2.0.0", false),
        ("^0.2.3", "0.2.9", true), ("^0.2.3", "0.3.0", false), ("^0.0.3", "0.0.3", true), ("^0.0.3", "0.0.4", false),
        ("^0.0", "0.0.9", true), ("^0.0", "0.1.0", false), ("^0.x", "0.9.9", true), ("^0.x", "1.0.0", false), ("^1.2.x", "1.9.0", true),
        // Tilde
        ("~1.2.3", "1.2.3", true), ("~1.2.3", "1.2.9", true), ("~1.2.3", "1.3.0", false), ("~1.2.3", "1.2.2", false),
        ("~1.2", "1.2.0", true), ("~1.2", "1.3.0", false), ("~1", "1.9.9", true), ("~1", "2.0.0", false), ("~0.2.3", "0.2.5", true),
        // X-ranges
        ("1.x", "1.0.0", true), ("1.x", "1.99.99", true), ("1.x", "2.0.0", false), ("1.2.*", "1.2.7", true), ("1.2.*", "1.3.0", false),
        ("*", "9.9.9", true), ("", "0.0.1", true), ("x", "3.0.0", true), ("1", "1.5.0", true), ("1.2", "1.2.5", true), ("1.2", "1.3.0", false),
        // Hyphen ranges
        ("1.2 - 2.3.4", "1.2.0", true), ("1.2 - 2.3.4", "2.3.4", true), ("1.2 - 2.3.4", "2.3.5", false), ("1.2 - 2.3.4", "1.1.9", false),
        ("1.2.3 - 2.3", "2.3.9", true), ("1.2.3 - 2.3", "2.4.0", false), ("1.2.3 - 2", "2.9.9", true), ("1.2.3 - 2", "3.0.0", false),
        // OR
        (">=1.0.0 || <0.9", "0.8.0", true), (">=1.0.0 || <0.9", "0.9.5", false), (">=1.0.0 || <0.9", "1.2.0", true),
        ("^1.0 || ^3.0", "2.5.0", false), ("^1.0 || ^3.0", "3.1.0", true), ("1.x || >=2.5.0 || 5.0.0 - 7.2.3", "6.0.0", true),
        // Pre-releases: only admitted when a comparator names a prerelease of the same tuple
        ("^1.2.0", "1.3.0-beta", false), (">=1.2.3-beta", "1.2.3-rc.1", true), (">=1.2.3-beta", "1.2.4-rc.1", false),
        (">=1.2.3-beta", "1.2.3", true), (">=1.2.3-beta.2", "1.2.3-beta.10", true), (">=1.2.3-beta.2", "1.2.3-beta.1", false),
        ("<1.2.3", "1.2.3-beta", false), ("<2.0.0", "2.0.0-alpha", false), ("^2.0.0-rc.1", "2.0.0-rc.2", true), ("^2.0.0-rc.1", "2.0.0", true),
        ("^2.0.0-rc.1", "2.1.0-rc.1", false), ("1.2.3-alpha", "1.2.3-alpha", true), ("1.2.3-alpha", "1.2.3", false),
        ("~1.2.3-alpha.1", "1.2.3-alpha.2", true), (">=1.0.0-alpha <1.0.0", "1.0.0-alpha.beta", true), (">1.0.0-alpha.1", "1.0.0-alpha.beta", true),
    ]

    @Test(arguments: 0..<table.count)
    func npmAnswers(_ index: Int) throws {
        let (range, text, expected) = Self.table[index]
        let version = try #require(SemanticVersion(text))
        #expect(try VersionRange(range).isSatisfied(by: version) == expected, "\(range) with \(text)")
    }

    @Test func tableIsLargeEnough() {
        #expect(Self.table.count >= 60)
        #expect(Self.table.contains { $0.0.contains("||") })
        #expect(Self.table.contains { $0.1.contains("-") })
    }

    @Test(arguments: ["1.2.3.4", ">=", "abc", ">=1.2.3 <", "1.x.3", "^a.b", "01.2.3", "1.2.3-", "1.2.3-be$ta", "~>", "1 - ", "- 2", ">1.2.3 - 2"])
    func refusesWhatDoesNotParse(_ text: String) {
        #expect(throws: HeraldError.self) { try VersionRange(text) }
    }

    /// A range's upper bound is the next number, so a component of Int.max trapped the process
    /// (`9223372036854775807.x` from a feed message or a broadcast). Components stop at npm's
    /// 2^53 - 1; at that number every form still works.
    @Test(arguments: ["9223372036854775807.x", "^9223372036854775807", "~1.9223372036854775807", "1.2.9223372036854775807 - 2", "9007199254740992"])
    func refusesComponentsPastTheLargestNumber(_ text: String) {
        #expect(throws: HeraldError.self) { try VersionRange(text) }
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

    @Test func appVersionsAreCoerced() {
        #expect(SemanticVersion(coercing: "2") == SemanticVersion(2, 0, 0))
        #expect(SemanticVersion(coercing: "2.1") == SemanticVersion(2, 1, 0))
        #expect(SemanticVersion(coercing: "v2.1.3") == SemanticVersion(2, 1, 3))
        #expect(SemanticVersion(coercing: "two") == nil)
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
