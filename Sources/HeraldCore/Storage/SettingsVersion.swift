public import Foundation

/// A user's settings as saved at one time, kept so an accepted notification is explained with
/// the settings in force when it was routed (``UserStore/settingsVersion(userID:at:)``).
public struct SettingsVersion: Sendable, Equatable {
    /// The settings.
    public var settings: UserSettings
    /// When they were saved; nil for settings saved before Herald kept versions (a database
    /// upgraded from an earlier release), in force since before any notification it stores.
    public var savedAt: Date?

    /// A version.
    public init(settings: UserSettings, savedAt: Date?) {
        self.settings = settings
        self.savedAt = savedAt
    }
}
