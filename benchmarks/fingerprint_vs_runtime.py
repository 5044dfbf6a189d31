"""Does machine-code fingerprint distance to the best candidate follow runtime? (over optimize runs)

    python benchmarks/fingerprint_vs_runtime.py --results DIR [DIR ...] --out FILE

Each DIR holds optimize outputs: DIR/result.json, or DIR/<workload>/result.json (optimize_suite.py --out).
For every workload, the timed candidates whose profile carries `distance_to_best` (profiling/summary.py) give pairs
(distance, time / best time). Reported: Spearman's rho per workload (3+ candidates) and pooled over all
pairs, and how often a candidate near the best in code (distance <= 0.1) was not near it in time
(> 1.1x): where the signal misleads.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fusion_rank import spearman  # noqa: E402


def pairs(doc: dict) -> list[dict]:
    out = []
    timed = [e for e in doc.get("evaluations", []) if e.get("timing") and e["verdict"]["status"] == "accepted"]
    if not timed:
        return out
    best_ms = min(e["timing"]["median_ms"] for e in timed)
    for e in timed:
        d = ((e.get("insight") or {}).get("distance_to_best") or {})
        if d.get("value") is None:
            continue
        out.append({"strategy": e["candidate"]["strategy"], "distance": d["value"], "basis": d.get("basis"),
                    "ms": e["timing"]["median_ms"], "relative_time": e["timing"]["median_ms"] / best_ms})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    workloads = {}
    for root in map(Path, args.results):
        for res in sorted([root / "result.json"] + list(root.glob("*/result.json"))):
            if res.exists():
                workloads[res.parent.name] = pairs(json.loads(res.read_text()))
    pooled = [p for ps in workloads.values() for p in ps]
    per = {w: {"n": len(ps), "spearman_rho": spearman([p["distance"] for p in ps], [p["relative_time"] for p in ps]),
               "pairs": ps} for w, ps in workloads.items() if ps}
    near = [p for p in pooled if p["distance"] <= 0.1]
    doc = {"command": "benchmarks/fingerprint_vs_runtime.py " + " ".join(sys.argv[1:]), "workloads": per,
           "pooled": {"n": len(pooled), "spearman_rho": spearman([p["distance"] for p in pooled],
                                                                 [p["relative_time"] for p in pooled])},
           "near_in_code_not_in_time": {"near": len(near), "slower_than_1.1x": sum(p["relative_time"] > 1.1
                                                                                  for p in near)}}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    for w, r in per.items():
        print(f"{w:<22} n={r['n']:<3} rho={r['spearman_rho']}")
    print(f"pooled: n={doc['pooled']['n']} rho={doc['pooled']['spearman_rho']}; near in code (<=0.1) but >1.1x in "
          f"time: {doc['near_in_code_not_in_time']['slower_than_1.1x']} of {len(near)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
