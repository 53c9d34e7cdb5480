import Logging
import ServiceLifecycle

/// The storage's signals from other processes (PostgreSQL `LISTEN`), which the engine holds
/// open beside its workers: new work to claim, and handed-off copies to drop.
extension DeliveryEngine {
    /// Relays other processes' "new work" signals (PostgreSQL LISTEN) to idle workers until
    /// shutdown.
    func relayWork() async {
        let signal = self.signal
        // Woken once after a lost connection: work committed while nobody listened is not missed.
        await keepWatching(
            "work notifications, polling until they are back",
            watch: { try await self.queue.watchForWork { signal.notify() } },
            afterFailure: { signal.notify() })
    }

    /// Drops from the hand-off the deliveries other processes failed (a device moved or removed,
    /// a user erased through them), until shutdown. Notices missed while the connection is lost
    /// are missed: those copies go, as one a worker had already taken would.
    func relayWithdrawals() async {
        let (handOff, logger) = (self.handOff, self.logger)
        await keepWatching("withdrawal notices, watching again") {
            try await self.queue.watchWithdrawals { ids in
                let failed = Set(ids)
                let dropped = handOff.withdraw { failed.contains($0.id) }
                if dropped > 0 { logger.debug("dropped \(dropped) handed-off deliveries another process failed") }
            }
        }
    }

    /// Holds one of the storage's watches (PostgreSQL LISTEN) open until shutdown, reconnecting
    /// after a lost connection (then `afterFailure`).
    private func keepWatching(_ what: String, watch: @escaping @Sendable () async throws -> Void, afterFailure: () -> Void = {}) async {
        var failures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await watch() }
                return
            } catch {
                guard !Task.isCancelled && !Task.isShuttingDownGracefully else { return }
                failures += 1
                logger.warning("lost the storage's \(what): \(error)")
                afterFailure()
                let pause = Duration.milliseconds(min(100 << min(failures, 6), 5_000))
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            }
        }
    }
}
