/// Region codes (`QC`, `ON`, `CA`) compare without regard to ASCII letter case, as ISO 3166 and
/// BCP 47 region subtags do: an app that sends `region=qc` is in the region a message for `QC`
/// names. Only ASCII letters fold; any other character compares as written.
public enum RegionCode {
    /// The form codes are compared in: ASCII letters in upper case.
    public static func folded(_ code: String) -> String {
        guard code.utf8.contains(where: { (0x61...0x7A).contains($0) }) else { return code }
        return String(decoding: code.utf8.map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 }, as: UTF8.self)
    }
}
