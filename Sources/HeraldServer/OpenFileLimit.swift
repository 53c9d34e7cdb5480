import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's limit on open files, which bounds its connections: read at start, to warn
/// when it cannot hold `server.max_connections`. Raising it is the process's business
/// (`ProcessTuning` in HeraldProcessTuning, which `herald serve` applies), never the library's.
enum OpenFileLimit {
    /// Files Herald holds besides client connections: the database's (three a connection),
    /// the sinks' outgoing connections, the event loops' and the standard streams.
    static let reserve = 256

    /// The soft limit in force, or nil where it cannot be read.
    static func current() -> UInt64? {
        #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
            var limits = rlimit()
            guard getrlimit(resourceNoFile, &limits) == 0 else { return nil }
            return UInt64(limits.rlim_cur)
        #else
            return nil
        #endif
    }

    /// What to tell the operator when `limit` files cannot hold `maxConnections` connections
    /// beside ``reserve``, or nil when they can.
    static func warning(limit: UInt64, maxConnections: Int) -> String? {
        let needed = UInt64(clamping: maxConnections).addingReportingOverflow(UInt64(reserve))
        guard !needed.overflow, limit < needed.partialValue else { return nil }
        let connections = limit > UInt64(reserve) ? limit - UInt64(reserve) : 0
        return
            "server.max_connections is \(maxConnections), but this process may open only \(limit) files (its hard limit): past about \(connections) connections, clients wait in the listen backlog; raise the limit (LimitNOFILE= for systemd, ulimit -n) or lower server.max_connections"
    }

    #if canImport(Glibc)
        private static var resourceNoFile: __rlimit_resource_t { __rlimit_resource_t(UInt32(RLIMIT_NOFILE.rawValue)) }
    #elseif canImport(Musl) || canImport(Darwin)
        private static var resourceNoFile: Int32 { RLIMIT_NOFILE }
    #endif
}
