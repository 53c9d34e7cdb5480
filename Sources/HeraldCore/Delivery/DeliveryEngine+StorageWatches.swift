import Logging
import ServiceLifecycle

extension DeliveryEngine {
    /// Relays what other processes committed (PostgreSQL `LISTEN`) until shutdown: new work
    /// wakes idle workers; deliveries another process failed (a device moved or removed, a user
    /// erased through it) are dropped from this process's hand-off before a worker sends them.
    /// After a lost connection it polls, reconnecting with a growing pause, and wakes everyone
    /// once, as work committed meanwhile is not missed; withdrawals heard by nobody meanwhile
    /// are missed, and those copies go, as one a worker had already taken would.
    func relayStorageNotices() async {
        let (signal, handOff, logger) = (self.signal, self.handOff, self.logger)
        var failures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown {
                    try await self.queue.watchForWork { notice in
                        switch notice {
                        case .work:
                            signal.notify()
                        case .withdrawn(let ids):
                            let failed = Set(ids)
                            let dropped = handOff.withdraw { failed.contains($0.id) }
                            if dropped > 0 { logger.debug("dropped \(dropped) handed-off deliveries another process failed") }
                        }
                    }
                }
                return
            } catch {
                guard !Task.isCancelled && !Task.isShuttingDownGracefully else { return }
                failures += 1
                logger.warning("lost the storage's work notifications, polling until they are back: \(error)")
                signal.notify()
                let pause = StorageBackoff.pause(after: failures, cap: .seconds(5))
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            }
        }
    }
}
