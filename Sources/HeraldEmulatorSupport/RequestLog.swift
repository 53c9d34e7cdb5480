import Foundation
import HeraldCore

/// Where an emulator prints a line per request it answers, or nothing. When quiet the line is
/// not even built: in a load test the emulator shares the cores with what it measures.
public struct RequestLog: Sendable {
    private let write: (@Sendable (String) -> Void)?

    /// Each line to `write`; nil prints nothing.
    public init(_ write: (@Sendable (String) -> Void)?) {
        self.write = write
    }

    public static let quiet = RequestLog(nil)

    /// Each line to standard output, unless `quiet`.
    public static func standardOutput(quiet: Bool) -> RequestLog {
        quiet ? .quiet : RequestLog { line in StandardStream.output.line(line) }
    }

    public func callAsFunction(_ line: @autoclosure () -> String) {
        write?(line())
    }
}
