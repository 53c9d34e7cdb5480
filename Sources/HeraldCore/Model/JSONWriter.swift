/// Writes JSON text straight into bytes, for the few documents written once per notification or
/// per push (stored data maps and targets, FCM request bodies) and the history pages apps fetch:
/// `JSONEncoder` builds a boxed tree of every value first, and that was the largest single cost
/// of a push, of an accept's insert and of a history page in the profiles
/// (docs/performance.md). Anything else keeps using `JSONEncoder`.
///
/// Strings are escaped as RFC 8259 requires (quote, backslash, and control characters below
/// U+0020); everything else, slashes and non-ASCII included, is written as its UTF-8 bytes.
public struct JSONWriter: Sendable {
    /// The document written so far.
    public private(set) var bytes: [UInt8] = []
    /// Whether the next value in the open object or array needs a comma before it.
    private var needsComma = false

    /// An empty document with room for `capacity` bytes before it grows.
    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// The document as a string.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// `{ … }`, with `body` writing its members.
    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        container(UInt8(ascii: "{"), UInt8(ascii: "}"), body)
    }

    /// `[ … ]`, with `body` writing its elements.
    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        container(UInt8(ascii: "["), UInt8(ascii: "]"), body)
    }

    private mutating func container(_ open: UInt8, _ close: UInt8, _ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(open)
        needsComma = false
        body(&self)
        bytes.append(close)
        needsComma = true
    }

    /// A member's key; its value follows with the next call.
    public mutating func key(_ name: String) {
        separate()
        writeString(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// A string value, escaped.
    public mutating func string(_ value: String) {
        separate()
        writeString(value)
        needsComma = true
    }

    /// An integer value, in decimal.
    public mutating func integer(_ value: some BinaryInteger) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    /// `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    /// `null`.
    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
        needsComma = true
    }

    /// A value that is already JSON text (a stored metadata object, another writer's bytes,
    /// an encoder's output), copied as it is: the caller vouches that it is one JSON value.
    public mutating func raw(_ json: some Collection<UInt8>) {
        separate()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    /// `raw(_:)` for text held as a `String`.
    public mutating func raw(_ json: String) {
        separate()
        var text = json
        text.withUTF8 { bytes.append(contentsOf: $0) }
        needsComma = true
    }

    /// `"key":"value"`.
    public mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    /// `"key":"value"` when there is a value; nothing otherwise.
    public mutating func member(_ name: String, ifPresent value: String?) {
        guard let value else { return }
        member(name, value)
    }

    /// An object of string members, keys in sorted order so equal maps give equal text.
    public mutating func stringMap(_ map: [String: String]) {
        object { writer in
            for key in map.keys.sorted() {
                writer.member(key, map[key] ?? "")
            }
        }
    }

    /// An array of strings, in the order given.
    public mutating func stringArray(_ values: [String]) {
        array { writer in
            for value in values { writer.string(value) }
        }
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func writeString(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(Self.hexDigit(byte >> 4))
                bytes.append(Self.hexDigit(byte & 0x0F))
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
