import Testing

@testable import HeraldCore

@Suite struct StorageBackoffTests {
    @Test func pausesDoubleFromATenthOfASecondUpToTheCap() {
        let pauses = (0...8).map { StorageBackoff.pause(after: $0, cap: .seconds(5)) }
        #expect(pauses == [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000].map { Duration.milliseconds($0) })
        #expect(StorageBackoff.pause(after: 4, cap: .seconds(1)) == .seconds(1))
    }

    @Test func anyFailureCountGivesAPauseWithinBounds() {
        #expect(StorageBackoff.pause(after: -1, cap: .seconds(5)) == .milliseconds(100))
        #expect(StorageBackoff.pause(after: .max, cap: .seconds(5)) == .seconds(5))
    }
}
