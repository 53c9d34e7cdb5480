/// Lower-case hexadecimal text for bytes. `String(format: "%02x")` per byte costs more than
/// the SHA-256 it usually follows, and these run on every request.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Two lowercase hex digits per byte.
    public static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
