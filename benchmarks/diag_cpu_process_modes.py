"""Whether identical implementations, each in its own worker, time alike on this CPU: false claims from process luck.

    python benchmarks/diag_cpu_process_modes.py [--runs 6] [--copies 3] --out results.json

Each run benches the corpus's padded bag-of-tokens MLP (tests/corpus/refs/padded_bag_mlp.py) against `--copies`
byte-identical copies of itself, renamed ModelNew, with the corpus's bench timing (3 rounds of 8 iterations, the
eager baseline in its two processes). Every copy does exactly the reference's work, so any claim is false. Also
a plain experiment without kernelgate: five single-thread processes, each running the same forward on the same
CPU in turn, 12 rounds of 10 calls, and each process's median. Prints one line per run and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "tests" / "corpus" / "refs" / "padded_bag_mlp.py"

PLAIN = r"""
import os, sys, time, statistics, importlib.util
os.sched_setaffinity(0, {0})
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
spec = importlib.util.spec_from_file_location("ref", sys.argv[1])
r = importlib.util.module_from_spec(spec); spec.loader.exec_module(r)
m = r.Model().eval()
xs = [r.get_inputs()[0] for _ in range(4)]
with torch.no_grad():
    for line in sys.stdin:
        ts = []
        for i in range(10):
            t = time.perf_counter(); m(xs[i % 4]); ts.append((time.perf_counter() - t) * 1e3)
        print(f"{statistics.median(ts):.3f}", flush=True)
"""


def plain(processes: int = 5, rounds: int = 12) -> list[dict]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "plain_worker.py"
        script.write_text(PLAIN)
        ps = [subprocess.Popen([sys.executable, str(script), str(REF)], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True) for _ in range(processes)]
        got: list[list[float]] = [[] for _ in ps]
        for _ in range(rounds):
            for j, p in enumerate(ps):
                p.stdin.write("go\n")
                p.stdin.flush()
                got[j].append(float(p.stdout.readline()))
        for p in ps:
            p.stdin.close()
            p.wait()
    return [{"process": j, "median_ms": round(statistics.median(g), 3), "rounds_ms": g} for j, g in enumerate(got)]


def bench_runs(runs: int, copies: int) -> list[dict]:
    from kernelgate import api
    from kernelgate.config import TimingConfig
    out = []
    with tempfile.TemporaryDirectory() as d:
        cands = []
        for k in range(copies):
            p = Path(d) / f"same_as_reference_{k}.py"
            p.write_text(REF.read_text().replace("class Model(", "class ModelNew("))
            cands.append(str(p))
        for i in range(runs):
            t0 = time.monotonic()
            res = api.bench(str(REF), cands, target="cpu", timing=TimingConfig(warmup_ms=50.0, rounds=3, iters=8),
                            baselines=("eager",))
            rows = []
            for r in res.rows:
                if r.timing is None:
                    continue
                row = {"label": r.label, "median_ms": round(r.timing.median_ms, 3),
                       "inproc_ms": round(r.timing.inproc_ms, 3) if r.timing.inproc_ms else None}
                if r.speedup is not None:
                    row.update(ratio=round(r.speedup.ratio, 3), low=round(r.speedup.low, 3),
                               threshold=round(r.speedup.threshold, 3), claimed=r.speedup.claimed)
                rows.append(row)
            out.append({"run": i, "seconds": round(time.monotonic() - t0, 1), "rows": rows})
            print(f"run {i}: " + " | ".join(
                f"{x['label'][-10:]} {x['median_ms']:.1f} ms" + (f" {x['ratio']:.2f}x [{x['low']:.2f}] thr "
                                                                  f"{x['threshold']:.2f}{' CLAIMED' if x['claimed'] else ''}"
                                                                  if "ratio" in x else "") for x in rows), flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    pl = plain()
    meds = [p["median_ms"] for p in pl]
    print("plain processes: " + " ".join(f"{m:.1f}" for m in meds) + f"  (max/min {max(meds) / min(meds):.2f})")
    runs = bench_runs(a.runs, a.copies)
    claims = sum(1 for r in runs for x in r["rows"] if x.get("claimed"))
    timed = sum(1 for r in runs for x in r["rows"] if "ratio" in x)
    doc = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "cpu": platform.processor() or platform.machine(),
           "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
           "plain": pl, "plain_max_over_min": round(max(meds) / min(meds), 3), "bench": runs,
           "false_claims": claims, "copies_timed": timed}
    Path(a.out).write_text(json.dumps(doc, indent=1))
    print(f"{claims} of {timed} identical copies claimed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
