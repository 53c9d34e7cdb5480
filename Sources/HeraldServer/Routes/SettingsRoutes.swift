import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// `GET` and `PATCH /api/notifications/settings`: the acting user's switches, in Pong's shape
/// (`enabled`, `types`, `delivery`, `quiet_hours`) with the channel preferences beside them
/// (docs/routing.md, "Channels and preferences").
struct SettingsRoutes {
    let store: any UserStore
    let types: NotificationTypes
    /// The channels users choose on this server (``SinkRegistry/choosableChannels``).
    let channels: [String]
    /// The operator's defaults and critical types.
    let preferences: ChannelPreferences

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/api/notifications/settings", getSettings)
        table.add(router, .patch, "/api/notifications/settings", patchSettings)
    }

    @Sendable func getSettings(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        return try JSONBody.response(document(try await store.settings(userID: userID)))
    }

    @Sendable func patchSettings(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let patch = try await JSONBody.decode(SettingsPatch.self, from: request, context: context, knownFields: SettingsPatch.fieldNames)
        let (types, channels, preferences) = (self.types, self.channels, self.preferences)
        // A bad value throws inside the transaction, which rolls back: nothing changes.
        let settings = try await store.updateSettings(userID: userID) { settings in
            try patch.apply(to: &settings, types: types, channels: channels, preferences: preferences)
        }
        return try JSONBody.response(document(settings))
    }

    func document(_ settings: UserSettings) -> SettingsDocument {
        SettingsDocument(settings: settings, channels: channels, locked: preferences.locked(channels: channels))
    }
}

/// The settings as GET and PATCH answer them: the stored settings, every channel users choose
/// here in `channels` (on unless the user turned it off), and what the user may not turn off.
struct SettingsDocument: Encodable {
    var settings: UserSettings
    var channels: [String]
    var locked: [LockedPreference]

    enum CodingKeys: String, CodingKey {
        case enabled, types, channels, preferences, delivery, locked, timezone
        case quietHours = "quiet_hours"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        var switches = settings.channels
        for channel in channels where switches[channel] == nil { switches[channel] = true }
        try container.encode(settings.enabled, forKey: .enabled)
        try container.encode(settings.types, forKey: .types)
        try container.encode(switches, forKey: .channels)
        try container.encode(settings.allPreferences, forKey: .preferences)
        try container.encode(settings.delivery, forKey: .delivery)
        try container.encode(settings.quietHours, forKey: .quietHours) // explicit null: apps see the key
        try container.encode(settings.timezone, forKey: .timezone)
        try container.encode(locked, forKey: .locked)
    }
}
