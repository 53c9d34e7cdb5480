public import Logging
public import ServiceLifecycle

/// Runs `service` (a Hummingbird application) until the calling task is cancelled, then shuts
/// it down gracefully.
///
/// Cancelling a Hummingbird server outright while a connection it accepted is still queued,
/// not yet handed to a handler, traps in NIO ("Deinited NIOAsyncWriter without calling
/// finish()", swift-nio issue 3481). The emulators and the tests' receivers are stopped by
/// cancelling their task, often just after a test's last request, so they met it now and then.
/// A graceful shutdown serves or closes every accepted connection first; one that has not
/// ended within `grace` (a send an emulator holds open on purpose) is cancelled after all.
public func runUntilCancelled(_ service: some Service, grace: Duration = .seconds(2), logger: Logger) async throws {
    let group = ServiceGroup(configuration: .init(services: [service], logger: logger))
    // Unstructured, so that the caller's cancellation reaches it only as a graceful shutdown.
    let serving = Task { try await group.run() }
    try await withTaskCancellationHandler {
        try await serving.value
    } onCancel: {
        Task {
            await group.triggerGracefulShutdown()
            try? await Task.sleep(for: grace)
            serving.cancel()
        }
    }
}
