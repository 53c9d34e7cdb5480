import Logging
import ServiceLifecycle

/// One of Herald's background services, named in the log as it stops: at a graceful shutdown
/// each says when it was asked to stop and when it has, so a shutdown that runs long shows
/// which part is still draining.
struct StoppingService: Service, CustomStringConvertible {
    let name: String
    let base: any Service
    let logger: Logger
    /// Called once when the graceful shutdown reaches this service.
    var onStop: @Sendable () -> Void = {}

    var description: String { name }

    func run() async throws {
        let logger = self.logger
        let name = self.name
        let onStop = self.onStop
        try await withGracefulShutdownHandler {
            try await base.run()
        } onGracefulShutdown: {
            logger.info("stopping \(name)")
            onStop()
        }
        logger.info("stopped \(name)")
    }
}
