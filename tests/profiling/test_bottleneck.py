"""profiling.bottleneck: one line saying what bounds a forward, with its evidence."""
from kernelgate.profiling import bottleneck
from kernelgate.profiling.records import Launch, Profile
from kernelgate.profiling.roofline import Floor


def prof(kernels, wall_us, busy_us, device="cuda", sm_count=132, forwards=1):
    recs = tuple(Launch(n, "kernel" if device != "cpu" else "op", f, 0.0, d, grid=g, block=(128, 1, 1) if g else None)
                 for f in range(forwards) for n, d, g in kernels)
    return Profile(device, forwards, recs, (wall_us,) * forwards, (busy_us,) * forwards, sm_count)


MEM_FLOOR = Floor(compute_s=1e-5, memory_s=1e-3, floor_s=1e-3, bound="memory", derivation="", machine="h200")
COMPUTE_FLOOR = Floor(compute_s=2e-3, memory_s=1e-4, floor_s=2e-3, bound="compute", derivation="", machine="h200")


def test_launch_bound_line_names_kernels_and_gap_share():
    p = prof([(f"k{i}", 2.0, (64, 1, 1)) for i in range(41)], wall_us=222.0, busy_us=82.0)
    b = bottleneck.classify(MEM_FLOOR, p)
    assert b.kind == "launch"
    assert b.line == "launch-bound: 41 kernels, 63% of the forward between launches"
    assert b.evidence["kernels_per_forward"] == 41


def test_latency_bound_single_kernel_and_small_grids():
    one = bottleneck.classify(MEM_FLOOR, prof([("k", 3.0, (8, 1, 1))], wall_us=20.0, busy_us=3.0))
    assert one.kind == "latency" and one.line.startswith("latency-bound: 1 kernel")
    small = prof([("a", 40.0, (8, 1, 1)), ("b", 40.0, (16, 1, 1))], wall_us=85.0, busy_us=80.0)
    b = bottleneck.classify(Floor(0, 2e-6, 2e-6, "memory", "", "h200"), small)
    assert b.kind == "latency" and "fewer blocks than 132 SMs" in b.line


def test_memory_and_compute_bound_from_the_floor():
    busy = prof([("k", 1100.0, (4096, 1, 1))], wall_us=1110.0, busy_us=1100.0)
    m = bottleneck.classify(MEM_FLOOR, busy)
    assert m.kind == "memory" and m.line.startswith("memory-bound: floor 1 ms is the memory term")
    assert "90% of the floor" in m.line
    c = bottleneck.classify(COMPUTE_FLOOR, prof([("gemm", 2500.0, (4096, 1, 1))], 2510.0, 2500.0))
    assert c.kind == "compute" and c.line.startswith("compute-bound")
    assert bottleneck.classify(MEM_FLOOR, None).kind == "memory"


def test_unknown_without_a_floor():
    b = bottleneck.classify(None, prof([("k", 500.0, (4096, 1, 1))], 510.0, 500.0))
    assert b.kind == "unknown" and b.line.startswith("unknown")
    assert set(bottleneck.CLASSES) >= {"memory", "compute", "launch", "latency", "unknown"}


def test_cpu_launch_bound_speaks_of_ops():
    p = prof([("aten::add", 1.0, None)] * 5, wall_us=20.0, busy_us=5.0, device="cpu")
    b = bottleneck.classify(None, p)
    assert b.kind == "launch" and b.line == "launch-bound: 5 ops, 75% of the forward outside ops (Python and dispatch)"


def test_a_deep_network_of_small_kernels_is_expected_launch_bound_before_any_profile():
    """ResNet-101 on an H100: 345 call sites against a 0.32 ms floor (measured: 76% of eager's forward between
    launches); a VGG's 45 sites against 0.83 ms, or one op, is not."""
    from kernelgate.profiling import bottleneck
    from kernelgate.profiling.roofline import Floor

    def fl(s):
        return Floor(s, s / 10, s, "compute", "")
    assert bottleneck.expected(fl(322e-6), 345, 4e-6) == "launch"
    assert bottleneck.expected(fl(828e-6), 45, 4e-6) == ""
    assert bottleneck.expected(fl(1e-7), 1, 4e-6) == ""            # one op: latency, not launches
    assert bottleneck.expected(None, 345, 4e-6) == "" and bottleneck.expected(fl(322e-6), 345, None) == ""
