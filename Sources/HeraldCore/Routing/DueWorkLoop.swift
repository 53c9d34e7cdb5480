import Logging
import ServiceLifecycle

/// The loop of a worker whose work falls due at known instants (``FanOutWorker``,
/// ``DigestWorker``): do everything due, then sleep until woken, until the next instant, or for
/// `interval` (work another process committed), whichever comes first; after a storage error,
/// back off and try again. Ends at graceful shutdown.
enum DueWorkLoop {
    /// - Parameters:
    ///   - interval: the longest sleep.
    ///   - signal: wakes the loop when work is committed in this process.
    ///   - logger: where a storage error is reported, as `paused` says.
    ///   - paused: what a storage error paused, and how it resumes (for the log).
    ///   - work: does everything due.
    ///   - untilDue: how long until the next work is due; nil for none known.
    ///   - settle: a pause after each round before heeding wakes, so wakes arriving with every
    ///     accept cost one round per pause, not one each.
    static func run(
        interval: Duration, signal: WakeSignal, logger: Logger, paused: String, work: @escaping @Sendable () async throws -> Void,
        untilDue: @escaping @Sendable () async throws -> Duration?, settle: Duration = .zero
    ) async {
        await cancelWhenGracefulShutdown {
            var failures = 0
            while !Task.isCancelled {
                do {
                    try await work()
                    failures = 0
                    if settle > .zero { try await Task.sleep(for: settle) }
                    let due = try await untilDue()
                    await signal.wait(timeout: due.map { min($0, interval) } ?? interval)
                } catch _ where Task.isCancelled {
                    break // ending, not a storage error
                } catch {
                    failures += 1
                    logger.warning("\(paused): \(error)")
                    try? await Task.sleep(for: StorageBackoff.pause(after: failures, cap: .seconds(5)))
                }
            }
        }
    }
}
