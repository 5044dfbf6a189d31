"""How steady the judge's clock is in the lean memory plan against the default one, on one workload.

    python benchmarks/diag_lean_timing.py --target cuda --out lean_timing.json [--file benchmarks/suite/attention.py]

The workload's own reference, renamed ModelNew, is the candidate (its true speedup is 1.0), benched against eager
with the memory plan forced to lean or full (GateConfig.memory) and, in the lean plan, with 1 or 3 untimed
lead-in steps per batch; the settings alternate, `--reps` times each. Per run and row: median, per-sample spread,
the spread of the per-round medians (the claim rule's noise), the harness's subtracted cost, judge-clock wall per
call, samples, and the ratio with its interval and threshold. JSON with conditions in --out; a table last.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate import api  # noqa: E402
from kernelgate.config import TimingConfig, gate_config  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default=str(ROOT / "benchmarks/suite/attention.py"))
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    src = Path(a.file).read_text()
    tmp = Path(tempfile.mkdtemp())
    cand = tmp / "same.py"
    cand.write_text(src.replace("class Model(", "class ModelNew("))
    settings = [("lean", 1), ("full", 1), ("lean", 3)]
    runs = []
    for rep in range(a.reps):
        for memory, lead in settings:
            t0 = time.monotonic()
            res = api.bench(a.file, [str(cand)], target=a.target, config=gate_config(memory=memory),
                            timing=TimingConfig(rounds=a.rounds, iters=10, lead_in=lead, batch_s=2.0),
                            baselines=("eager",), store=str(tmp / "s.sqlite"))
            rows = {}
            for r in res.rows:
                t = r.timing
                if t is None:
                    rows[r.label] = {"status": r.verdict.status.value if r.verdict else None}
                    continue
                rows[r.label] = {"median_ms": t.median_ms, "spread": t.spread, "round_spread": t.round_spread,
                                 "harness_ms": t.harness_ms, "wall_ms": t.wall_ms_per_iter, "n": len(t.samples_ms),
                                 "inproc_ms": t.inproc_ms}
                if r.speedup is not None:
                    rows[r.label].update(ratio=r.speedup.ratio, low=r.speedup.low, high=r.speedup.high,
                                         threshold=r.speedup.threshold, claimed=r.speedup.claimed)
            runs.append({"rep": rep, "memory": memory, "lead_in": lead, "seconds": time.monotonic() - t0, "rows": rows})
            print(json.dumps(runs[-1]), flush=True)
    doc = {"conditions": {**conditions(a.target), "command": "benchmarks/diag_lean_timing.py " + " ".join(sys.argv[1:])},
           "workload": Path(a.file).name, "runs": runs}
    Path(a.out).write_text(json.dumps(doc, indent=1))
    print(f"{'memory':<6} {'lead':>4} {'row':<10} {'median':>8} {'spread':>7} {'rounds':>7} {'harness':>8} {'ratio':>6} "
          f"{'thresh':>6}")
    for run in runs:
        for label, r in run["rows"].items():
            if "median_ms" in r:
                rs = r["round_spread"]
                print(f"{run['memory']:<6} {run['lead_in']:>4} {label[:10]:<10} {r['median_ms']:>8.4g} "
                      f"{100 * r['spread']:>6.1f}% {'-' if rs is None else f'{100 * rs:.1f}%':>7} {r['harness_ms']:>8.4g} "
                      f"{r.get('ratio', float('nan')):>6.3f} {r.get('threshold', float('nan')):>6.3f}")


if __name__ == "__main__":
    main()
