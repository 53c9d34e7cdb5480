#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The command line's own bytes, checked before they are read as text. Swift's
/// `CommandLine.arguments` and `ProcessInfo.environment` replace bytes that are not UTF-8 with
/// U+FFFD, so `-u $'Jos\xE9'` (Latin-1) would send to the user `Jos\u{FFFD}`, another user's
/// id, and `--database sqlite:$'caf\xE9.db'` would open a file of another name.
public enum CommandLineText {
    /// What is wrong with the arguments, or with an environment variable whose name starts with
    /// one of `prefixes`, or nil when all of them are UTF-8.
    public static func problem(environmentPrefixes prefixes: [String] = ["HERALD_"]) -> String? {
        for index in stride(from: 1, to: Int(CommandLine.argc), by: 1) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            if String(validatingCString: argument) == nil { return "argument \(index) is not UTF-8" }
        }
        var entry = environ
        while let pointer = entry.pointee {
            defer { entry += 1 }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
            let name = bytes.prefix { $0 != UInt8(ascii: "=") }
            guard prefixes.contains(where: { name.starts(with: $0.utf8) }) else { continue }
            if String(validating: bytes, as: UTF8.self) == nil {
                return "environment variable \(String(decoding: name, as: UTF8.self)) is not UTF-8"
            }
        }
        return nil
    }
}
