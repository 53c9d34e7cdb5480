import Foundation
import HeraldCore
import Synchronization

/// Sends `count` requests with at most `concurrency` in flight (and at most `rate` a second),
/// printing a progress line to stderr and a summary to stdout.
struct LoadRun {
    var count: Int
    var concurrency: Int
    var rate: Double?
    /// Requests sent again so far after Herald answered "not now" (``HeraldClient/retries``).
    var retries: @Sendable () -> Int = { 0 }

    final class Progress: Sendable {
        struct State {
            var sent = 0
            var errors = 0
            var firstError: String?
        }
        let state = Mutex(State())
    }

    func run(_ send: @escaping @Sendable (Int) async throws -> some Sendable) async throws {
        let progress = Progress()
        let start = ContinuousClock.now
        // On a terminal one line rewritten in place; into a file or a pipe, a line each time.
        let (lead, trail) = isatty(STDERR_FILENO) == 1 ? ("\r", "") : ("", "\n")
        let count = self.count
        let retries = self.retries
        @Sendable func report() {
            let state = progress.state.withLock { $0 }
            let elapsed = (ContinuousClock.now - start).seconds
            let retried = retries()
            let line =
                String(format: "sent %d/%d  %.0f/s  errors %d", state.sent, count, Double(state.sent) / max(elapsed, 0.001), state.errors)
                + (retried > 0 ? "  retried \(retried)" : "")
            StandardStream.error.write(lead + line + trail)
        }
        let reporter = Task {
            while (try? await Task.sleep(for: .milliseconds(500))) != nil { report() }
        }
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func schedule(_ index: Int) {
                group.addTask {
                    do {
                        _ = try await send(index)
                        progress.state.withLock { $0.sent += 1 }
                    } catch {
                        progress.state.withLock { state in
                            state.errors += 1
                            if state.firstError == nil { state.firstError = "\(error)" }
                        }
                    }
                }
            }
            while next < min(concurrency, count) {
                schedule(next)
                next += 1
            }
            while await group.next() != nil {
                if next < count {
                    if let rate {
                        let due = start + .saturating(seconds: Double(next) / rate)
                        if due > ContinuousClock.now { try? await Task.sleep(until: due) }
                    }
                    schedule(next)
                    next += 1
                }
            }
        }
        // Stopped before the last line, so no tick lands after it.
        reporter.cancel()
        await reporter.value
        report()
        if trail.isEmpty { StandardStream.error.write("\n") }
        let state = progress.state.withLock { $0 }
        let elapsed = (ContinuousClock.now - start).seconds
        let retried = retries()
        print(
            String(format: "sent %d in %.2fs: %.0f/s, errors %d", state.sent, elapsed, Double(state.sent) / max(elapsed, 0.001), state.errors)
                + (retried > 0 ? ", retried \(retried) (Herald asked to wait)" : ""))
        if let firstError = state.firstError {
            StandardStream.error.write("notifsim: error: \(firstError)\n")
            throw LoadRun.Failed()
        }
    }
}

extension LoadRun {
    /// Some requests failed; the first one's error has been written to standard error.
    struct Failed: Error {}
}

extension Duration {
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
