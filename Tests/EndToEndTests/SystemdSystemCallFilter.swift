import Foundation

/// A unit's `SystemCallFilter=` and `SystemCallErrorNumber=` as systemd applies them
/// (systemd.exec(5)), so that a test can run a command under the same seccomp filter where no
/// systemd runs services, as in CI's containers: groups are expanded by `systemd-analyze
/// syscall-filter`, and `syscall_filter.py` loads the filter through libseccomp before it
/// executes the command.
struct SystemdSystemCallFilter {
    enum Mode: String {
        /// Calls not listed get the action.
        case allow
        /// Listed calls get the action.
        case deny
    }

    struct Unsupported: Error, CustomStringConvertible {
        var description: String
    }

    var mode: Mode
    var names: Set<String>
    /// `kill`, or the errno number a filtered call returns instead.
    var action: String

    static let launcher = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("syscall_filter.py").path

    /// Allowed by systemd under any allow list, without being listed.
    static let implicitlyAllowed: Set<String> = [
        "execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn",
        "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
    ]

    static let errnoNumbers = ["EPERM": 1, "ENOENT": 2, "EIO": 5, "EACCES": 13, "EINVAL": 22, "ENOSYS": 38, "EUCLEAN": 117]

    /// The filter of a unit's `[Service]` section, or nil when it sets none.
    init?(service: [String: [String]], in directory: URL) async throws {
        var mode: Mode?
        var names = Set<String>()
        var expanded: [String: Set<String>] = [:]
        for value in service["SystemCallFilter"] ?? [] {
            var text = value.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty else {
                // An empty assignment resets the filter.
                mode = nil
                names = []
                continue
            }
            let denies = text.hasPrefix("~")
            if denies { text.removeFirst() }
            var listed = Set<String>()
            for word in text.split(whereSeparator: \.isWhitespace).map(String.init) {
                guard !word.contains(":") else {
                    throw Unsupported(description: "SystemCallFilter=\(value): a per-call errno (name:ERRNO) is not modelled by syscall_filter.py")
                }
                listed.formUnion(try await Self.expand(word, in: directory, cache: &expanded))
            }
            // The first assignment decides the kind of list; later ones of the other kind take
            // their calls out of it.
            let kind = mode ?? (denies ? .deny : .allow)
            mode = kind
            if (kind == .deny) == denies { names.formUnion(listed) } else { names.subtract(listed) }
        }
        guard let mode else { return nil }
        self.mode = mode
        self.names = mode == .allow ? names.union(Self.implicitlyAllowed) : names
        let errorNumber = service["SystemCallErrorNumber"]?.last?.trimmingCharacters(in: .whitespaces) ?? ""
        if errorNumber.isEmpty || errorNumber == "kill" {
            action = "kill"
        } else if let number = Int(errorNumber) ?? Self.errnoNumbers[errorNumber] {
            action = String(number)
        } else {
            throw Unsupported(description: "SystemCallErrorNumber=\(errorNumber) is not a number or a name this test knows")
        }
    }

    /// `executable` and `arguments` as run under this filter.
    func wrapping(_ executable: String, _ arguments: [String]) -> (executable: String, arguments: [String]) {
        ("/usr/bin/env", ["python3", Self.launcher, mode.rawValue, names.sorted().joined(separator: ","), action, "--", executable] + arguments)
    }

    /// A call's name as itself, a group (`@basic-io`) as every call in it, groups within
    /// groups included.
    static func expand(_ word: String, in directory: URL, cache: inout [String: Set<String>]) async throws -> Set<String> {
        guard word.hasPrefix("@") else { return [word] }
        if let known = cache[word] { return known }
        let listed = try await runCommand("/usr/bin/systemd-analyze", ["syscall-filter", word], in: directory, timeout: .seconds(30))
        guard listed.status == 0 else {
            throw Unsupported(description: "systemd-analyze syscall-filter \(word): \(listed.stderr)")
        }
        var calls = Set<String>()
        // The group's name, then its members indented, with comment lines among them.
        for line in listed.stdout.split(separator: "\n").dropFirst() where line.first?.isWhitespace == true {
            let member = line.trimmingCharacters(in: .whitespaces)
            guard !member.isEmpty, !member.hasPrefix("#") else { continue }
            calls.formUnion(try await expand(member, in: directory, cache: &cache))
        }
        guard !calls.isEmpty else { throw Unsupported(description: "systemd-analyze lists no calls in \(word)") }
        cache[word] = calls
        return calls
    }
}
