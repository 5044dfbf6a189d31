"""Gate measurements on a GPU: bench repeatability, side-stream exploit, stale memory, verify overhead.

    python benchmarks/gate_h200.py --out results.json

Writes one JSON document with the conditions (GPU, driver, torch/triton versions, command).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kernelgate import api  # noqa: E402
from kernelgate.config import TimingConfig  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

W = HERE / "workloads"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    ref = str(W / "linear_gelu.py")
    honest, side, stale = (str(W / f"linear_gelu_{k}.py") for k in ("honest", "side_stream", "stale"))
    doc: dict = {"conditions": conditions("cuda"), "workload": "linear_gelu (8192x4096 @ 4096x4096 fp32 + GELU)"}

    t0 = time.perf_counter()
    v = api.verify(ref, honest, target="cuda")
    doc["verify_honest"] = {"status": v.status.value, "reason": v.reason.value, "wall_s": time.perf_counter() - t0,
                            "gate_s": v.seconds, "checks": [c.name for c in v.checks]}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    v2 = api.verify(ref, stale, target="cuda")
    doc["verify_stale"] = {"status": v2.status.value, "reason": v2.reason.value, "message": v2.message}

    Path(args.out).write_text(json.dumps(doc, indent=1))
    tcfg = TimingConfig(rounds=args.rounds, iters=args.iters)
    res = api.bench(ref, [honest, honest, side], target="cuda", timing=tcfg, progress=lambda m: print(m, flush=True))
    doc["bench"] = res.to_json()
    doc["bench_wall_s"] = time.perf_counter() - t0 - doc["verify_honest"]["wall_s"]
    Path(args.out).write_text(json.dumps(doc, indent=1))
    med = {r.label: r.timing.median_ms for r in res.rows if r.timing}
    a, b = med["linear_gelu_honest"], med["linear_gelu_honest#2"]
    side_row = next(r for r in res.rows if r.label == "linear_gelu_side_stream")
    for r in res.rows:
        print(r.label, r.timing.median_ms if r.timing else None, r.note, flush=True)
    doc["summary"] = {
        "honest_twice_medians_ms": [a, b],
        "honest_twice_rel_diff": abs(a - b) / min(a, b),
        "side_stream_median_ms": med.get("linear_gelu_side_stream"),
        "side_stream_over_honest": (med["linear_gelu_honest"] / med["linear_gelu_side_stream"]
                                    if "linear_gelu_side_stream" in med else None),
        "side_stream_verdict": side_row.note or (side_row.verdict.status.value if side_row.verdict else ""),
        "stale_rejected": v2.status.value == "rejected",
        "stale_reason": v2.reason.value,
        "verify_wall_s": doc["verify_honest"]["wall_s"],
        "reference_median_ms": med.get("eager"),
        "compile_median_ms": med.get("compile"),
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))
    s = doc["summary"]
    print("\n=== gate on", doc["conditions"].get("gpu"))
    print(f"honest twice: {a:.4f} vs {b:.4f} ms  (diff {100 * s['honest_twice_rel_diff']:.2f}%)")
    print(f"side stream: {s['side_stream_median_ms']} ms, honest/side = {s['side_stream_over_honest']}")
    print(f"stale: {v2.status.value} ({v2.reason.value}): {v2.message}")
    print(f"verify wall {s['verify_wall_s']:.1f} s on a {s['reference_median_ms']:.3f} ms workload "
          f"(compile {s['compile_median_ms']:.3f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
