import Foundation
import HeraldCore
import Testing

/// `send_at_local` (docs/timing.md): the forms it takes, and each recipient's instant in their
/// zone, DST gaps and repeats included.
struct LocalSendTimeTests {
    func zone(_ name: String) throws -> TimeZone { try #require(TimeZone(identifier: name)) }
    func instant(_ text: String) throws -> Date { try #require(Timestamp.parse(text)) }

    @Test func theTwoFormsParseAndNothingElse() {
        #expect(LocalSendTime("09:00")?.description == "09:00")
        #expect(LocalSendTime("23:59")?.description == "23:59")
        #expect(LocalSendTime("2026-12-01T09:05")?.description == "2026-12-01T09:05")
        #expect(LocalSendTime("2028-02-29T00:00") != nil, "a leap day")
        for bad in [
            "", "9:00", "24:00", "12:60", "09:00:00", "09-00", "2026-12-01", "2026-12-01 09:00", "2026-13-01T09:00", "2027-02-29T09:00",
            "2026-04-31T09:00", "2026-12-01T09:00Z", "+9:00", "０９:００",
        ] {
            #expect(LocalSendTime(bad) == nil, "\(bad)")
        }
    }

    @Test func theDailyFormIsTheNextOneInTheRecipientsZone() throws {
        let nine = try #require(LocalSendTime("09:00"))
        let now = try instant("2026-11-29T12:00:00Z")
        // 07:00 in Toronto: today's 09:00 there is still to come.
        #expect(nine.instant(in: try zone("America/Toronto"), notBefore: now) == (try instant("2026-11-29T14:00:00Z")))
        // 21:00 in Tokyo: tomorrow's.
        #expect(nine.instant(in: try zone("Asia/Tokyo"), notBefore: now) == (try instant("2026-11-30T00:00:00Z")))
        // 12:00 in UTC: 09:00 has passed.
        #expect(nine.instant(in: try zone("UTC"), notBefore: now) == (try instant("2026-11-30T09:00:00Z")))
        // Exactly the time: now.
        #expect(try #require(LocalSendTime("12:00")).instant(in: try zone("UTC"), notBefore: now) == now)
        // Half-hour zones.
        #expect(nine.instant(in: try zone("Asia/Kolkata"), notBefore: now) == (try instant("2026-11-30T03:30:00Z")))
    }

    @Test func theDatedFormIsThatWallClockThere() throws {
        let dated = try #require(LocalSendTime("2026-12-01T09:00"))
        let now = try instant("2026-11-29T12:00:00Z")
        #expect(dated.instant(in: try zone("Europe/Paris"), notBefore: now) == (try instant("2026-12-01T08:00:00Z")))
        #expect(dated.instant(in: try zone("Pacific/Kiritimati"), notBefore: now) == (try instant("2026-11-30T19:00:00Z")))
        #expect(dated.earliestInstant == (try instant("2026-11-30T19:00:00Z")), "the zone furthest ahead")
        #expect(try #require(LocalSendTime("09:00")).earliestInstant == nil)
    }

    @Test func aTimeADSTGapSkipsMovesToTheNextMinuteThatExists() throws {
        // New York springs forward at 02:00 on 2026-03-08: 02:30 does not exist; 03:00 EDT does.
        let gap = try #require(LocalSendTime("2026-03-08T02:30"))
        #expect(gap.instant(in: try zone("America/New_York"), notBefore: .distantPast) == (try instant("2026-03-08T07:00:00Z")))
        // The daily form on that day, from just before.
        let daily = try #require(LocalSendTime("02:30"))
        let before = try instant("2026-03-08T06:00:00Z") // 01:00 EST
        #expect(daily.instant(in: try zone("America/New_York"), notBefore: before) == (try instant("2026-03-08T07:00:00Z")))
    }

    @Test func aTimeThatOccursTwiceIsTheFirst() throws {
        // New York falls back at 02:00 EDT on 2026-11-01: 01:30 happens in EDT, then in EST.
        let twice = try #require(LocalSendTime("2026-11-01T01:30"))
        #expect(twice.instant(in: try zone("America/New_York"), notBefore: .distantPast) == (try instant("2026-11-01T05:30:00Z")))
        // Lord Howe moves by half an hour.
        let lordHowe = try #require(LocalSendTime("2026-04-05T01:45"))
        #expect(lordHowe.instant(in: try zone("Australia/Lord_Howe"), notBefore: .distantPast) == (try instant("2026-04-04T14:45:00Z")))
    }

    @Test func theValidatorRefusesWhatCannotBeSentNamingTheField() throws {
        let validator = NotificationValidator(types: try NotificationTypes(extra: []), resources: try ResourceResolver(publicBaseURL: "https://pong.example/"))
        let now = try instant("2026-11-29T12:00:00Z")
        func check(_ fields: String) throws -> (local: LocalSendTime?, refusal: String?) {
            let json = #"{"type": "generic", "title": "T", "user_ids": ["ann"], "# + fields + "}"
            let submission = try JSONDecoder().decode(NotificationSubmission.self, from: Data(json.utf8))
            do {
                return (try validator.localSendTime(of: submission, now: now), nil)
            } catch let error as HeraldError {
                return (nil, error.message)
            }
        }
        #expect(try check(#""send_at_local": "9am""#).refusal?.hasPrefix("'send_at_local'") == true)
        #expect(try check(#""send_at_local": "09:00""#).local == LocalSendTime("09:00"))
        #expect(try check(#""send_at_local": "09:00", "send_at": "2026-12-01T09:00:00Z""#).refusal?.hasPrefix("'send_at_local'") == true)
        #expect(try check(#""send_at_local": "09:00", "broadcast": true"#).refusal?.hasPrefix("'send_at_local'") == true)
        #expect(try check(#""send_at_local": "2027-11-30T09:00""#).refusal?.contains("a year ahead") == true)
        #expect(try check(#""send_at_local": "2027-11-29T09:00""#).local != nil, "within the year in the zone furthest ahead")
        #expect(try check(#""body": "B""#).local == nil, "none asked")
    }
}
