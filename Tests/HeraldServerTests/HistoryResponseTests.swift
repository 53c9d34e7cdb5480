import Foundation
import HeraldCore
import HeraldHTTP
import Testing

@testable import HeraldServer

/// A history page is written directly rather than through `JSONEncoder`; apps parse it, so it
/// must say exactly what the encoder said: the same bytes for ordinary text, the same values
/// for every control character (which the two may escape differently).
struct HistoryResponseTests {
    static func item(_ title: String, body: String = "b", url: String? = nil, read: Bool = false) -> HistoryItem {
        HistoryItem(
            notificationID: ObjectIDGenerator().next(), title: title, body: body, type: "comment", url: url,
            timestamp: Date(timeIntervalSince1970: 1_795_000_000.123456), read: read)
    }

    @Test(arguments: TimestampStyle.allCases)
    func aPageIsWrittenAsTheEncoderWroteIt(_ style: TimestampStyle) throws {
        let pages = [
            HistoryPage(items: [], next: nil),
            HistoryPage(
                items: [
                    Self.item("Hello", url: "https://app.example/p/1?x=a&y=b"), Self.item(#"a "quoted" \ title"#, body: "line\nnext\ttab\rreturn", read: true),
                    Self.item("émoji 😀 / slash </script>", body: "ünïcode \u{2028} separator"), Self.item("", body: ""),
                ], next: "6b082d2b7501b5a70350884c"),
        ]
        for page in pages {
            let response = HistoryResponse(page, timestamps: style)
            let encoded = try JSONBody.encoder().encode(response)
            #expect(String(decoding: response.json, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
        }
    }

    @Test func everyControlCharacterReadsBackAsItWas() throws {
        let controls = String(String.UnicodeScalarView((0..<0x20).compactMap(Unicode.Scalar.init))) + "\u{7F}"
        let response = HistoryResponse(HistoryPage(items: [Self.item(controls, body: controls)], next: nil), timestamps: .rfc3339)
        let written = try #require(try JSONSerialization.jsonObject(with: Data(response.json)) as? [String: Any])
        let encoded = try #require(try JSONSerialization.jsonObject(with: try JSONBody.encoder().encode(response)) as? [String: Any])
        #expect(NSDictionary(dictionary: written).isEqual(to: encoded))
        let item = try #require((written["history"] as? [[String: Any]])?.first)
        #expect((item["notification"] as? [String: Any])?["title"] as? String == controls)
    }
}
