import Foundation
import HeraldCore

/// Finds what a JSON body may not carry although the decoder accepts it:
/// - bytes that are not UTF-8 (RFC 8259 §8.1): the decoder reads them as U+FFFD;
/// - strings Herald could not store exactly as sent: U+0000 (SQLite would cut the text there,
///   PostgreSQL refuses it) and unpaired UTF-16 surrogate escapes (the decoder would replace them);
/// - an object with a member name twice (I-JSON, RFC 7493 §2.3): the decoder would keep one
///   silently, so what is stored would not be what was sent;
/// - an integer outside Int64's range that a double cannot hold exactly (the decoder would round
///   it: `12345678901234567890` read back as `12345678901234567168`);
/// - arrays and objects nested deeper than ``maxDepth``: the decoder takes up to 512 levels,
///   but `JSONEncoder` refuses to write them back, so a value stored a few levels below that
///   limit could be stored and then never answered (a 500 after the write, and on every read).
package enum JSONTextCheck {
    /// The deepest nesting of arrays and objects a body may have, the body's own object included.
    package static let maxDepth = 64

    package enum Problem: Equatable {
        case invalidUTF8
        /// The path of the string or key (`title`, `data.k`, `ids[2]`).
        case unstorableString(String)
        /// The path of the object and the repeated name.
        case duplicateKey(object: String, key: String)
        /// The path of the array or object one level too deep.
        case tooDeep(String)
        /// The path of an integer that would be stored rounded.
        case inexactInteger(String)
    }

    /// The first problem in `bytes`, JSON the decoder has already accepted, or nil.
    package static func firstProblem(in bytes: some Collection<UInt8>) -> Problem? {
        let bytes = Array(bytes)
        guard String(validating: bytes, as: UTF8.self) != nil else { return .invalidUTF8 }
        var scanner = Scanner(bytes: bytes)
        return scanner.run()
    }

    /// The 4xx for a problem: 422 naming the field for a string or a nesting too deep, 400 for
    /// broken UTF-8 or a repeated name.
    package static func error(for problem: Problem, prefix: String = "") -> HeraldError {
        switch problem {
        case .invalidUTF8:
            HeraldError(.badRequest, code: "invalid_json", prefix.isEmpty ? "the body is not valid UTF-8" : "\(prefix)not valid UTF-8")
        case .unstorableString(let field):
            HeraldError.invalidField(prefix + field, "must not contain U+0000 or an unpaired surrogate")
        case .duplicateKey(let object, let key):
            HeraldError(.badRequest, code: "duplicate_key", "\(prefix)\(object) has the member '\(key)' more than once (RFC 7493)")
        case .tooDeep(let field):
            HeraldError.invalidField(prefix + field, "nests arrays and objects more than \(maxDepth) levels deep")
        case .inexactInteger(let field):
            HeraldError.invalidField(prefix + field, "is an integer past Int64's range that a double cannot hold exactly; send it as a string")
        }
    }

    /// A walk over valid JSON that keeps the path to the current value, with an explicit stack
    /// so nesting depth cannot exhaust the call stack.
    private struct Scanner {
        enum Frame {
            case object(key: String, seen: Set<String>)
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
                case .object(let key, _): text += text.isEmpty ? key : ".\(key)"
                case .array(let position): text += "[\(position)]"
                }
            }
            return text.isEmpty ? "body" : text
        }

        mutating func run() -> Problem? {
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    let start = index
                    let (text, storable, escaped) = readString()
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                        // A key: the value that follows is at this key.
                        index += 1
                        if !storable { return .unstorableString(parentPath) }
                        if case .object(_, var seen) = stack.last {
                            let name = escaped ? Self.decodedKey(bytes[start..<start + text.utf8.count + 2]) ?? text : text
                            guard seen.insert(name).inserted else { return .duplicateKey(object: parentPath, key: name) }
                            stack[stack.count - 1] = .object(key: text, seen: seen)
                        }
                    } else if !storable {
                        return .unstorableString(path)
                    }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    guard stack.count < JSONTextCheck.maxDepth else { return .tooDeep(path) }
                    stack.append(byte == UInt8(ascii: "{") ? .object(key: "", seen: []) : .array(index: 0))
                    index += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if !stack.isEmpty { stack.removeLast() }
                    index += 1
                case UInt8(ascii: ","):
                    if case .array(let position) = stack.last { stack[stack.count - 1] = .array(index: position + 1) }
                    index += 1
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    let start = index
                    var integral = true
                    scanning: while index < bytes.count {
                        switch bytes[index] {
                        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): break
                        case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "+"): integral = false
                        default: break scanning
                        }
                        index += 1
                    }
                    if integral, !Self.isExactInteger(bytes[start..<index]) { return .inexactInteger(path) }
                default:
                    index += 1
                }
            }
            return nil
        }

        /// Whether an integer literal keeps its value when decoded: within Int64 (kept as an
        /// integer), or a value a double holds exactly (written back with an exponent, the same
        /// number). Anything else the decoder rounds.
        static func isExactInteger(_ literal: ArraySlice<UInt8>) -> Bool {
            // Eighteen digits always fit in Int64: most literals need no parsing.
            if literal.count <= 18 { return true }
            let text = String(decoding: literal, as: UTF8.self)
            if Int64(text) != nil { return true }
            guard let value = Double(text), value.isFinite else { return false }
            let magnitude = text.hasPrefix("-") ? String(text.dropFirst()) : text
            return String(format: "%.0f", value.magnitude) == magnitude
        }

        /// A key with escapes, as the decoder reads it (`"\u0061"` is `a`).
        static func decodedKey(_ quoted: ArraySlice<UInt8>) -> String? {
            try? JSONDecoder().decode(String.self, from: Data(quoted))
        }

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { index += 1 }
        }

        /// Reads the string at `index` (its opening quote); returns its raw text for keys (escapes
        /// left as they are, enough to name a field), whether it can be stored as sent, and
        /// whether it has escapes.
        mutating func readString() -> (String, Bool, Bool) {
            index += 1
            let start = index
            var storable = true
            var escaped = false
            var pendingHigh = false
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                guard bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count else {
                    if pendingHigh { storable = false }
                    pendingHigh = false
                    index += 1
                    continue
                }
                escaped = true
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
            return (text, storable, escaped)
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
