import Foundation

/// Blocking work (socket reads and writes, sleeps) on a thread of its own. On Swift's
/// cooperative pool, two threads on two cores, two such calls blocked every thread, so an
/// in-process server they talked to could not answer them, and every other test waited.
public enum OwnThread {
    public static func run<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}
