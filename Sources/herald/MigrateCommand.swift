import ArgumentParser
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import HeraldStore
import Synchronization

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create or upgrade the database schema, then exit.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        _ = try await common.openStore(ifMissing: .create)
        print("migrated")
    }
}
