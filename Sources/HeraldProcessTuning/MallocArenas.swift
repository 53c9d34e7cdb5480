import Foundation

#if canImport(Glibc)
    import CGlibcMalloc
#endif

/// How many heaps glibc's allocator keeps.
///
/// By default glibc gives threads that allocate at the same time heaps (arenas) of their own,
/// up to eight per core, and each keeps the memory it freed. A server's allocations hop between
/// NIO's event loops, Swift's pool and the database's queues, so under load most threads end
/// up with an arena holding freed memory. One arena per core lowered the peak resident memory
/// of an end-to-end run by several MiB with no change in throughput (docs/performance.md).
public enum MallocArenas {
    /// The arena limit Herald sets: one per core, or none when the operator chose with glibc's
    /// own `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES`.
    public static func limit(environment: [String: String], cores: Int) -> Int32? {
        guard environment["MALLOC_ARENA_MAX"] == nil, environment["GLIBC_TUNABLES"]?.contains("glibc.malloc.arena_max") != true else { return nil }
        return Int32(clamping: max(1, cores))
    }

    /// Applies ``limit(environment:cores:)``. ``ProcessTuning/applyForServer()`` calls it before
    /// the server starts its event loops and workers: arenas that exist stay.
    static func limitToOnePerCore() {
        #if canImport(Glibc)
            let process = ProcessInfo.processInfo
            guard let arenas = limit(environment: process.environment, cores: process.activeProcessorCount) else { return }
            _ = mallopt(M_ARENA_MAX, arenas)
        #endif
    }
}
