"""How the timer sees the side-stream exploit: the timer's loop vs a host clock vs the profiler.

    python benchmarks/diag_side_stream.py [--out result.json]
"""
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelgate.gate import timing  # noqa: E402


def _loop(model, make, plan, device, flush) -> list[float]:
    """gate/timing.timed_loop's in-process samples, one per step of the plan."""
    samples: list[float] = []
    timing.timed_loop(model, make, plan, device, flush, lambda i, xs, out, ms: samples.append(ms))
    return samples
from kernelgate.workload import import_file  # noqa: E402

from kernelgate.versions import conditions  # noqa: E402

W = Path(__file__).resolve().parent / "workloads"
doc = {"conditions": conditions("cuda"), "workload": "linear_gelu (8192x4096 @ 4096x4096 fp32 + GELU)", "rows": {}}
ref = import_file(str(W / "linear_gelu.py"))
for name in ("honest", "side_stream"):
    mod = import_file(str(W / f"linear_gelu_{name}.py"))
    m = mod.ModelNew(*ref.get_init_inputs()).cuda().eval()
    pool = [[x.cuda() for x in ref.get_inputs()]]
    ok = [True]
    r = [timing.rms(pool[0], ok)]
    make = lambda j, s, seed: timing.fresh(pool[j], s, seed, ok, r[j], "cuda")
    plan = [(0, 1.0, k) for k in range(10)]
    timing.warm_up(m, make, plan, "cuda", 200, 3)
    s = _loop(m, make, plan, "cuda", timing.flush_bytes("cuda"))
    # host clock around call + sync
    host = []
    with torch.no_grad():
        for step in plan:
            xs = make(*step)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            m(*xs)
            torch.cuda.synchronize()
            host.append((time.perf_counter() - t0) * 1e3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof, torch.no_grad():
        xs = make(0, 1.0, 99)
        m(*xs)
        torch.cuda.synchronize()
    ev = [(e.name[:50], round(e.device_time / 1e3, 3)) for e in prof.events() if e.device_time > 0][:8]
    doc["rows"][name] = {"timer_ms": s, "host_ms": host, "kernels_ms": ev}
    print(name, "timer", [round(v, 3) for v in s[:5]], "host", [round(v, 3) for v in host[:5]],
          "tf32", torch.backends.cuda.matmul.allow_tf32, "kernels", ev, flush=True)

if "--out" in sys.argv:
    Path(sys.argv[sys.argv.index("--out") + 1]).write_text(json.dumps(doc, indent=1))
