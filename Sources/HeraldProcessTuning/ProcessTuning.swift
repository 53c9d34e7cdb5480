/// What a server process tunes about itself before it starts: glibc's heaps and the open-file
/// limit. The `herald` executable calls it first thing in `herald serve`; an operator's own
/// server binary (Examples/OperatorSinks) calls it too. The libraries never do: embedding
/// HeraldServer in another program changes nothing process-wide (docs/architecture.md).
public enum ProcessTuning {
    /// One malloc arena per core (``MallocArenas``) and the soft limit on open files raised to
    /// the hard one (``OpenFileLimit``).
    public static func applyForServer() {
        MallocArenas.limitToOnePerCore()
        OpenFileLimit.raiseToHardLimit()
    }
}
