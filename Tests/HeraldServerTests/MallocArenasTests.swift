import HeraldProcessTuning
import Testing

struct MallocArenasTests {
    @Test func oneArenaPerCoreByDefault() {
        #expect(MallocArenas.limit(environment: [:], cores: 2) == 2)
        #expect(MallocArenas.limit(environment: ["HOME": "/root"], cores: 16) == 16)
        #expect(MallocArenas.limit(environment: [:], cores: 0) == 1, "a machine reporting no cores still gets an arena")
    }

    @Test func theOperatorsChoiceIsLeftAlone() {
        #expect(MallocArenas.limit(environment: ["MALLOC_ARENA_MAX": "8"], cores: 2) == nil)
        #expect(MallocArenas.limit(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=4"], cores: 2) == nil)
        #expect(MallocArenas.limit(environment: ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"], cores: 2) == 2, "other tunables do not count")
    }
}
