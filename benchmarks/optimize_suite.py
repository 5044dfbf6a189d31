"""Run `kernelgate optimize` on every workload of benchmarks/suite/ and summarise the speedups.

    python benchmarks/optimize_suite.py --target cuda --budget 90 --out DIR [--only a,b] [--json FILE]
    python benchmarks/optimize_suite.py --merge A.json B.json [...] --json OUT

Each workload gets its own DIR/<name>/ (optimized.py, report, result.json) and the same budget. Errors
are recorded per workload and the suite goes on. The JSON document (default DIR/suite.json) holds the
conditions, one record per workload and the summary: geomean speedup over the faster baseline (a kept
baseline counts as 1.0; workloads that failed are left out and counted), workloads slower than the
baseline, total seconds. It is rewritten after every workload, so a killed run keeps what finished.

A workload takes about its budget plus ~10-60 s (start-up, the last evaluation, report). Within
10-minute calls at --budget 90, three workloads per call (--json DIR/partN.json), then --merge:
    --only elementwise_chain,linear_bias_gelu,avgpool
    --only layernorm_residual,conv_bn_relu,attention
    --only softmax_scale,mlp,gru
    --only rms_norm,small_cnn,transformer_blocks
KG_SUITE_SCALE=s (recorded as "scale") shrinks every workload, e.g. if the gate's own work on the
0.3-1 GB inputs of the memory-bound workloads leaves too little of the budget for candidates.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE_DIR = HERE / "suite"
SUITE = ("elementwise_chain", "layernorm_residual", "softmax_scale", "rms_norm", "linear_bias_gelu",
         "conv_bn_relu", "avgpool", "attention", "mlp", "small_cnn", "gru", "transformer_blocks")


def record(name: str, doc: dict, seconds: float) -> dict:
    """The per-workload fields of the suite document, from optimize's result.json."""
    rejected = [e for e in doc["evaluations"] if e["verdict"]["status"] != "accepted"]
    reasons = Counter(e["verdict"]["reason"] for e in rejected)
    examples = {}
    for e in rejected:
        examples.setdefault(e["verdict"]["reason"],
                            f"{e['candidate']['strategy']}: {e['verdict']['message']}"[:300])
    return {
        "name": name, "status": "ok", "baseline_kind": doc["baseline_kind"], "baseline_ms": doc["baseline_ms"],
        "eager_ms": doc["eager"]["median_ms"] if doc.get("eager") else None,
        "compile_ms": doc["compile"]["median_ms"] if doc.get("compile") else None,
        "best_ms": doc["best_ms"], "speedup": doc["speedup"], "speedup_ci": doc["speedup_ci"],
        "speedup_claimed": doc["speedup_claimed"], "best_strategy": doc["best_strategy"],
        "candidates": doc["candidates"], "accepted": doc["accepted"], "seconds": seconds,
        "rejected": dict(reasons), "rejected_examples": examples, "notes": doc.get("notes", []),
    }


def effective(w: dict) -> float:
    """The speedup a user gets: the claimed one, else 1.0 (the faster baseline is kept)."""
    return float(w["speedup"]) if w.get("speedup_claimed") else 1.0


def summary(workloads: dict[str, dict]) -> dict:
    ok = [w for w in workloads.values() if w.get("status") == "ok"]
    sp = [effective(w) for w in ok]
    return {
        "workloads": len(workloads), "completed": len(ok),
        "errors": sorted(n for n, w in workloads.items() if w.get("status") != "ok"),
        "geomean_speedup": math.exp(sum(math.log(s) for s in sp) / len(sp)) if sp else None,
        "claimed": sum(1 for w in ok if w.get("speedup_claimed")),
        "slower_than_baseline": sum(1 for s in sp if s < 1.0),
        "total_seconds": sum(w.get("seconds") or 0.0 for w in workloads.values()),
    }


def ordered(workloads: dict[str, dict]) -> dict[str, dict]:
    rank = {n: i for i, n in enumerate(SUITE)}
    return dict(sorted(workloads.items(), key=lambda kv: (rank.get(kv[0], len(SUITE)), kv[0])))


def write(path: Path, doc: dict) -> None:
    doc["workloads"] = ordered(doc["workloads"])
    doc["summary"] = summary(doc["workloads"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def run(args: argparse.Namespace, names: list[str]) -> dict:
    sys.path.insert(0, str(HERE.parent))
    from kernelgate import api
    from kernelgate.versions import conditions

    out = Path(args.out)
    path = Path(args.json) if args.json else out / "suite.json"
    doc = {"conditions": conditions(args.target), "budget": args.budget, "target": args.target,
           "scale": float(os.environ.get("KG_SUITE_SCALE", "1")), "workloads": {}}
    for name in names:
        doc["running"] = name
        write(path, doc)
        print(f"=== {name}", flush=True)
        t0 = time.monotonic()
        try:
            api.optimize(str(SUITE_DIR / f"{name}.py"), target=args.target, budget=args.budget,
                         out=str(out / name), progress=lambda m, n=name: print(f"[{n}] {m}", flush=True))
            w = record(name, json.loads((out / name / "result.json").read_text()), time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - recorded, the suite goes on
            w = {"name": name, "status": "error", "error": f"{type(e).__name__}: {e}"[:2000],
                 "traceback": traceback.format_exc()[-3000:], "seconds": time.monotonic() - t0}
            print(f"[{name}] ERROR {w['error']}", flush=True)
        doc["workloads"][name] = w
        write(path, doc)
    doc.pop("running", None)
    write(path, doc)
    return doc


def merge(files: list[str], out: str) -> dict:
    parts = [json.loads(Path(f).read_text()) for f in files]
    doc = {"conditions": parts[0].get("conditions", {}), "budget": parts[0].get("budget"),
           "target": parts[0].get("target"), "scale": parts[0].get("scale"), "workloads": {},
           "merged": [{"file": Path(f).name, "command": p.get("conditions", {}).get("command"),
                       "gpu": p.get("conditions", {}).get("gpu"), "workloads": list(p.get("workloads", {})),
                       "unfinished": p.get("running")} for f, p in zip(files, parts)]}
    for p in parts:                                   # a workload in several files: the later file wins
        doc["workloads"].update(p.get("workloads", {}))
    for p in parts:                                   # killed during a workload: an error unless found elsewhere
        if p.get("running") and p["running"] not in doc["workloads"]:
            doc["workloads"][p["running"]] = {"name": p["running"], "status": "error", "seconds": None,
                                              "error": "unfinished: the run ended during this workload"}
    write(Path(out), doc)
    return doc


def table(doc: dict) -> str:
    def f(v, fmt="{:.4g}"):
        return "-" if v is None else fmt.format(v)
    rows = [f"{'workload':<20} {'base':<8} {'eager ms':>9} {'compile ms':>10} {'best ms':>9} {'speedup':>8} "
            f"{'95% CI':>14} {'cand/acc':>8} {'s':>5}  best"]
    for n, w in doc["workloads"].items():
        if w.get("status") != "ok":
            rows.append(f"{n:<20} ERROR {w.get('error', '')[:100]}")
            continue
        ci = "[{:.2f}, {:.2f}]".format(*w["speedup_ci"])
        mark = "" if w["speedup_claimed"] else " (baseline kept)"
        rows.append(f"{n:<20} {w['baseline_kind']:<8} {f(w['eager_ms']):>9} {f(w['compile_ms']):>10} "
                    f"{f(w['best_ms']):>9} {effective(w):>7.2f}x {ci:>14} {w['candidates']:>4}/{w['accepted']:<3} "
                    f"{w['seconds']:>5.0f}  {w['best_strategy']}{mark}")
    s = doc["summary"]
    rows.append(f"geomean speedup over the faster baseline: {f(s['geomean_speedup'], '{:.3f}x')} over "
                f"{s['completed']}/{s['workloads']} workloads ({s['claimed']} claimed); slower than baseline: "
                f"{s['slower_than_baseline']}; errors: {', '.join(s['errors']) or 'none'}; "
                f"total {s['total_seconds']:.0f} s")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--budget", default="90", help="per workload: seconds, or a number with s/m/h")
    ap.add_argument("--out", help="output folder (one subfolder per workload)")
    ap.add_argument("--only", help="comma-separated workload names (default: all)")
    ap.add_argument("--json", help="suite document (default OUT/suite.json; required with --merge)")
    ap.add_argument("--merge", nargs="+", metavar="FILE", help="combine partial suite documents into --json")
    args = ap.parse_args(argv)
    if args.merge:
        if not args.json:
            ap.error("--merge needs --json OUT")
        doc = merge(args.merge, args.json)
    else:
        if not args.out:
            ap.error("--out is required (or --merge)")
        names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else list(SUITE)
        unknown = [n for n in names if n not in SUITE]
        if unknown:
            ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(SUITE)}")
        doc = run(args, names)
    print(table(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
