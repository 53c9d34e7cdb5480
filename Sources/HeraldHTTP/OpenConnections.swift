import NIOCore
import Synchronization

/// The server's open connections, so a graceful shutdown can end the ones still open once the
/// in-flight requests had their time. Hummingbird closes idle keep-alive connections when the
/// shutdown starts, but a connection that misses that signal (one still being set up, or held
/// by a client that never finishes a request) would otherwise hold the drain for the whole
/// `shutdown_timeout`.
package final class OpenConnections: Sendable {
    package init() {}
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

    package func add(_ channel: any Channel) {
        channels.withLock { $0[ObjectIdentifier(channel)] = channel }
    }

    package func remove(_ channel: any Channel) {
        _ = channels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    package var count: Int { channels.withLock { $0.count } }

    /// Closes every connection still open. - Returns: how many there were.
    @discardableResult
    package func closeAll() -> Int {
        let open = channels.withLock { channels -> [any Channel] in
            defer { channels.removeAll() }
            return Array(channels.values)
        }
        for channel in open { channel.close(promise: nil) }
        return open.count
    }
}
