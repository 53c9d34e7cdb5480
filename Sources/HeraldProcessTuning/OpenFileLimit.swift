#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Raising the process's soft limit on open files, which bounds its connections.
///
/// Every connection is a file. A systemd service and a login shell start with a soft limit of
/// 1 024 (the hard limit is usually far higher), so with `server.max_connections` at 4 096 the
/// server stopped accepting at about a thousand: NIO backs off while `accept` fails, the clients
/// past it waited in the listen backlog until they timed out, and nothing said why. The soft
/// limit is the process's own to raise up to the hard one, which is what the operator allowed;
/// Go's runtime and nginx do the same at start. HeraldServer warns when the limit in force
/// cannot hold `server.max_connections`.
public enum OpenFileLimit {
    /// Raises the soft limit to the hard limit.
    /// - Returns: the limit now in force, or nil where it cannot be read.
    @discardableResult
    public static func raiseToHardLimit() -> UInt64? {
        #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
            var limits = rlimit()
            guard getrlimit(resourceNoFile, &limits) == 0 else { return nil }
            if limits.rlim_cur < limits.rlim_max {
                var raised = limits
                raised.rlim_cur = limits.rlim_max
                // Darwin refuses an unlimited soft limit for files; keep what there is then.
                if setrlimit(resourceNoFile, &raised) == 0 { limits = raised }
            }
            return UInt64(limits.rlim_cur)
        #else
            return nil
        #endif
    }

    #if canImport(Glibc)
        private static var resourceNoFile: __rlimit_resource_t { __rlimit_resource_t(UInt32(RLIMIT_NOFILE.rawValue)) }
    #elseif canImport(Musl) || canImport(Darwin)
        private static var resourceNoFile: Int32 { RLIMIT_NOFILE }
    #endif
}
