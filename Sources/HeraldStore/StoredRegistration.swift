import Foundation
import HeraldCore

/// One device registration, for a group commit (both engines).
struct StoredRegistration: Sendable {
    var userID: String
    var registration: DeviceRegistration
    /// ``StoredRecords/storedAddress(_:)`` of the registration.
    var stored: (json: String?, options: String?)
    var newID: ObjectID
    var at: Date
    /// The user's devices to keep at most, counting this one; nil for no limit.
    var keep: Int?

    /// Encoded before it joins a group commit, so a bad address fails only its own request.
    init(userID: String, registration: DeviceRegistration, newID: ObjectID, at: Date, keep: Int?) throws {
        self.userID = userID
        self.registration = registration
        self.stored = try StoredRecords.storedAddress(registration)
        self.newID = newID
        self.at = at
        self.keep = keep
    }
}
