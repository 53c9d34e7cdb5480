/// What the migrations that re-key devices say of the rows they merge.
enum DeviceKeys {
    /// The reason a merged row's queued pushes fail: the device keeps its own.
    static let mergedReason = "the same device was registered again with its APNs token in another letter case"
}
