import Foundation
import Testing

@testable import HeraldCore

/// The hand-written JSON must be JSON: whatever the text, a standard parser reads back exactly
/// what was written.
@Suite struct JSONWriterTests {
    static let alphabet: [String] = [
        "a", "Z", "0", " ", "\u{0}", "\u{1}", "\u{1f}", "\u{7f}", "\"", "\\", "/", "\n", "\r", "\t", "é", "🙂", "\u{2028}", "{", "]", ":", ",",
    ]

    static func text(_ generator: inout some RandomNumberGenerator) -> String {
        (0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" }.joined()
    }

    @Test func anyStringsRoundTripThroughJSONDecoder() throws {
        struct Document: Decodable, Equatable {
            var map: [String: String]
            var list: [String]
            var count: Int
            var flag: Bool
            var nested: [String: [String: String]]
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var map: [String: String] = [:]
            for _ in 0..<Int.random(in: 0...6, using: &generator) { map[Self.text(&generator)] = Self.text(&generator) }
            let list = (0..<Int.random(in: 0...4, using: &generator)).map { _ in Self.text(&generator) }
            let count = Int.random(in: Int.min...Int.max, using: &generator)
            let flag = Bool.random(using: &generator)
            let inner = Self.text(&generator)
            var writer = JSONWriter()
            writer.object { document in
                document.key("map")
                document.stringMap(map)
                document.key("list")
                document.stringArray(list)
                document.key("count")
                document.integer(count)
                document.key("flag")
                document.bool(flag)
                document.key("nested")
                document.object { nested in
                    nested.key("inner")
                    nested.object { $0.member("value", inner) }
                    nested.key("empty")
                    nested.object { $0.member("absent", ifPresent: nil) }
                }
            }
            let decoded = try JSONDecoder().decode(Document.self, from: Data(writer.bytes))
            #expect(decoded == Document(map: map, list: list, count: count, flag: flag, nested: ["inner": ["value": inner], "empty": [:]]), "\(writer.text)")
        }
    }

    @Test func controlCharactersAreEscapedAndTheRestIsWrittenAsIs() {
        var writer = JSONWriter()
        writer.string("a\"b\\c\n\u{1}/é")
        #expect(writer.text == #""a\"b\\c\n\u0001/é""#)
        var map = JSONWriter()
        map.stringMap(["b": "2", "a": "1"])
        #expect(map.text == #"{"a":"1","b":"2"}"#, "sorted keys: equal maps give equal text")
    }

    /// A card pull writes its pool in the order asked for and copies stored metadata as it is:
    /// members keep their order, raw values land between the right commas, and keys that need
    /// escaping are escaped.
    @Test func membersKeepTheirOrderAndRawValuesAreCopied() throws {
        var writer = JSONWriter()
        writer.object { body in
            body.key("z")
            body.raw("1.5")
            body.key("a")
            body.raw(Array(#"{"title":"Card"}"#.utf8))
            body.key(#"quote " and back \ slash"#)
            body.array { list in
                list.raw("2")
                list.raw("[]")
                list.string("x")
            }
            body.key("é\n")
            body.object { _ in }
        }
        #expect(writer.text.hasPrefix(#"{"z":1.5,"a":{"title":"Card"},"#), "\(writer.text)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [String: Any], "\(writer.text)")
        #expect((parsed["a"] as? [String: Any])?["title"] as? String == "Card")
        #expect((parsed[#"quote " and back \ slash"#] as? [Any])?.count == 3)
        #expect((parsed["é\n"] as? [String: Any])?.isEmpty == true)
    }
}
