import HeraldCore
import Testing

@Suite struct FailureReasonTests {
    @Test func shortReasonsWithoutNULAreKeptAsTheyAre() {
        for text in ["", "FCM 503 UNAVAILABLE: try later", String(repeating: "x", count: FailureReason.maxBytes)] {
            #expect(FailureReason.storable(text) == text)
        }
    }

    @Test func nulBecomesTheReplacementCharacterEvenInsideACluster() {
        #expect(FailureReason.storable("a\u{0}b") == "a\u{FFFD}b")
        // U+0000 followed by a combining accent is one Character with it.
        #expect(!FailureReason.storable("a\u{0}\u{301}b").unicodeScalars.contains("\u{0}"))
    }

    @Test func longReasonsAreCutAtACharacterWithAnEllipsis() {
        for piece in ["x", "é", "👩‍👩‍👧", "e\u{301}"] {
            let text = String(repeating: piece, count: FailureReason.maxBytes + 1)
            let cut = FailureReason.storable(text)
            #expect(cut.utf8.count <= FailureReason.maxBytes && cut.utf8.count > FailureReason.maxBytes - 32, "\(piece): \(cut.utf8.count)")
            #expect(cut.hasSuffix("…") && text.hasPrefix(cut.dropLast()), "\(piece)")
        }
        // NUL replaced, then cut: U+FFFD is longer than the byte it replaces.
        let nuls = FailureReason.storable(String(repeating: "\u{0}", count: FailureReason.maxBytes))
        #expect(nuls.utf8.count <= FailureReason.maxBytes && nuls.hasSuffix("…") && !nuls.unicodeScalars.contains("\u{0}"))
    }
}
