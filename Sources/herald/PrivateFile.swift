import Foundation

#if canImport(Glibc)
    // Foundation re-exports `stat` through CoreFoundation on Linux: named, or a clean build
    // refuses it (MemberImportVisibility).
    import CoreFoundation
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Files `herald` writes that hold keys (the emulators' service account, `.p8` key and
/// subscription, `herald vapid generate --out`): created 0600, and an existing file tightened
/// to 0600 before anything is written into it, so a key is never readable by other accounts,
/// not even for a moment. Never written through a symbolic link: one planted at the path
/// (`/tmp/key.p8` pointing at a file of the operator's) would have the key land, or the
/// operator's file be overwritten, wherever it points (docs/security.md, "Files").
enum PrivateFile {
    #if canImport(Glibc)
        private static let systemWrite = Glibc.write
    #elseif canImport(Darwin)
        private static let systemWrite = Darwin.write
    #endif

    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// Writes `bytes` to `path` with `mode` (0600 by default; a certificate, which is public,
    /// may be 0644).
    static func write(_ bytes: some Collection<UInt8>, to path: String, mode: mode_t = 0o600) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP { throw Refused(description: "\(path) is a symbolic link: a key is never written through one") }
            throw Refused(description: "cannot open \(path): \(String(cString: strerror(code)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw Refused(description: "\(path) is not a regular file")
        }
        guard fchmod(descriptor, mode) == 0, ftruncate(descriptor, 0) == 0 else {
            throw Refused(description: "cannot make \(path) private: \(String(cString: strerror(errno)))")
        }
        let data = Array(bytes)
        var written = 0
        while written < data.count {
            let result = data[written...].withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                throw Refused(description: "cannot write \(path): \(String(cString: strerror(errno)))")
            }
            written += result
        }
    }

    static func write(_ text: String, to path: String, mode: mode_t = 0o600) throws {
        try write(Array(text.utf8), to: path, mode: mode)
    }
}
