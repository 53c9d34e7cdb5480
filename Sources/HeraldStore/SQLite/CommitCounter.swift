import GRDB
import HeraldCore
import Synchronization

/// Counts this process's commits to the SQLite database. One process owns a SQLite database
/// (several processes share PostgreSQL), so a value read before a read and unchanged after it
/// means nothing was committed in between: what the read saw is still current. The pull's 304
/// path answers from memory that way instead of reading.
package final class CommitCounter: TransactionObserver, Sendable {
    private let commits = Atomic<Int>(0)

    package var value: Int { commits.load(ordering: .acquiring) }

    package func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    package func databaseDidChange(with event: DatabaseEvent) {}
    package func databaseDidCommit(_ db: Database) { commits.add(1, ordering: .releasing) }
    package func databaseDidRollback(_ db: Database) {}
}
