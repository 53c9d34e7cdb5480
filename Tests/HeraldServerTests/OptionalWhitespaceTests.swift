import HeraldHTTP
import Testing

@testable import HeraldServer

/// Field values lose the spaces and tabs around them, and nothing else.
@Suite struct OptionalWhitespaceTests {
    @Test func trimsSpacesAndTabsAtBothEndsOnly() {
        let cases: [(String, String)] = [
            ("", ""), (" ", ""), ("\t \t", ""), ("hk_abc", "hk_abc"), ("  hk_abc\t", "hk_abc"), ("\thk a b\t ", "hk a b"),
            ("x\u{A0}", "x\u{A0}"), ("\r\nx", "\r\nx"), (" 😀 ", "😀"), (" e\u{301} ", "e\u{301}"),
        ]
        for (text, trimmed) in cases {
            #expect(String(text.trimmingOptionalWhitespace) == trimmed, "\(text.debugDescription)")
            #expect(String(text[...].trimmingOptionalWhitespace) == trimmed, "as a substring: \(text.debugDescription)")
        }
    }
}
