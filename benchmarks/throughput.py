"""Throughput of `optimize`: candidates evaluated per budget, and where a run's time goes (result.json "phases").

    python benchmarks/throughput.py --budget 60 --label after --out benchmarks/results/cpu_throughput_after.json
    python benchmarks/throughput.py --budget 90 --target cuda path/to/level1/problem.py ...   # KernelBench files

Each workload runs `kernelgate optimize --json` in a process of its own with a fresh store (the first run of a
workload: baselines built and timed, none read from the store; `--warm-store` runs each twice and reports the
second). Prints a table: candidates, seconds, candidates per 90 s, each phase's share of the run; writes the
figures with the conditions (kernelgate.versions.conditions) to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgate.search.phases import ORDER  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

#: mid-sized CPU workloads of the common kinds (a few ms eager on 2 cores): a pointwise chain, LayerNorm, row
#: softmax, conv + bias + activation, GEMM + epilogue, a small CNN with batch norm
DEFAULT = ("benchmarks/workloads/cpu_elementwise.py", "benchmarks/workloads/cpu_layernorm.py",
           "benchmarks/workloads/cpu_softmax.py", "benchmarks/workloads/cpu_conv_bias_relu.py",
           "benchmarks/workloads/cpu_gemm_gelu.py", "benchmarks/workloads/cpu_small_cnn.py")
SHORT = {"prepare": "prep", "analysis": "anal", "baselines": "base", "spares": "spare", "worker start": "start",
         "build": "build", "trials": "trial", "re-check": "rechk", "timing": "time", "profiling": "prof",
         "propose": "prop", "cleanup": "clean", "confirmation": "conf", "emitted check": "emit"}


def run_one(path: str, target: str, budget: str, store: Path, out: Path) -> dict:
    cmd = [sys.executable, "-m", "kernelgate", "optimize", path, "--target", target, "--budget", budget,
           "--out", str(out), "--json", "--force"]
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "KERNELGATE_STORE": str(store)}, capture_output=True,
                       text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        return {"workload": path, "error": (p.stderr or p.stdout).strip().splitlines()[-1:], "wall_s": wall}
    doc = json.loads(p.stdout)
    full = json.loads((out / "result.json").read_text())      # with the evaluations
    ph = doc.get("phases") or {}
    total = float(ph.get("total_s") or doc["seconds"])
    n = int(doc["candidates"])
    return {"workload": path, "wall_s": round(wall, 2), "run_s": round(total, 2), "candidates": n,
            "accepted": doc["accepted"], "candidates_per_90s": round(90 * n / total, 2) if total else None,
            "best": doc["best_strategy"], "speedup": round(doc["speedup"], 3), "claimed": doc["speedup_claimed"],
            "baseline": doc.get("baseline_kind"), "baseline_ms": doc.get("baseline_ms"), "best_ms": doc.get("best_ms"),
            "eager_ms": (full.get("eager") or {}).get("median_ms"), "compile_ms": (full.get("compile") or {}).get(
                "median_ms"), "loadavg_at_start": round(load0, 2),
            "phases_s": ph.get("seconds", {}), "unaccounted_s": ph.get("unaccounted_s"),
            "share": {k: round(v / total, 3) for k, v in (ph.get("seconds") or {}).items()} if total else {},
            "per_candidate": ph.get("per_candidate", {}),
            "strategies": [e["candidate"]["strategy"] for e in full.get("evaluations", [])]}


def table(rows: list[dict]) -> str:
    names = [n for n in ORDER if any(n in r.get("share", {}) for r in rows)]
    head = (f"{'workload':<22} {'cand':>4} {'run s':>6} {'/90s':>5} {'speedup':>7}  "
            + " ".join(f"{SHORT.get(n, n):>5}" for n in names))
    lines = [head]
    for r in rows:
        name = Path(r["workload"]).stem[:22]
        if "error" in r:
            lines.append(f"{name:<22} error: {r['error']}")
            continue
        lines.append(f"{name:<22} {r['candidates']:>4} {r['run_s']:>6.1f} {r['candidates_per_90s']:>5.2f} "
                     f"{claimed(r):>6.2f}x  " + " ".join(f"{100 * r['share'].get(n, 0):>4.0f}%" for n in names))
    ok = [r for r in rows if "error" not in r]
    if ok:
        lines.append(f"{'mean (speedup: geomean)':<22} {sum(r['candidates'] for r in ok) / len(ok):>4.1f} "
                     f"{sum(r['run_s'] for r in ok) / len(ok):>6.1f} "
                     f"{sum(r['candidates_per_90s'] for r in ok) / len(ok):>5.2f} {geomean(rows):>6.2f}x")
    return "\n".join(lines)


def claimed(r: dict) -> float:
    """The speedup a run claims over the faster baseline (1.0 when it kept the baseline or failed)."""
    return float(r["speedup"]) if "error" not in r and r.get("claimed") else 1.0


def geomean(rows: list[dict]) -> float:
    """Geometric mean of the claimed speedups, failures and kept baselines counted as 1.0."""
    return math.exp(sum(math.log(claimed(r)) for r in rows) / len(rows)) if rows else 1.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", help="KernelBench-format files (default: six CPU workloads)")
    ap.add_argument("--budget", default="60")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--label", default="", help="what this run measures (before / after a change)")
    ap.add_argument("--note", default="", help="conditions worth recording (a shared machine)")
    ap.add_argument("--warm-store", action="store_true", help="run each workload twice, report the second")
    ap.add_argument("--out", help="JSON file for the figures")
    args = ap.parse_args()
    rows = []
    for w in args.workloads or DEFAULT:
        with tempfile.TemporaryDirectory() as d:
            store, out = Path(d) / "store.sqlite", Path(d) / "out"
            r = run_one(w, args.target, args.budget, store, out)
            if args.warm_store and "error" not in r:
                r = {**run_one(w, args.target, args.budget, store, out), "cold": {k: r[k] for k in (
                    "run_s", "candidates", "candidates_per_90s")}}
        rows.append(r)
        print(table([r]).splitlines()[1], flush=True)
    print(table(rows))
    if args.out:
        doc = {"label": args.label, "note": args.note, "budget_s": float(args.budget), "target": args.target,
               "warm_store": args.warm_store,
               "conditions": {**conditions("cuda" if args.target == "cuda" else "cpu"), "nproc": os.cpu_count(),
                              "loadavg_at_end": os.getloadavg()},
               "geomean_speedup": round(geomean(rows), 3), "rows": rows, "table": table(rows).splitlines()}
        Path(args.out).write_text(json.dumps(doc, indent=1).replace(str(ROOT) + "/", ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
