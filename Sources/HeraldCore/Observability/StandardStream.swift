#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Standard output or standard error, written at once and never trapping.
///
/// Not `FileHandle.write(_:)`: on Linux it traps when the write fails (`try!` inside Foundation),
/// so a full disk under a redirected log (`> herald.log`, ENOSPC) or a closed descriptor
/// crashed the process at its next line. Not `print`: it buffers a whole block when the stream
/// is a pipe or a file (a container runtime, systemd, `| tee`), so a long-running process's
/// lines (the console sink's pushes) showed up kilobytes later, or never when it was stopped.
public enum StandardStream: Int32, Sendable {
    /// Standard output.
    case output = 1
    /// Standard error.
    case error = 2

    /// Writes `text` as is, in as few `write(2)` calls as the stream takes (one for a line a pipe
    /// can take atomically). A failed write is dropped: these streams are for people reading.
    public func write(_ text: String) {
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = writeBytes(rawValue, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }

    /// Writes `text` and a newline.
    public func line(_ text: String) {
        write(text + "\n")
    }

    /// Writes out what `print` still holds, as a command ends. - Returns: why it could not be
    /// written, or nil. A command whose output was lost must not exit 0: `herald keys create`
    /// prints a secret it shows only once.
    public static func flushPrinted() -> String? {
        guard fflush(nil) != 0 else { return nil }
        return "cannot write standard output: \(String(cString: strerror(errno)))"
    }
}

/// `write(2)`, out of the enum whose own `write` would shadow it.
private func writeBytes(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
