public import Foundation

#if canImport(Security)
    import Security
#endif

/// Where an anonymous device keeps the secret Herald answers at its first sign-up
/// (docs/heraldkit.md "Sign-in"): whoever holds it can sign in as that device's user, so it
/// belongs in the platform's keychain, not in the app's database.
public protocol DeviceSecretStore: Sendable {
    /// The secret, or nil before the first sign-up.
    func load() throws -> String?
    /// Keeps the secret, replacing any other.
    func save(_ secret: String) throws
    /// Forgets it (signing out of an anonymous account for good).
    func remove() throws
}

/// A file readable and writable by its owner only (0600), for Linux, where there is no keychain.
public struct FileSecretStore: DeviceSecretStore {
    /// The file.
    public let url: URL

    /// A store in `url`; its folder must exist.
    public init(url: URL) {
        self.url = url
    }

    public func load() throws -> String? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        let text = try String(contentsOf: url, encoding: .utf8)
        return text.isEmpty ? nil : text
    }

    public func save(_ secret: String) throws {
        // Created 0600 before the secret is written, so it is never readable by others.
        if !FileManager.default.fileExists(atPath: url.path) {
            guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: url.path])
            }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(secret.utf8))
        try handle.synchronize()
    }

    public func remove() throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }
}

#if canImport(Security)
    /// The platform's keychain: a generic password item, this device only, readable after the
    /// first unlock (so background refreshes can sign in).
    public struct KeychainSecretStore: DeviceSecretStore {
        /// The item's service; one app may keep several Herald deployments apart by it.
        public let service: String

        /// A store under `service`.
        public init(service: String = "HeraldKit.device-secret") {
            self.service = service
        }

        private var query: [String: Any] {
            [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: "device"]
        }

        public func load() throws -> String? {
            var query = self.query
            query[kSecReturnData as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            if status == errSecItemNotFound { return nil }
            guard status == errSecSuccess, let data = item as? Data else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(status)) }
            return String(decoding: data, as: UTF8.self)
        }

        public func save(_ secret: String) throws {
            try remove()
            var item = query
            item[kSecValueData as String] = Data(secret.utf8)
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let status = SecItemAdd(item as CFDictionary, nil)
            guard status == errSecSuccess else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(status)) }
        }

        public func remove() throws {
            let status = SecItemDelete(query as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(status)) }
        }
    }
#endif
