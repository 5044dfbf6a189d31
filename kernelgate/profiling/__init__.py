"""Profiling: what a forward launches, what bounds it, its machine code, its roofline floor.

A leaf package: it imports only itself and the leaf modules records, errors and targets (which imports
leaves only), never the gate, the search, the proposers or the sandbox (tests/test_layers.py checks it).
Whatever runs a model, a gate session's worker, is passed in; api.profile creates the sessions.

    records.py      Launch, KernelStats, Profile: launch records of profiled forwards (shared by all the
                    modules here); Side, Report: what `kernelgate profile` returns
    launches.py     the worker's `profile` request, and its trace events parsed into a Profile
    roofline.py     FLOPs and bytes of a forward -> the least time on a machine (Floor)
    bottleneck.py   memory-, compute-, launch- or latency-bound, in one line with its evidence
    fusion.py       what a fusion is predicted to save; the hook (FusionSource) through which a strategy
                    library says what its strategies fuse
    fingerprint.py  opcode histograms and launch multisets of a forward; distance between two of them
    summary.py      the search's signals on a verified candidate (bound, fingerprint, distance to the best)
"""
