"""Does the fusion estimate rank candidates the way measurement does? (Spearman over the optimize suite.)

    python benchmarks/fusion_rank.py --results DIR --machine h200 [--calibration FILE] --out FILE

DIR holds one folder per suite workload with optimize's result.json (optimize_suite.py --out DIR).
Two predictions are compared with measured savings (eager time minus the candidate's time, both from
the same optimize run):
  per candidate: fusion_estimates.strategy_fusions, what each generated-kernel strategy fuses in that workload
                 (pointwise groups, GEMM epilogues, GEMM output kept on chip), against the fastest
                 accepted variant of that strategy;
  whole forward: the whole forward fused into one kernel, against the fastest generated-kernel candidate.
Bytes are counted on meta tensors at full size; bandwidth from a calibration file when given.
No GPU needed: the measurements come from DIR.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgate import targets  # noqa: E402
from kernelgate.profiling.fusion import fusion_estimate, whole_forward  # noqa: E402
from kernelgate.proposers.library.fusion_estimates import strategy_fusions  # noqa: E402
from kernelgate.proposers.library.library import strategy_family as family  # noqa: E402

SUITE = ROOT / "benchmarks" / "suite"
GENERATED = ("triton:", "cpp:")


def ranks(xs: list[float]) -> list[float]:
    """Average ranks (ties share their mean rank)."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else None


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_kg_suite_{name}", SUITE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.device("meta"):
        return mod.Model(*mod.get_init_inputs()).eval(), mod.get_inputs()


def _ranked(rows: list[dict]) -> float | None:
    pred, meas = [r["predicted_saving_ms"] for r in rows], [r["measured_saving_ms"] for r in rows]
    for r, rp, rm in zip(rows, ranks(pred), ranks(meas)):
        r["predicted_rank"], r["measured_rank"] = rp, rm
    return spearman(pred, meas)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, help="folder with <workload>/result.json")
    ap.add_argument("--machine", default="h200")
    ap.add_argument("--calibration", default=None, help="kernelgate calibrate --json output for this machine")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    machine = targets.machine(args.machine)
    if args.calibration:
        measured = json.loads(Path(args.calibration).read_text())["measured"]
        machine = dataclasses.replace(machine, bandwidth=measured["bandwidth"])
    rows, whole_rows = [], []
    for res in sorted(Path(args.results).glob("*/result.json")):
        name = res.parent.name
        doc = json.loads(res.read_text())
        if not doc.get("eager") or not (SUITE / f"{name}.py").exists():
            continue
        eager_ms = doc["eager"]["median_ms"]
        timed = [e for e in doc["evaluations"] if e.get("timing") and e["verdict"]["status"] == "accepted"
                 and " + " not in e["candidate"]["strategy"]]
        model, inputs = _load(name)
        for strat, fusion in strategy_fusions(model, inputs).items():
            mine = [e for e in timed if family(e["candidate"]["strategy"]) == strat]
            if not mine:
                continue
            best = min(mine, key=lambda e: e["timing"]["median_ms"])
            est = fusion_estimate(fusion, machine).measured(eager_ms * 1e-3,
                                                            best["timing"]["median_ms"] * 1e-3)
            rows.append({"workload": name, "strategy": strat, "candidate": best["candidate"]["strategy"],
                         "eager_ms": eager_ms, "candidate_ms": best["timing"]["median_ms"],
                         "predicted_saving_ms": est.predicted_s * 1e3, "measured_saving_ms": est.measured_s * 1e3,
                         "estimate": est.to_json()})
        fused = [e for e in timed if e["candidate"]["strategy"].startswith(GENERATED)]
        if fused:
            best = min(fused, key=lambda e: e["timing"]["median_ms"])
            whole = fusion_estimate(whole_forward(model, inputs), machine)
            whole_rows.append({"workload": name, "candidate": best["candidate"]["strategy"], "eager_ms": eager_ms,
                               "candidate_ms": best["timing"]["median_ms"],
                               "predicted_saving_ms": whole.predicted_s * 1e3,
                               "measured_saving_ms": eager_ms - best["timing"]["median_ms"]})
    doc = {"command": "benchmarks/fusion_rank.py " + " ".join(sys.argv[1:]), "machine": machine.name,
           "bandwidth": machine.bandwidth,
           "per_candidate": {"what": "each generated-kernel strategy's own fusion (fusion_estimates.strategy_fusions), "
                                     "best variant per workload and strategy",
                             "n": len(rows), "spearman_rho": _ranked(rows), "rows": rows},
           "whole_forward": {"what": "the whole forward fused into one kernel, against the fastest generated-kernel "
                                     "candidate", "n": len(whole_rows), "spearman_rho": _ranked(whole_rows),
                             "rows": whole_rows}}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'workload':<20} {'strategy':<22} {'predicted ms':>12} {'measured ms':>12}")
    for r in rows:
        print(f"{r['workload']:<20} {r['strategy']:<22} {r['predicted_saving_ms']:12.3f} {r['measured_saving_ms']:12.3f}")
    print(f"Spearman rho, per candidate: {doc['per_candidate']['spearman_rho']} over {len(rows)}; "
          f"whole forward: {doc['whole_forward']['spearman_rho']} over {len(whole_rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
