import Foundation
import HeraldCore
import Testing

@Suite struct ObjectIDTests {
    @Test func generatedIDsAre24LowercaseHexAndTimeOrdered() {
        let generator = ObjectIDGenerator()
        let early = generator.next(at: Date(timeIntervalSince1970: 1_649_431_061))
        let late = generator.next(at: Date(timeIntervalSince1970: 1_649_431_062))
        #expect(early.hex.count == 24)
        #expect(early.hex.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(early.hex.hasPrefix("62505215")) // Pong's example id starts with this second
        #expect(early < late)
        #expect(early.date == Date(timeIntervalSince1970: 1_649_431_061))
    }

    @Test func idsFromOneSecondAreDistinctAndIncreasing() {
        let generator = ObjectIDGenerator()
        let now = Date()
        let ids = (0..<1000).map { _ in generator.next(at: now) }
        #expect(Set(ids).count == 1000)
    }

    @Test(arguments: ["", "62505215624257b417055bc", "62505215624257B417055BC4", "62505215624257b417055bcg", "62505215624257b417055bc44"])
    func parsingRejectsAnythingButLowercaseHex(_ text: String) {
        #expect(ObjectID(text) == nil)
    }

    @Test func parsingAcceptsTheSpecExample() {
        #expect(ObjectID("62505215624257b417055bc4")?.hex == "62505215624257b417055bc4")
    }
}

@Suite struct TimestampTests {
    @Test func formatsMicrosecondsInUTC() {
        #expect(Timestamp.format(microseconds: 1_649_431_061_900_560) == "2022-04-08T15:17:41.900560Z")
        #expect(Timestamp.format(microseconds: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(Timestamp.format(microseconds: 951_782_400_000_001) == "2000-02-29T00:00:00.000001Z")
    }

    @Test func parsesWithAndWithoutFraction() throws {
        let date = try #require(Timestamp.parse("2022-04-08T15:17:41.900Z"))
        #expect(Timestamp.microseconds(date) == 1_649_431_061_900_000)
        #expect(Timestamp.parse("2022-04-08T15:17:41Z") != nil)
        #expect(Timestamp.parse("yesterday") == nil)
    }
}
