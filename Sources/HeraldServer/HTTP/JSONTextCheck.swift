import HeraldCore

/// Finds strings a JSON body carries that Herald could not store exactly as sent: U+0000 (SQLite
/// would cut the text there, PostgreSQL refuses it) and unpaired UTF-16 surrogate escapes (the
/// decoder would replace them). Both can only arrive as `\u` escapes, so a body without one is
/// passed over in a single scan.
enum JSONTextCheck {
    /// The path of the first such string or key (`title`, `data.k`, `ids[2]`), or nil.
    /// `bytes` is JSON the decoder has already accepted.
    static func firstUnstorableString(in bytes: some Collection<UInt8>) -> String? {
        let bytes = Array(bytes)
        guard mayHaveEscape(bytes) else { return nil }
        var scanner = Scanner(bytes: bytes)
        return scanner.run()
    }

    /// Whether `\u` appears at all: the common body has no escapes.
    private static func mayHaveEscape(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == UInt8(ascii: "\\") {
                if bytes[index + 1] == UInt8(ascii: "u") { return true }
                index += 2
            } else {
                index += 1
            }
        }
        return false
    }

    /// A walk over valid JSON that keeps the path to the current value, with an explicit stack
    /// so nesting depth cannot exhaust the call stack.
    private struct Scanner {
        enum Frame {
            case object(key: String)
            case array(index: Int)
        }

        let bytes: [UInt8]
        var index = 0
        var stack: [Frame] = []

        init(bytes: [UInt8]) { self.bytes = bytes }

        var path: String { describe(stack[...]) }

        /// The object a key belongs to: the field to name when the key itself is at fault.
        var parentPath: String { describe(stack.dropLast()) }

        func describe(_ frames: ArraySlice<Frame>) -> String {
            var text = ""
            for frame in frames {
                switch frame {
                case .object(let key): text += text.isEmpty ? key : ".\(key)"
                case .array(let position): text += "[\(position)]"
                }
            }
            return text.isEmpty ? "body" : text
        }

        mutating func run() -> String? {
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    let (text, storable) = readString()
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                        // A key: the value that follows is at this key.
                        index += 1
                        if !storable { return parentPath }
                        if case .object = stack.last { stack[stack.count - 1] = .object(key: text) }
                    } else if !storable {
                        return path
                    }
                case UInt8(ascii: "{"):
                    stack.append(.object(key: ""))
                    index += 1
                case UInt8(ascii: "["):
                    stack.append(.array(index: 0))
                    index += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if !stack.isEmpty { stack.removeLast() }
                    index += 1
                case UInt8(ascii: ","):
                    if case .array(let position) = stack.last { stack[stack.count - 1] = .array(index: position + 1) }
                    index += 1
                default:
                    index += 1
                }
            }
            return nil
        }

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { index += 1 }
        }

        /// Reads the string at `index` (its opening quote); returns its raw text for keys (escapes
        /// left as they are, enough to name a field) and whether it can be stored as sent.
        mutating func readString() -> (String, Bool) {
            index += 1
            let start = index
            var storable = true
            var pendingHigh = false
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                guard bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count else {
                    if pendingHigh { storable = false }
                    pendingHigh = false
                    index += 1
                    continue
                }
                if bytes[index + 1] == UInt8(ascii: "u"), let unit = hex(at: index + 2) {
                    switch unit {
                    case 0: storable = false
                    case 0xD800...0xDBFF:
                        if pendingHigh { storable = false }
                        pendingHigh = true
                    case 0xDC00...0xDFFF:
                        if !pendingHigh { storable = false }
                        pendingHigh = false
                    default:
                        if pendingHigh { storable = false }
                        pendingHigh = false
                    }
                    index += 6
                } else {
                    if pendingHigh { storable = false }
                    pendingHigh = false
                    index += 2
                }
            }
            if pendingHigh { storable = false }
            let text = String(decoding: bytes[start..<min(index, bytes.count)], as: UTF8.self)
            index += 1
            return (text, storable)
        }

        func hex(at position: Int) -> Int? {
            guard position + 4 <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[position..<position + 4] {
                let digit: Int
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(byte - UInt8(ascii: "a")) + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = Int(byte - UInt8(ascii: "A")) + 10
                default: return nil
                }
                value = value * 16 + digit
            }
            return value
        }
    }
}
