"""Claims on the judge's clock: bench of library candidates on suite workloads, with the figures of each row.

    python benchmarks/gate_boundary_h200.py --out boundary.json [--only linear_bias_gelu,gru] [--rounds 10]

For each workload, the library's candidate for one strategy (rendered as a search would) is benched
against eager and torch.compile with `kernelgate.api.bench`: every figure a claim rests on comes from the
judge's clock (per-call = slope between batches of two sizes, less the harness's own per-iteration cost
measured in a baseline's worker); the worker's own in-process median is kept beside it as a diagnostic,
so the table shows how far the two agree and what the harness costs. One JSON document with conditions.
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
from kernelgate.config import TimingConfig  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

SUITE = ROOT / "benchmarks" / "suite"
# workload -> the strategy whose candidate run 5 of the H200 suite kept (suite_h200.json)
WORKLOADS = {"linear_bias_gelu": "triton:gemm-3xtf32", "mlp": "triton:gemm-3xtf32", "attention": "triton:attention",
             "gru": "runtime:cudagraph", "softmax_scale": "triton:row", "elementwise_chain": "triton:pointwise"}


def candidate(path: Path, strategy: str, folder: Path) -> Path | None:
    """The library's candidate file for `strategy` on the workload, or None when it does not apply."""
    from kernelgate.graph import analyse
    from kernelgate.proposers import Context
    from kernelgate.proposers.library import library
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference

    ref = load_reference(Spec.parse(str(path), "Model"))
    graph = analyse(ref.build(), None, library.REWRITE_FNS)
    ctx = Context(path.read_text(), "Model", "cuda", "boundary", Contract(), graph, (), {})
    s = next(x for x in library.STRATEGIES if x.name == strategy)
    if not s.applies(ctx):
        return None
    file = folder / f"{path.stem}_cand.py"
    file.write_text(path.read_text() + "\n\n" + library.render(ctx, [(s, s.variants(ctx)[0])]))
    return file


def row(r) -> dict:
    t = r.timing
    return {"label": r.label, "note": r.note,
            "judge_ms": t.median_ms if t else None, "spread": t.spread if t else None,
            "harness_ms": t.harness_ms if t else None, "inproc_ms": t.inproc_ms if t else None,
            "wall_ms_per_iter": t.wall_ms_per_iter if t else None, "samples": len(t.samples_ms) if t else 0,
            "speedup": r.speedup.to_json() if r.speedup else None,
            "verdict": (r.verdict.status.value, r.verdict.reason.value, r.verdict.message) if r.verdict else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    names = [n for n in WORKLOADS if not args.only or n in args.only.split(",")]
    doc: dict = {"conditions": {**conditions("cuda"), "command": " ".join(sys.argv)},
                 "timing": {"rounds": args.rounds, "iters": args.iters}, "workloads": {}}
    folder = Path(tempfile.mkdtemp(prefix="kg-boundary-"))
    for name in names:
        path = SUITE / f"{name}.py"
        t0 = time.perf_counter()
        try:
            cand = candidate(path, WORKLOADS[name], folder)
            if cand is None:
                doc["workloads"][name] = {"error": f"{WORKLOADS[name]} does not apply"}
                continue
            res = api.bench(str(path), [str(cand)], target="cuda", store=str(folder / "store.sqlite"),
                            timing=TimingConfig(rounds=args.rounds, iters=args.iters))
            doc["workloads"][name] = {"strategy": WORKLOADS[name], "baseline": res.baseline,
                                      "rows": [row(r) for r in res.rows], "wall_s": time.perf_counter() - t0}
        except Exception as e:  # noqa: BLE001 - one workload's failure is recorded, the rest still run
            doc["workloads"][name] = {"error": f"{type(e).__name__}: {e}", "wall_s": time.perf_counter() - t0}
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'workload':20s} {'row':22s} {'judge ms':>9s} {'inproc':>8s} {'harness':>8s} {'speedup':>16s}")
    for name, w in doc["workloads"].items():
        for r in w.get("rows", []):
            sp = r["speedup"]
            sp_s = f"{sp['ratio']:.2f}x{'*' if sp['claimed'] else ''} [{sp['low']:.2f},{sp['high']:.2f}]" if sp else ""
            f = (lambda v: f"{v:.4g}" if isinstance(v, (int, float)) else "-")
            print(f"{name:20s} {r['label'][:22]:22s} {f(r['judge_ms']):>9s} {f(r['inproc_ms']):>8s} "
                  f"{f(r['harness_ms']):>8s} {sp_s:>16s}")
        if "error" in w:
            print(f"{name:20s} error: {w['error'][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
