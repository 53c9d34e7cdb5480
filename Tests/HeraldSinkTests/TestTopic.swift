import Foundation
import HeraldCore
import HeraldStore

/// A channel, an area and an opt-in Alert subject in `store`: the topic a fan-out test sends to.
enum TestTopic {
    static func make(in store: SQLiteStore, ids: ObjectIDGenerator) async throws -> String {
        let channel = Channel(id: ids.next(), name: "c", desc: "")
        let area = Area(id: ids.next(), name: "a", desc: "")
        let subjectID = ids.next()
        let key = TopicKey(channelID: channel.id, areaID: area.id, subjectID: subjectID).description
        try await store.createChannel(channel)
        _ = try await store.createArea(area, channelID: channel.id)
        _ = try await store.createSubject(
            Subject(id: subjectID, name: "s", desc: "", topicKey: key, opt: .init(level: .optIn, distribution: .alert)), channelID: channel.id, areaID: area.id)
        return key
    }
}
