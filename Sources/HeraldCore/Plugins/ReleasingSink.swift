public import ServiceLifecycle

/// A sink that holds something to release at shutdown (an HTTP client's connections): implement
/// ``shutdown()``; Herald runs the sink in its service group, and its `run()` waits for graceful
/// shutdown, then calls it. The delivery engine stops first, so deliveries in flight finish.
public protocol ReleasingSink: NotificationSink, Service {
    /// Releases what the sink holds; the sink is not used afterwards.
    func shutdown() async
}

extension ReleasingSink {
    /// Waits for the service group's graceful shutdown, then releases the sink.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// Runs `send` for `0..<count`, at most `limit` at a time, and returns the outcomes in index
/// order: the usual shape of a sink's `deliver` for a provider that takes one request per message.
public func deliverConcurrently(_ count: Int, limit: Int, _ send: @escaping @Sendable (Int) async -> DeliveryOutcome) async -> [DeliveryOutcome] {
    var outcomes = [DeliveryOutcome](repeating: .retry(after: nil, reason: "not sent"), count: count)
    await runSends(count, limit: limit, send, finished: { outcomes[$0] = $1 })
    return outcomes
}

/// ``deliverConcurrently(_:limit:_:)`` with at most `limiter`'s limit in flight across every call
/// that shares it: the engine may call a slow sink again before its last call returns, and a
/// limit per call would let those calls add up.
public func deliverConcurrently(
    _ count: Int, sharing limiter: ConcurrencyLimiter, _ send: @escaping @Sendable (Int) async -> DeliveryOutcome
) async -> [DeliveryOutcome] {
    await deliverConcurrently(count, limit: limiter.limit) { index in await limiter.run { await send(index) } }
}

/// ``deliverConcurrently(_:limit:_:)`` for ``NotificationSink/deliver(_:reporting:)``: the
/// outcomes of the sends finished are reported each time `interval` passes, and the rest when
/// the last send is done, so a send that waits out its timeout holds back only its own delivery.
public func deliverConcurrently(
    _ count: Int, limit: Int, reportingEvery interval: Duration, to report: DeliveryReporter,
    _ send: @escaping @Sendable (Int) async -> DeliveryOutcome
) async {
    var finished: [(index: Int, outcome: DeliveryOutcome)] = []
    await runSends(
        count, limit: limit, send, finished: { finished.append(($0, $1)) }, every: interval,
        tick: {
            guard !finished.isEmpty else { return }
            await report(finished)
            finished.removeAll()
        })
    if !finished.isEmpty { await report(finished) }
}

/// Runs `send` for `0..<count` in index order, at most `limit` at a time, starting the next as
/// each finishes, and hands each outcome to `finished` as it comes. With an `interval`, `tick`
/// runs each time it passes while sends are still running.
private func runSends(
    _ count: Int, limit: Int, _ send: @escaping @Sendable (Int) async -> DeliveryOutcome, finished: (Int, DeliveryOutcome) -> Void,
    every interval: Duration? = nil, tick: () async -> Void = {}
) async {
    // A child's result: one send's outcome, or nil when the interval has passed.
    await withTaskGroup(of: (index: Int, outcome: DeliveryOutcome)?.self) { group in
        var next = 0
        var running = 0
        func startNext() {
            let index = next
            group.addTask { (index, await send(index)) }
            next += 1
            running += 1
        }
        func startTimer() {
            guard let interval else { return }
            group.addTask {
                try? await Task.sleep(for: interval)
                return nil
            }
        }
        while next < min(max(limit, 1), count) { startNext() }
        guard running > 0 else { return }
        startTimer()
        while let result = await group.next() {
            if let result {
                finished(result.index, result.outcome)
                running -= 1
                if next < count { startNext() }
            } else {
                await tick()
                startTimer()
            }
            if running == 0 {
                // Only the timer is left, if any.
                group.cancelAll()
                break
            }
        }
    }
}
