// Herald's server with the built-in sinks plus `type: chat` and `type: ntfy`. Configured like `herald serve`:
// a YAML file (the first argument, or $HERALD_CONFIG) and HERALD_* environment variables.
import ChatSink
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import NtfySink

do {
    let file = CommandLine.arguments.dropFirst().first ?? ProcessInfo.processInfo.environment["HERALD_CONFIG"]
    let factories = SinkFactory.builtIn + [.chat, .ntfy]
    let configuration = try await HeraldConfiguration.load(configFile: file, shorthands: HeraldConfiguration.shorthands(of: factories))
    // What `herald serve` does to its process first: the libraries never touch it.
    ProcessTuning.applyForServer()
    let server = try await HeraldServer.start(configuration, factories: factories)
    try await server.run { port in
        // Unbuffered, so a script reading the pipe learns the port at once.
        FileHandle.standardOutput.write(Data("Herald listening on http://\(configuration.host):\(port)\n".utf8))
    }
} catch let error as HeraldError {
    FileHandle.standardError.write(Data("herald-chat: error: \(error.message)\n".utf8))
    exit(1)
}
