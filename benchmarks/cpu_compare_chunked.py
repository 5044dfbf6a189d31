"""The gate's comparison of one large output with the fp64 oracle, whole-tensor (before) against chunked
(gate/correctness.py CHUNK), on the host, side by side in one process.

    python benchmarks/cpu_compare_chunked.py --mib 512 --reps 3 --out results/cpu_compare_chunked.json
    python benchmarks/cpu_compare_chunked.py --mib 4096 --compute cuda --out ...   # the lean plan: data on the
                                                                                  # host, slices computed on the GPU

The lean memory plan compares on the host; on the H200 a 6 GiB fp32 output took 27-47 s a trial there
(benchmarks/results/h200_lean_diag_2.json). The "before" path is the earlier code, kept here verbatim
(full-size fp64 copies of C and B, then full-size temporaries). Seconds per compare (derive + compare),
peak resident memory growth of each, and whether both gave the same verdict and statistics.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate.gate import correctness as cm  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def before_error_stats(a, g):
    a64, g64 = a.to(torch.float64), g.to(torch.float64)
    d = (a64 - g64).abs()
    if not cm._all_finite(d):
        fin = torch.isfinite(d)
        d, g64 = d[fin], g64[fin]
    gn = float(torch.linalg.vector_norm(g64))
    return float(d.max()), float(d.mean()), float(torch.linalg.vector_norm(d)) / gn if gn > 0 else 0.0


def before(c, g, b):
    mx, mean, fro = before_error_stats(b, g)                      # derive: the reference's own error
    g64 = g.to(torch.float64).abs()
    scale = float(g64.max()), float(g64.mean())
    del g64
    c64, g64, b64 = c.to(torch.float64), g.to(torch.float64), b.to(torch.float64)
    ok = cm._all_finite(c64) and cm._all_finite(g64)
    del b64
    return ok, before_error_stats(c64, g64), (mx, mean, fro), scale


COMPUTE = None


def after(c, g, b):
    tol = cm.derive(g, {"task dtype": b}, torch.float32, compute=COMPUTE)
    chk = cm.compare(c, g, b, tol, "x", compute=COMPUTE)
    return (chk.ok, cm.error_stats(c, g, compute=COMPUTE), (tol.ref_max, tol.ref_mean, tol.ref_fro),
            cm.finite_abs_stats(g, compute=COMPUTE))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512, help="size of the fp32 output")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compute", default=None, help="where the chunked path computes (cuda: the lean plan)")
    args = ap.parse_args()
    global COMPUTE
    COMPUTE = args.compute
    n = args.mib * (1 << 20) // 4
    g = torch.randn(n, dtype=torch.float64)
    b = g.float()
    c = (g + 1e-7 * torch.randn(n, dtype=torch.float64)).float()
    times = {"before": [], "after": []}
    peaks = {}
    results = {}
    for rep in range(args.reps):
        for name, fn in (("before", before), ("after", after)) if rep % 2 == 0 else (("after", after), ("before", before)):
            t = time.perf_counter()
            results[name] = fn(c, g, b)
            times[name].append(time.perf_counter() - t)
            peaks[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    same = all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(results["before"][1] + results["before"][2],
                                                                 results["after"][1] + results["after"][2]))
    doc = {"what": "derive + compare of one fp32 output against its fp64 oracle on the host, whole-tensor vs chunked",
           "output_mib": args.mib, "compute": args.compute or "cpu", "elements": n, "threads": torch.get_num_threads(), "chunk": cm.CHUNK,
           "seconds": times, "median_s": {k: statistics.median(v) for k, v in times.items()},
           "speedup": statistics.median(times["before"]) / statistics.median(times["after"]),
           "max_rss_mib_after_each_first_seen": peaks, "command": " ".join(sys.argv[1:]), "same_statistics": same,
           "conditions": conditions(args.compute or "cpu")}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{args.mib} MiB fp32 output, {torch.get_num_threads()} threads: before {doc['median_s']['before']:.2f} s, "
          f"after {doc['median_s']['after']:.2f} s ({doc['speedup']:.2f}x), same statistics: {same}")


if __name__ == "__main__":
    main()
