/// A window's length as a sender or operator writes it (docs/timing.md): `"90s"`, `"10m"`,
/// `"1h"`, or a number of seconds (in JSON a number, or its text).
public struct WindowLength: Decodable, Sendable, Equatable {
    /// As given: a number's decimal text, or the text.
    public var text: String

    /// A length as written.
    public init(_ text: String) { self.text = text }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self.text = text
        } else if let number = try? container.decode(Double.self) {
            // A fraction or an out-of-range number stays text that ``seconds`` refuses.
            self.text = number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        } else {
            throw DecodingError.typeMismatch(String.self, .init(codingPath: decoder.codingPath, debugDescription: "expected a duration such as \"10m\""))
        }
    }

    /// The longest window: a week.
    public static let maxSeconds: Int64 = 7 * 24 * 3600

    /// Whole seconds, 1 to ``maxSeconds``; nil for anything else (0, a fraction, an unknown unit).
    public var seconds: Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = digits.last, !last.isNumber {
            switch last {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            case "d": unit = 86_400
            default: return nil
            }
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int64(digits) else { return nil }
        let seconds = value * unit
        return (1...Self.maxSeconds).contains(seconds) ? seconds : nil
    }
}
