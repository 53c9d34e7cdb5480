import Foundation
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The tests' own process launcher: what `Process` gave them (working directory, output files,
/// exit status, signals), and no descriptor of the test process in the child.
@Suite(.cleansUp) struct SpawnedProcessTests {
    @Test func runsInItsDirectoryAndReportsItsExitStatus() async throws {
        let directory = try TestResources.temporaryDirectory("herald-spawn")
        let output = try OutputCollector()
        let process = makeProcess("/bin/sh", ["-c", "pwd; echo oops >&2; exit 3"], environment: [:], in: directory, collecting: output)
        try process.run()
        #expect(await process.waitForExit() == 3)
        #expect(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == directory.resolvingSymlinksInPath().path)
        #expect(output.stderr == "oops\n")
        #expect(!process.isRunning)
    }

    @Test func aSignalledProcessReportsTheSignal() async throws {
        let process = SpawnedProcess(executable: "/bin/sleep", arguments: ["30"], environment: [:])
        try process.run()
        #expect(process.isRunning && process.processIdentifier > 0)
        process.terminate()
        #expect(await process.waitForExit() == SIGTERM)
    }

    /// A descriptor this process opened without close-on-exec (as a listening socket or a
    /// database file could be) is not the child's.
    @Test func theChildInheritsOnlyItsStandardDescriptors() async throws {
        let inheritable = open("/dev/null", O_RDONLY)
        try #require(inheritable > 2)
        defer { close(inheritable) }
        let directory = try TestResources.temporaryDirectory("herald-spawn")
        let output = try OutputCollector()
        // `ls` opens the directory it lists, so one descriptor above 2 is its own.
        let process = makeProcess("/bin/ls", ["/proc/self/fd"], environment: [:], in: directory, collecting: output)
        try process.run()
        #expect(await process.waitForExit() == 0)
        let listed = Set(output.stdout.split(separator: "\n").compactMap { Int32($0) })
        #expect(listed.isSuperset(of: [0, 1, 2]))
        #expect(listed.subtracting([0, 1, 2]).count <= 1, "\(listed.sorted())")
        #expect(!listed.contains(inheritable) || inheritable == 3, "\(listed.sorted())")
    }

    @Test func aMissingExecutableIsAnErrorNotACrash() {
        let process = SpawnedProcess(executable: "/nonexistent/herald", arguments: [], environment: [:])
        #expect(throws: SpawnError.self) { try process.run() }
        #expect(!process.isRunning)
    }
}
