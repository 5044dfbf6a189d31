"""How steady is the judge's clock, and what opening each batch with untimed steps changes.

    python benchmarks/diag_lead_in.py --out lead_in.json [--only attention,mlp,gru] [--reps 3]

For each suite workload, the candidate an earlier H200 run accepted (its source is read from that run's
committed result.json: benchmarks/results/suite_h200_issue13_rerun_runs/<workload>/result.json, the
evaluation with the workload's strategy) is verified once; the baselines are built once; then the same
sessions are measured repeatedly by `gate.measure.measure`, interleaving lead-in settings (0, 1, 2 untimed
steps per batch) and rep by rep, with the search's batch shape (5 rounds of 5 steps) and 5 x 10. Per
measurement: each row's median and spread, the speedup over the faster baseline with its interval, threshold
and claim. The samples are kept, so the first-step effect can be read per batch. JSON with conditions in
--out; a table last.
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

from kernelgate import workload  # noqa: E402
from kernelgate.config import TimingConfig, gate_config  # noqa: E402
from kernelgate.gate import baselines as baselines_mod, timing  # noqa: E402
from kernelgate.gate.judge import judge_session  # noqa: E402
from kernelgate.gate.measure import measure  # noqa: E402
from kernelgate.gate.task import prepare  # noqa: E402
from kernelgate.records import Contract  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

RUNS = ROOT / "benchmarks" / "results" / "suite_h200_issue13_rerun_runs"
#: the strategy whose candidate is timed, per workload (the accepted one the earlier run found)
STRATEGY = {"attention": "triton:attention", "mlp": "triton:gemm", "gru": "runtime:cudagraph"}
SHAPES = [(0, 5), (1, 5), (2, 5), (1, 10)]          # (lead_in, iters); rounds 5


def candidate_source(name: str) -> str:
    doc = json.loads((RUNS / name / "result.json").read_text())
    for e in doc["evaluations"]:
        c = e.get("candidate") or {}
        if str(c.get("strategy", "")).startswith(STRATEGY[name]) and (e.get("verdict") or {}).get("status") == "accepted":
            return c["source"]
    for e in doc["evaluations"]:
        c = e.get("candidate") or {}
        if str(c.get("strategy", "")).startswith(STRATEGY[name]):
            return c["source"]
    raise SystemExit(f"{name}: no {STRATEGY[name]} candidate in {RUNS / name / 'result.json'}")


def row(t) -> dict:
    return {"median_ms": t.median_ms, "spread": t.spread, "harness_ms": t.harness_ms, "inproc_ms": t.inproc_ms,
            "wall_ms_per_iter": t.wall_ms_per_iter, "samples_ms": list(t.samples_ms)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="attention,mlp,gru")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--target", default="cuda")
    args = ap.parse_args()
    cfg = gate_config()
    doc = {"what": "the judge's clock with 0, 1, 2 untimed lead-in steps per batch, same sessions, interleaved",
           "conditions": conditions("cuda" if args.target == "cuda" else "cpu"), "rows": []}
    tmp = Path(tempfile.mkdtemp(prefix="kg_lead_"))
    for name in args.only.split(","):
        ref = ROOT / "benchmarks" / "suite" / f"{name}.py"
        cand = tmp / f"{name}_cand.py"
        cand.write_text(candidate_source(name))
        t0 = time.monotonic()
        task = prepare(workload.Spec.parse(str(ref), workload.REFERENCE_CLASS, None), args.target, Contract())
        v, s = judge_session(task, workload.Spec.parse(str(cand), workload.CANDIDATE_CLASS, None), cfg)
        print(f"{name}: candidate {v.status.value} ({v.message[:80]}) in {time.monotonic() - t0:.1f} s", flush=True)
        if not v.accepted:
            doc["rows"].append({"workload": name, "error": f"candidate {v.reason.value}: {v.message}"})
            s.worker.close()
            continue
        bases, unavailable, _ = baselines_mod.build(task, ("eager", "compile"), cfg, lambda m: None)
        sessions = {**bases, "cand": s}
        try:
            for rep in range(args.reps):
                for lead, iters in (SHAPES if rep % 2 == 0 else SHAPES[::-1]):
                    tcfg = TimingConfig(warmup_ms=200.0, rounds=5, iters=iters, lead_in=lead)
                    t1 = time.monotonic()
                    timings, rejected = measure(task, sessions, cfg, tcfg, lambda m: None)
                    if "cand" in rejected:
                        doc["rows"].append({"workload": name, "rep": rep, "lead_in": lead, "iters": iters,
                                            "error": rejected["cand"].message})
                        break
                    base = min((timings[b] for b in bases), key=lambda t: t.median_ms)
                    sp = timing.speedup(base, timings["cand"])
                    r = {"workload": name, "rep": rep, "lead_in": lead, "iters": iters, "seconds": time.monotonic() - t1,
                         "speedup": sp.ratio, "low": sp.low, "high": sp.high, "threshold": sp.threshold,
                         "claimed": sp.claimed, "base": base.label, "rows": {k: row(t) for k, t in timings.items()}}
                    doc["rows"].append(r)
                    print(f"{name:10s} rep {rep} lead {lead} iters {iters:2d}: {sp.ratio:.3f}x [{sp.low:.3f}, "
                          f"{sp.high:.3f}] threshold {sp.threshold:.3f} claimed {sp.claimed}  spreads "
                          + " ".join(f"{k} {t.spread:.3f}" for k, t in timings.items()), flush=True)
        finally:
            for sess in sessions.values():
                sess.worker.close()
        Path(args.out).write_text(json.dumps(doc, indent=1))
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print("\nworkload   lead iters  speedup  low    thr    claimed  spread(base, cand)")
    for r in doc["rows"]:
        if "error" in r:
            print(f"{r['workload']:10s} error: {r['error'][:80]}")
            continue
        print(f"{r['workload']:10s} {r['lead_in']:4d} {r['iters']:5d}  {r['speedup']:.3f}  {r['low']:.3f}  "
              f"{r['threshold']:.3f}  {str(r['claimed']):7s}  {r['rows'][r['base']]['spread']:.3f} "
              f"{r['rows']['cand']['spread']:.3f}")


if __name__ == "__main__":
    main()
