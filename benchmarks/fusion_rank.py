"""Does the fusion estimate rank workloads the way measurement does? (Spearman over the optimize suite.)

    python benchmarks/fusion_rank.py --results DIR --machine h200 [--calibration FILE] --out FILE

DIR holds one folder per suite workload with optimize's result.json (optimize_suite.py --out DIR).
For every workload where a generated-kernel candidate (triton:*, cpp:*) was accepted and timed:
  predicted: bottleneck.fusion_estimate of the whole forward fused into one kernel (intermediate bytes
             counted on meta tensors at full size; eager launches estimated by the non-view ops), on the
             machine model (bandwidth from a calibration file when given);
  measured:  eager time minus the fastest accepted generated-kernel candidate's time.
Writes both, their ranks and Spearman's rho (no GPU needed: the measurements come from DIR).
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

from kernelgate import bottleneck, targets  # noqa: E402

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


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else float("nan")


def predict(name: str, machine: targets.Machine) -> bottleneck.FusionEstimate:
    spec = importlib.util.spec_from_file_location(f"_kg_suite_{name}", SUITE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.device("meta"):
        model = mod.Model(*mod.get_init_inputs()).eval()
        inputs = mod.get_inputs()
    return bottleneck.fusion_estimate(bottleneck.whole_forward(model, inputs), machine)


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
    rows = []
    for res in sorted(Path(args.results).glob("*/result.json")):
        name = res.parent.name
        doc = json.loads(res.read_text())
        fused = [e for e in doc["evaluations"] if e.get("timing") and e["verdict"]["status"] == "accepted"
                 and e["candidate"]["strategy"].startswith(GENERATED)]
        if not fused or not doc.get("eager") or not (SUITE / f"{name}.py").exists():
            continue
        best = min(fused, key=lambda e: e["timing"]["median_ms"])
        est = predict(name, machine)
        eager_ms, cand_ms = doc["eager"]["median_ms"], best["timing"]["median_ms"]
        est = est.measured(eager_ms * 1e-3, cand_ms * 1e-3)
        rows.append({"workload": name, "candidate": best["candidate"]["strategy"], "eager_ms": eager_ms,
                     "candidate_ms": cand_ms, "predicted_saving_ms": est.predicted_s * 1e3,
                     "measured_saving_ms": est.measured_s * 1e3, "estimate": est.to_json()})
    pred = [r["predicted_saving_ms"] for r in rows]
    meas = [r["measured_saving_ms"] for r in rows]
    rho = spearman(pred, meas) if len(rows) >= 3 else float("nan")
    for r, rp, rm in zip(rows, ranks(pred), ranks(meas)):
        r["predicted_rank"], r["measured_rank"] = rp, rm
    doc = {"command": "benchmarks/fusion_rank.py " + " ".join(sys.argv[1:]), "machine": machine.name,
           "bandwidth": machine.bandwidth, "workloads": rows, "n": len(rows),
           "spearman_rho": None if math.isnan(rho) else rho}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'workload':<20} {'candidate':<40} {'predicted ms':>12} {'measured ms':>12}")
    for r in rows:
        print(f"{r['workload']:<20} {r['candidate'][:40]:<40} {r['predicted_saving_ms']:12.3f} {r['measured_saving_ms']:12.3f}")
    print(f"Spearman rho over {len(rows)} workloads: {doc['spearman_rho']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
