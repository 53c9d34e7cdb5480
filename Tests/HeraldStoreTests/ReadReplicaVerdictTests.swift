import Foundation
import Testing

@testable import HeraldStore

/// How the read replica's watch decides, from the primary's WAL positions at recent instants and
/// what the replica has replayed, whether the replica is current (PostgresReadReplica).
@Suite struct ReadReplicaVerdictTests {
    let start = ContinuousClock.now

    func marks(_ positions: [(seconds: Double, position: UInt64)]) -> [PostgresReadReplica.Mark] {
        positions.map { PostgresReadReplica.Mark(instant: start + .seconds($0.seconds), position: WALPosition(offset: $0.position)) }
    }

    @Test func aReplicaThatReplayedTheNewestPositionIsCurrent() {
        var marks = marks([(0, 100), (0.25, 200), (0.5, 300)])
        let verdict = PostgresReadReplica.verdict(replayed: WALPosition(offset: 300), marks: &marks, now: start + .seconds(0.6), maxLag: .seconds(1))
        #expect(verdict == .usable)
        #expect(marks.map(\.position.offset) == [300], "older marks are not needed any more")
    }

    @Test func aReplicaIsCurrentWhileWhatItLacksIsNewerThanTheBound() {
        var marks = marks([(0, 100), (0.5, 200), (0.75, 300)])
        // It holds what the primary had at 0.5 s; at 1.2 s that is 0.7 s ago.
        let verdict = PostgresReadReplica.verdict(replayed: WALPosition(offset: 250), marks: &marks, now: start + .seconds(1.2), maxLag: .seconds(1))
        #expect(verdict == .usable)
        #expect(marks.map(\.position.offset) == [200, 300])
    }

    @Test func aReplicaStuckPastTheBoundIsNotUsedAndItsMarksStayFew() {
        var marks = marks((0..<40).map { (Double($0) * 0.25, UInt64(100 + $0)) })
        let verdict = PostgresReadReplica.verdict(replayed: WALPosition(offset: 100), marks: &marks, now: start + .seconds(10), maxLag: .seconds(1))
        #expect(verdict == .unusable("is more than 1.0 seconds behind the primary"))
        #expect(marks.count <= 6, "\(marks.count) marks kept for a stuck replica")
    }

    @Test func aReplicaBehindEveryMarkIsNotUsed() {
        var marks = marks([(0, 100), (0.25, 200)])
        let verdict = PostgresReadReplica.verdict(replayed: WALPosition(offset: 50), marks: &marks, now: start + .seconds(0.3), maxLag: .seconds(1))
        #expect(verdict != .usable)
    }

    @Test func walPositionsReadAsPostgreSQLPrintsThem() throws {
        #expect(WALPosition("16/B374D848")?.offset == 0x16_B374_D848)
        #expect(WALPosition("0/0")?.offset == 0)
        #expect(WALPosition("FFFFFFFF/FFFFFFFF")?.offset == UInt64.max)
        for bad in ["", "16", "16/", "/1", "1/2/3", "G/1", "100000000/0", "-1/0", "1/ 2"] {
            #expect(WALPosition(bad) == nil, "\(bad)")
        }
        #expect(try #require(WALPosition("1/0")) > (try #require(WALPosition("0/FFFFFFFF"))))
    }
}
