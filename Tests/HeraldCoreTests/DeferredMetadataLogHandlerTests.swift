import Logging
import Synchronization
import Testing

@testable import HeraldCore

/// The handler writes what swift-log's `StreamLogHandler` writes, with the same metadata.
@Suite struct DeferredMetadataLogHandlerTests {
    final class Lines: TextOutputStream, Sendable {
        private let written = Mutex<[String]>([])
        func write(_ string: String) { written.withLock { $0.append(string) } }
        /// Each line without its timestamp (two handlers may write theirs a second apart).
        var withoutTimestamps: [String] { written.withLock { $0 }.map { String($0.drop { $0 != " " }) } }
    }

    /// Both loggers get the same levels, metadata and lines; their output must be the same.
    @Test func writesTheLinesStreamLogHandlerWrites() {
        let (deferred, stream) = (Lines(), Lines())
        var loggers = [
            Logger(label: "herald.test") { label in DeferredMetadataLogHandler(label: label, stream: deferred) },
            Logger(label: "herald.test") { label in StreamLogHandler(label: label, stream: stream) },
        ]
        for index in loggers.indices {
            loggers[index].logLevel = .notice
            loggers[index].info("dropped below the level")
            loggers[index].notice("no metadata yet")
            loggers[index][metadataKey: "hb.request.id"] = "r-1"
            // One key per nested dictionary: a dictionary's order is its own instance's, so two
            // equal dictionaries of two keys can print in different orders (seen once in CI).
            loggers[index][metadataKey: "user"] = .dictionary(["roles": .array(["a", "b"])])
            loggers[index].warning("with the logger's metadata")
            loggers[index].error("a line's own value wins", metadata: ["user": "own", "extra": "1"])
            loggers[index][metadataKey: "user"] = nil
            loggers[index].critical("a key removed", source: "HeraldTests")
        }
        #expect(deferred.withoutTimestamps.count == 4)
        #expect(deferred.withoutTimestamps == stream.withoutTimestamps)
        #expect(deferred.withoutTimestamps.last == " critical herald.test: hb.request.id=r-1 [HeraldTests] a key removed\n")
    }

    @Test func eachCopyOfALoggerKeepsItsOwnMetadata() {
        let lines = Lines()
        var base = Logger(label: "l") { label in DeferredMetadataLogHandler(label: label, stream: lines) }
        base[metadataKey: "a"] = "1"
        var request = base
        request[metadataKey: "hb.request.id"] = "r-2"
        #expect(base[metadataKey: "hb.request.id"] == nil)
        #expect(request[metadataKey: "a"] == "1")
        base.info("base")
        request.info("request")
        #expect(lines.withoutTimestamps == [" info l: a=1 [HeraldCoreTests] base\n", " info l: a=1 hb.request.id=r-2 [HeraldCoreTests] request\n"])
    }
}
