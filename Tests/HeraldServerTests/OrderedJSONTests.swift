import Foundation
import Testing

@testable import HeraldServer

/// A pull's objects keep their members in the order added, and any key is written as valid
/// JSON, whether it takes the fast path (printable ASCII without quotes or backslashes) or the
/// encoder's.
struct OrderedJSONTests {
    @Test func membersKeepTheirOrderAndEveryKeyIsEscaped() throws {
        var inner = OrderedJSON()
        inner.add("z", jsonText: "1")
        inner.add("a", jsonText: #"{"title":"Card"}"#)
        var outer = OrderedJSON()
        try outer.add("first", true)
        outer.add("cards", object: inner)
        outer.add(#"quote " and back \ slash"#, jsonText: "2")
        outer.add("é\n", jsonText: "3")
        outer.add("empty", object: OrderedJSON())
        let text = String(decoding: outer.bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"first":true,"cards":{"z":1,"a":{"title":"Card"}},"#), "\(text)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(outer.bytes)) as? [String: Any], "\(text)")
        #expect(parsed[#"quote " and back \ slash"#] as? Int == 2)
        #expect(parsed["é\n"] as? Int == 3)
        #expect((parsed["empty"] as? [String: Any])?.isEmpty == true)
        #expect(String(decoding: OrderedJSON().bytes, as: UTF8.self) == "{}")
    }
}
