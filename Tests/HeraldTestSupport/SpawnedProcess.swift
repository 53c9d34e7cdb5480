import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, for tests that run `herald`, `curl` or a script.
///
/// Not Foundation's `Process`: on Linux its `run()` lists `/proc/self/fd` to find the
/// descriptors to close in the child, and copies a whole 256-byte name from each entry, reading
/// past its buffer once the listing fills it (about 1 365 open descriptors;
/// swift-corelibs-foundation#5472, fixed after this toolchain). The test process passes 1 300
/// at the suite's parallel start (SQLite's files of the stores open at once), and that read
/// crashed it once with SIGSEGV, taking every test with it. Here glibc closes the descriptors
/// with `close_range`, and nothing in this process reads the directory.
///
/// The child's stdin is `/dev/null`; its stdout and stderr are appended to files.
public final class SpawnedProcess: Sendable {
    private enum State {
        case notStarted
        case running(pid_t)
        /// The exit status, or the number of the signal that ended the process (as
        /// `Process.terminationStatus`).
        case exited(Int32)
    }

    private let executable: String
    private let arguments: [String]
    private let environment: [String: String]
    private let directory: String?
    private let stdoutPath: String
    private let stderrPath: String
    private let state = Mutex(State.notStarted)

    public init(
        executable: String, arguments: [String], environment: [String: String], directory: String? = nil, stdoutPath: String = "/dev/null",
        stderrPath: String = "/dev/null"
    ) {
        self.executable = executable
        self.arguments = arguments
        // `scripts/test` marks the processes of one run, so it can stop whatever a crashed test
        // process left running; the mark passes to every child, whatever environment it is given.
        self.environment = environment.merging(
            ProcessInfo.processInfo.environment.filter { $0.key == Self.runMark }
        ) { given, _ in given }
        self.directory = directory
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
    }

    /// The environment variable `scripts/test` marks a run's processes with.
    public static let runMark = "HERALD_TEST_RUN_MARK"

    deinit {
        // Reaps a child that has exited, so no zombie outlives the test; one still running is
        // the test's to stop.
        _ = isRunning
    }

    /// Starts the process; throws when it cannot be started.
    public func run() throws {
        try state.withLock { state in
            guard case .notStarted = state else { throw SpawnError(description: "\(executable) was started already") }
            state = .running(try spawn())
        }
    }

    /// The child's process id (0 before `run()`).
    public var processIdentifier: Int32 {
        state.withLock { state in
            guard case .running(let pid) = state else { return 0 }
            return pid
        }
    }

    /// Whether the child is still running; reaps it once it has exited.
    public var isRunning: Bool {
        state.withLock { state in
            guard case .running(let pid) = state else { return false }
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid {
                state = .exited(Self.termination(status))
                return false
            }
            if reaped < 0 && errno != EINTR {
                // Not our child any more (reaped elsewhere): nothing left to wait for.
                state = .exited(-1)
                return false
            }
            return true
        }
    }

    /// The exit status once the process has exited (`isRunning` false), or the signal that
    /// ended it; 0 before.
    public var terminationStatus: Int32 {
        _ = isRunning
        return state.withLock { state in
            guard case .exited(let status) = state else { return 0 }
            return status
        }
    }

    /// Sends SIGTERM, if the process is running.
    public func terminate() {
        signal(SIGTERM)
    }

    /// Sends `number` to the process, if it is running.
    public func signal(_ number: Int32) {
        state.withLock { state in
            guard case .running(let pid) = state else { return }
            kill(pid, number)
        }
    }

    /// Waits until the process exits, polling without holding a thread, and returns its status.
    public func waitForExit() async -> Int32 {
        while isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        return terminationStatus
    }

    private static func termination(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    private func spawn() throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "stdin")
        try check(posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_APPEND, 0o644), "stdout")
        try check(posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644), "stderr")
        if let directory { try check(SpawnExtensions.addChdir(&actions, directory), "the working directory") }
        try check(SpawnExtensions.addCloseFrom(&actions, 3), "closing inherited descriptors")

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with no signal blocked and every signal at its default action, as a
        // shell would start it, whatever this test process has changed.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(result)))") }
        return pid
    }

    private func check(_ result: Int32, _ what: String) throws {
        guard result == 0 else {
            throw SpawnError(description: "cannot prepare \(what) for \(executable): \(String(cString: strerror(result)))")
        }
    }
}

public struct SpawnError: Error, CustomStringConvertible {
    public var description: String
}

/// glibc's `posix_spawn_file_actions_addchdir_np` (2.29) and `…_addclosefrom_np` (2.34), which
/// the Glibc module does not import: looked up once by name.
private enum SpawnExtensions {
    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    static let chdir: AddChdir? = lookUp("posix_spawn_file_actions_addchdir_np")
    static let closeFrom: AddCloseFrom? = lookUp("posix_spawn_file_actions_addclosefrom_np")

    static func addChdir(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ directory: String) -> Int32 {
        guard let chdir else { return ENOSYS }
        return chdir(actions, directory)
    }

    static func addCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ lowest: Int32) -> Int32 {
        guard let closeFrom else { return ENOSYS }
        return closeFrom(actions, lowest)
    }

    private static func lookUp<Function>(_ name: String) -> Function? {
        guard let symbol = dlsym(nil, name) else { return nil }
        return unsafeBitCast(symbol, to: Function.self)
    }
}
