import PostgresNIO
import Testing

@testable import HeraldStore

/// The pools' options, which no functional test would notice going (docs/performance.md,
/// "Memory on PostgreSQL": postgres-nio 1.33 keeps every returned connection's idle and
/// keep-alive timers alive for their whole duration, so a long idle timeout or a keep-alive
/// ping costs memory per operation).
@Suite struct PostgresPoolOptionTests {
    @Test func primaryAndReplicaPoolsUseAShortIdleTimeoutNoKeepAliveAndTheirBound() throws {
        for setting in ["database", "database_read_url"] {
            let options = try PostgresStore.configuration(url: "postgres://herald@127.0.0.1:5432/herald", setting: setting, maxConnections: 7).options
            #expect(options.keepAliveBehavior == nil)
            #expect(options.connectionIdleTimeout == PostgresStore.connectionIdleTimeout && PostgresStore.connectionIdleTimeout <= .seconds(10))
            #expect(options.maximumConnections == 7)
        }
        #expect(try PostgresStore.configuration(url: "postgres://herald@127.0.0.1/herald", maxConnections: 1).options.maximumConnections == 2)
    }
}
