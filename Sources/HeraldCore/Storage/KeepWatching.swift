public import Logging

/// Holds a storage watch (PostgreSQL `LISTEN`) open until the task is cancelled or the watch
/// returns by itself (a store with nothing to watch). After a failure it logs, pauses (0.2 s,
/// doubling to 5 s), calls `afterFailure` for what may have been missed meanwhile, and watches
/// again.
public func keepWatching(_ what: String, logger: Logger, afterFailure: () -> Void = {}, _ watch: () async throws -> Void) async {
    var failures = 0
    while !Task.isCancelled {
        do {
            try await watch()
            return
        } catch {
            guard !Task.isCancelled else { return }
            failures += 1
            logger.warning("lost \(what), watching again: \(error)")
            try? await Task.sleep(for: StorageBackoff.pause(after: failures, cap: .seconds(5)))
            afterFailure()
        }
    }
}
