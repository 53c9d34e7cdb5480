import HeraldCore
import ServiceLifecycle

/// Keeps the store open while the service group runs and closes it when the group ends, by a
/// graceful shutdown or any failure. The store is opened before the group starts (migrations
/// and the bootstrap key come first), so this service owns only its end; listed first, it is
/// the last to stop.
struct StorageService: Service {
    let store: any HeraldStorage

    func run() async throws {
        // Returns at graceful shutdown, throws when the group is cancelled: either way, close.
        try? await gracefulShutdown()
        await store.close()
    }
}
