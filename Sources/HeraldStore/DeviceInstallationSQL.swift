/// The app installation a device was registered from (``Device/installationID``), as both
/// engines store it.
enum DeviceInstallationSQL {
    static let column = "ALTER TABLE devices ADD COLUMN installation_id TEXT"

    /// The `SET` clause of a registration that finds the device stored: the installation given,
    /// or, when a backend registers it again (none given), the one stored as long as the device
    /// stays with its user. A device that moves to another user keeps nothing of the old one's.
    static func update(given: String, owner: String) -> String {
        "installation_id = COALESCE(\(given), CASE WHEN devices.user_id = \(owner) THEN devices.installation_id END)"
    }
}
