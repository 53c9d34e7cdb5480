import Foundation
import HeraldCore
import Testing

@testable import HeraldStore

/// Targets are stored by ``JSONWriter`` and read back with a shortcut for plain user ids: any
/// target, whatever its ids hold, reads back as stored, and the shortcut never disagrees with
/// the decoder.
@Suite struct StoredJSONTests {
    @Test func targetsReadBackAsStoredWhateverTheIDsHold() throws {
        let alphabet: [String] = ["a", "7", ",", "\"", "\\", "/", "]", "}", "[", " ", "é", "🙂", "\u{1}", "\n", #"",""#]
        var generator = SystemRandomNumberGenerator()
        func id() -> String { (0..<Int.random(in: 1...8, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" }.joined() }
        for _ in 0..<500 {
            let ids = (0..<Int.random(in: 0...4, using: &generator)).map { _ in id() }
            let text = try StoredJSON.encode(target: .users(ids))
            #expect(try StoredJSON.decodeTarget(text) == .users(ids), "\(text)")
            if let shortcut = StoredJSON.plainUserIDs(text) { #expect(shortcut == ids, "\(text)") }
        }
        #expect(StoredJSON.plainUserIDs(#"{"user_ids":["ann","bob"]}"#) == ["ann", "bob"])
        #expect(StoredJSON.plainUserIDs(#"{"user_ids":[]}"#) == [])
        #expect(StoredJSON.plainUserIDs(#"{"user_ids":["a\/b"]}"#) == nil, "escaped: the decoder reads it")
        #expect(try StoredJSON.decodeTarget(#"{"user_ids":["a\/b"]}"#) == .users(["a/b"]), "as JSONEncoder stored it before")
        #expect(try StoredJSON.decodeTarget(#"{"topic":"news"}"#) == .topic("news"))
        #expect(try StoredJSON.encode(target: .topic("a\"b")) == #"{"topic":"a\"b"}"#)
    }
}
