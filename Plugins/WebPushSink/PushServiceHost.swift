import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a subscription's endpoint host names, for refusing endpoints that point into the
/// operator's own network.
///
/// A subscription is whatever the client registering it sent, so without this check anyone who
/// may register a device could have Herald POST to `https://10.0.0.7/…` or to a service on
/// Herald's own loopback interface and read the outcome in the device's `last_error`. Push
/// services are on the public internet. Literal addresses (and `localhost`) are judged here; a
/// name by what it resolves to (``PushServiceResolver``), at registration when the answer comes
/// quickly and before every send.
enum PushServiceHost {
    /// Whether `host` is private by its spelling alone: `localhost`, or a literal IPv4/IPv6
    /// address that is not globally routable (loopback, private (RFC 1918, IPv6 unique local),
    /// link-local, shared address space (RFC 6598), unspecified, or IPv4-mapped forms of
    /// those). Nil for a name, which the addresses it resolves to decide.
    static func spelledVerdict(_ host: String) -> Bool? {
        let name = normalized(host)
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        return literalAddress(name).map(isPrivate(address:))
    }

    /// `host` lower-cased, without brackets, trailing dots or an IPv6 zone (`fe80::1%eth0`
    /// names the interface, not the address).
    static func normalized(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        if let zone = name.firstIndex(of: "%") { name = String(name[..<zone]) }
        return name
    }

    /// An address (4 or 16 bytes) as text: dotted IPv4, or IPv6 as eight groups of hex.
    static func text(address: [UInt8]) -> String {
        address.count == 4
            ? address.map(String.init).joined(separator: ".")
            : stride(from: 0, to: address.count - 1, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }.joined(
                separator: ":")
    }

    /// The address `name` spells (4 or 16 bytes), or nil for a name to resolve.
    static func literalAddress(_ name: String) -> [UInt8]? {
        ipv4(name) ?? ipv6(name)
    }

    /// Whether a resolved or literal address (4 or 16 bytes) is not globally routable.
    static func isPrivate(address: [UInt8]) -> Bool {
        switch address.count {
        case 4: isPrivate(address)
        case 16: isPrivate(v6: address)
        default: true
        }
    }

    private static func isPrivate(_ a: [UInt8]) -> Bool {
        switch (a[0], a[1], a[2]) {
        case (0, _, _), (10, _, _), (127, _, _): true
        case (100, 64...127, _): true // shared address space (carrier NAT)
        case (169, 254, _): true
        case (172, 16...31, _): true
        case (192, 168, _): true
        case (192, 0, 0), (192, 0, 2), (198, 51, 100), (203, 0, 113): true // IETF assignments, documentation
        case (198, 18...19, _): true // benchmarking networks
        default: a[0] >= 224 // multicast and reserved
        }
    }

    private static func isPrivate(v6 a: [UInt8]) -> Bool {
        if a.allSatisfy({ $0 == 0 }) { return true } // ::
        if a[0..<15].allSatisfy({ $0 == 0 }) && a[15] == 1 { return true } // ::1
        if a[0] & 0xfe == 0xfc { return true } // fc00::/7, unique local
        if a[0] == 0xfe && a[1] & 0xc0 == 0x80 { return true } // fe80::/10, link-local
        if a[0] == 0xff { return true } // multicast
        // ::ffff:a.b.c.d (IPv4-mapped) and ::a.b.c.d (IPv4-compatible) reach the IPv4 address,
        // and so do 64:ff9b::a.b.c.d (NAT64, RFC 6052) and 2002:aabb:ccdd:: (6to4).
        if a[0..<10].allSatisfy({ $0 == 0 }) && ((a[10] == 0xff && a[11] == 0xff) || (a[10] == 0 && a[11] == 0)) {
            return isPrivate(Array(a[12..<16]))
        }
        if a[0..<4] == [0x00, 0x64, 0xff, 0x9b] && a[4..<12].allSatisfy({ $0 == 0 }) { return isPrivate(Array(a[12..<16])) }
        if a[0] == 0x20 && a[1] == 0x02 { return isPrivate(Array(a[2..<6])) }
        if a[0..<4] == [0x20, 0x01, 0x0d, 0xb8] { return true } // documentation
        return false
    }

    /// inet_aton, not inet_pton: the resolver behind the HTTP client also takes the old forms
    /// (`127.1`, `0x7f000001`, `2130706433`), so they must be judged as the address they reach.
    private static func ipv4(_ text: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_aton(text, &address) != 0 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    private static func ipv6(_ text: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }
}

/// What ``PushServiceResolver`` makes of a host.
enum HostJudgement: Equatable, Sendable {
    /// Spelled as, or resolving only to, public addresses.
    case publicHost
    /// Spelled as, or resolving to at least one, loopback, private or link-local address.
    case privateHost
    /// Not judged now: ``PushServiceResolver/concurrentLookups`` other names are being looked
    /// up, or the answer is slower than the caller would wait.
    case busy
    /// The name resolved to no address. Not remembered, and nothing is sent to it: the client
    /// would look it up again when it connects, and a DNS server that failed the judging lookup
    /// could answer that one with a private address.
    case unresolved
}

/// Judges an endpoint's host by the addresses it resolves to, before the HTTP client connects:
/// a name such as one in `/etc/hosts` or a public DNS name pointing at 127.0.0.1 reaches the
/// operator's network as surely as the literal address. The sink then connects to an address
/// this lookup judged (``PinnedPushClients``), never resolving the name again, so a DNS server
/// that answers differently the second time (rebinding) cannot turn a send inward.
final class PushServiceResolver: Sendable {
    /// The addresses (4 or 16 bytes each) a name resolves to; none when it does not resolve.
    typealias Resolve = @Sendable (String) async -> [[UInt8]]

    private struct Verdict {
        var isPrivate: Bool
        var until: ContinuousClock.Instant
        var addresses: [[UInt8]]
        /// The host accepted a send: it carries live subscriptions, and keeps its verdict
        /// when made-up names fill the table.
        var carriesSubscriptions = false
    }

    private let resolve: Resolve
    private let lifetime: Duration
    private let verdicts = Mutex<[String: Verdict]>([:])
    /// The lookups running, by name: concurrent sends to a host not yet judged wait for one.
    private let lookups = Mutex<[String: Task<HostJudgement, Never>]>([:])
    /// Push services are a handful of hosts: a verdict is kept for a minute (`lifetime`), so a
    /// push costs no lookup; verdicts past their use are dropped when subscriptions name more
    /// hosts than this, and every verdict if none is.
    static let remembered = 1_024
    /// How long past its lifetime a verdict is still answered while a new lookup of the name
    /// runs (or cannot start: every lookup slot taken by slow names). Sends to a known push
    /// service never wait on DNS, so names whose DNS servers never answer, which anyone who may
    /// register a subscription can name, cannot hold back the pushes to Google's or Mozilla's.
    static let staleLifetime = Duration.seconds(600)
    /// Names looked up at once, at most. A lookup holds one of two threads for as long as the
    /// DNS server takes, so without a bound anyone who may register a device could queue
    /// lookups of slow names ahead of every push service's; past it a name is not judged now.
    static let concurrentLookups = 64

    init(resolve: @escaping Resolve = PushServiceResolver.systemResolve, lifetime: Duration = .seconds(60)) {
        self.resolve = resolve
        self.lifetime = lifetime
    }

    /// Whether `host` is private, literally or by any address it resolves to; ``HostJudgement/busy``
    /// when ``concurrentLookups`` other names are being looked up.
    func judgement(of host: String) async -> HostJudgement {
        let name = PushServiceHost.normalized(host)
        if let known = known(name) { return known }
        let lookup = lookups.withLock { lookups -> Task<HostJudgement, Never>? in
            if let running = lookups[name] { return running }
            guard lookups.count < Self.concurrentLookups else { return nil }
            let started = Task { await self.lookUp(name) }
            lookups[name] = started
            return started
        }
        // A verdict past its lifetime is answered while the lookup renews it.
        if let stale = stale(name) { return stale }
        return await lookup?.value ?? .busy
    }

    private func lookUp(_ name: String) async -> HostJudgement {
        let addresses = await resolve(name)
        guard !addresses.isEmpty else {
            lookups.withLock { $0[name] = nil }
            return .unresolved
        }
        let isPrivate = addresses.contains(where: PushServiceHost.isPrivate(address:))
        let now = ContinuousClock.now
        verdicts.withLock { verdicts in
            let carried = verdicts[name]?.carriesSubscriptions ?? false
            if verdicts.count >= Self.remembered {
                verdicts = verdicts.filter { $0.value.carriesSubscriptions || $0.value.until + Self.staleLifetime > now }
            }
            // Registrations can name any number of hosts: those that took sends stay.
            if verdicts.count >= Self.remembered { verdicts = verdicts.filter { $0.value.carriesSubscriptions } }
            if verdicts.count >= Self.remembered { verdicts.removeAll() }
            verdicts[name] = Verdict(isPrivate: isPrivate, until: now + lifetime, addresses: addresses, carriesSubscriptions: carried)
        }
        // After the verdict is stored, so a caller arriving now finds one or the other.
        lookups.withLock { $0[name] = nil }
        return isPrivate ? .privateHost : .publicHost
    }

    /// `host` accepted a send: its verdict outlasts names nobody sends to.
    func carriesSubscriptions(_ host: String) {
        let name = PushServiceHost.normalized(host)
        verdicts.withLock { $0[name]?.carriesSubscriptions = true }
    }

    /// Verdicts remembered now, for tests.
    var rememberedCount: Int { verdicts.withLock { $0.count } }

    /// Whether `host` has a verdict remembered (fresh or stale), for tests.
    func remembers(_ host: String) -> Bool { verdicts.withLock { $0[PushServiceHost.normalized(host)] != nil } }

    /// The judgement of a normalized `name` without a lookup: from its spelling, or remembered
    /// within its lifetime.
    private func known(_ name: String) -> HostJudgement? {
        let now = ContinuousClock.now
        guard let isPrivate = PushServiceHost.spelledVerdict(name) ?? verdicts.withLock({ $0[name] }).flatMap({ $0.until > now ? $0.isPrivate : nil })
        else { return nil }
        return isPrivate ? .privateHost : .publicHost
    }

    /// A remembered verdict of `name` past its lifetime, within ``staleLifetime`` of it.
    private func stale(_ name: String) -> HostJudgement? {
        let now = ContinuousClock.now
        guard let verdict = verdicts.withLock({ $0[name] }), verdict.until + Self.staleLifetime > now else { return nil }
        return verdict.isPrivate ? .privateHost : .publicHost
    }

    /// The addresses `host` spells, or those its last lookup gave while its verdict is
    /// remembered (stale ones included); none otherwise. Never looks a name up.
    func knownAddresses(of host: String) -> [[UInt8]] {
        let name = PushServiceHost.normalized(host)
        if let literal = PushServiceHost.literalAddress(name) { return [literal] }
        let now = ContinuousClock.now
        return verdicts.withLock { verdicts in
            guard let verdict = verdicts[name], verdict.until + Self.staleLifetime > now else { return [] }
            return verdict.addresses
        }
    }

    /// ``judgement(of:)``, or ``HostJudgement/busy`` when a lookup's answer takes longer than
    /// `limit` (the lookup goes on, and its verdict is remembered for the next call).
    func judgement(of host: String, within limit: Duration) async -> HostJudgement {
        if let known = known(PushServiceHost.normalized(host)) { return known }
        return await withCheckedContinuation { continuation in
            let answer = FirstAnswer(continuation)
            let timer = Task {
                try? await Task.sleep(for: limit)
                answer.resume(returning: .busy)
            }
            Task {
                let judgement = await self.judgement(of: host)
                timer.cancel()
                answer.resume(returning: judgement)
            }
        }
    }

    /// Resumes a continuation with the first of several answers.
    private final class FirstAnswer: Sendable {
        private let continuation: Mutex<CheckedContinuation<HostJudgement, Never>?>

        init(_ continuation: CheckedContinuation<HostJudgement, Never>) {
            self.continuation = Mutex(continuation)
        }

        func resume(returning answer: HostJudgement) {
            continuation.withLock { $0.take() }?.resume(returning: answer)
        }
    }

    /// `getaddrinfo`, which may wait seconds for a DNS server, on threads of its own: not a
    /// concurrency thread, and not NIO's shared blocking pool, where subscriptions naming many
    /// slow hosts would hold up the server's file reads.
    static let systemResolve: Resolve = { name in
        (try? await lookups.runIfActive { addresses(of: name) }) ?? []
    }

    private static let lookups: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()

    private static func addresses(of name: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var node = list
        while let entry = node {
            if let socketAddress = entry.pointee.ai_addr {
                switch entry.pointee.ai_family {
                case AF_INET:
                    var address = socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                    addresses.append(withUnsafeBytes(of: &address) { Array($0) })
                case AF_INET6:
                    var address = socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                    addresses.append(withUnsafeBytes(of: &address) { Array($0) })
                default:
                    break
                }
            }
            node = entry.pointee.ai_next
        }
        return addresses
    }
}
