"""profiling.launches: trace events from a worker -> launch records (synthetic events)."""
import json

import pytest

from kernelgate.profiling import launches
from kernelgate.profiling.launches import MARKER


def marker(i, ts, dur, tid=1):
    return {"name": f"{MARKER}.{i}", "cat": "user_annotation", "ts": ts, "dur": dur, "tid": tid, "args": {}}


def kernel(name, ts, dur, grid=(128, 1, 1), block=(256, 1, 1), regs=32, smem=0, stream=7):
    return {"name": name, "cat": "kernel", "ts": ts, "dur": dur, "tid": stream,
            "args": {"grid": list(grid), "block": list(block), "registers per thread": regs, "shared memory": smem,
                     "stream": stream, "device": 0}}


def test_cuda_trace_gives_launch_records_counts_gaps_and_persistent_kernels():
    events = []
    for i, t0 in enumerate((1000.0, 2000.0)):
        events += [marker(i, t0, 100.0),
                   kernel("void at::native::elementwise<float>(int, float*)", t0 + 10, 10, smem=1024),
                   kernel("triton_red_fused_0", t0 + 30, 60, grid=(132, 1, 1), block=(128, 1, 1), regs=96),
                   {"name": "Memcpy DtoD", "cat": "gpu_memcpy" if i else "Memcpy", "ts": t0 + 95, "dur": 2, "tid": 7,
                    "args": {"bytes": 4096, "stream": 7}}]
    events += [{"name": "junk"}, "not a dict", {"name": "k", "cat": "kernel", "ts": "x", "dur": 1},
               kernel("nan_kernel", float("nan"), 1.0)]
    p = launches.parse(events, "cuda", sm_count=132)
    assert p.forwards == 2 and p.kernels_applicable
    assert p.kernels_per_forward == 2 and p.launches_per_forward == 3
    first = p.launches[0]
    assert first.name.startswith("void at::native::elementwise")
    assert (first.grid, first.block, first.registers, first.shared_memory, first.stream) == \
        ((128, 1, 1), (256, 1, 1), 32, 1024, 7)
    assert first.forward == 0 and first.start_us == pytest.approx(10)
    assert p.persistent_kernels() == ["triton_red_fused_0"]          # 132 blocks on 132 SMs for 60 us
    assert not first.persistent
    assert p.busy_us == (72.0, 72.0) and p.forward_us == (100.0, 100.0)
    assert p.gap_share == pytest.approx(0.28)
    table = {s.name: s for s in p.stats()}
    assert table["triton_red_fused_0"].per_forward == 1 and table["triton_red_fused_0"].total_us == 60
    doc = p.to_json()
    assert doc["records_total"] == 6 and doc["records"][1]["persistent"] is True
    json.dumps(doc)


def test_parse_without_markers_is_an_error():
    with pytest.raises(ValueError, match="markers"):
        launches.parse([kernel("k", 0, 1)], "cuda")


def test_cpu_trace_keeps_top_level_ops_only():
    events = [marker(0, 0, 100), {"name": "aten::linear", "cat": "cpu_op", "ts": 10, "dur": 50, "tid": 1},
              {"name": "aten::addmm", "cat": "cpu_op", "ts": 15, "dur": 40, "tid": 1},
              {"name": "aten::gelu", "cat": "cpu_op", "ts": 70, "dur": 20, "tid": 1},
              {"name": "aten::other_thread", "cat": "cpu_op", "ts": 20, "dur": 5, "tid": 2}]
    p = launches.parse(events, "cpu")
    assert not p.kernels_applicable
    assert [x.name for x in p.launches] == ["aten::linear", "aten::gelu"]
    assert all(x.kind == "op" and x.grid is None for x in p.launches)
    assert p.gap_share == pytest.approx(0.3)
    assert any("not applicable" in n for n in p.notes)
