import ArgumentParser

/// The emulators' `--port`: read as an `Int` and handed to the socket as 16 bits, 70000 listened
/// on 4464 without a word.
enum EmulatorPort {
    static func validate(_ port: Int) throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be 0-65535 (0 picks a free one)") }
    }
}
