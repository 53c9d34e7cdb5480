public import Logging

/// swift-log's `StreamLogHandler` (its line format), with the logger's metadata kept apart and
/// handed over only with a line that is written.
///
/// `StreamLogHandler` formats its metadata into text whenever a key is set, and Hummingbird sets
/// a request id on every request's logger: that took 3 % of the server's CPU on the feed's 304
/// path under load, for lines that are almost never written. Here the logger's metadata goes in
/// with the line's own (a line's own values win), so it is formatted once per line written.
/// A metadata provider's values yield to the logger's here (`StreamLogHandler` lets them win).
public struct DeferredMetadataLogHandler: LogHandler {
    private var output: StreamLogHandler
    public var metadata: Logger.Metadata = [:]

    /// Lines to standard error, as swift-log's default handler writes them.
    public static func standardError(label: String) -> DeferredMetadataLogHandler {
        DeferredMetadataLogHandler(output: .standardError(label: label))
    }

    /// Lines to `stream`.
    public init(label: String, stream: any TextOutputStream & Sendable) {
        self.init(output: StreamLogHandler(label: label, stream: stream))
    }

    private init(output: StreamLogHandler) {
        self.output = output
    }

    public var logLevel: Logger.Level {
        get { output.logLevel }
        set { output.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { output.metadataProvider }
        set { output.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        guard !metadata.isEmpty else { return output.log(event: event) }
        var event = event
        event.metadata = metadata.merging(event.metadata ?? [:]) { _, own in own }
        output.log(event: event)
    }
}
