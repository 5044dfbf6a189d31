"""Low-precision workloads on a CUDA machine: tolerance derivations, one honest candidate, and optimize.

For each workload in benchmarks/lowprec/ (bf16 MLP, fp8 scaled matmul, int8 linear with requantization,
bf16 attention):
  1. `kernelgate explain-tolerance` (the derivation of every output's allowed error),
  2. `kernelgate verify` of the reference against itself and of one candidate rendered by the strategy
     library (precision:bf16-linear-act, precision:fp8-scaled-mm, precision:int8-requant with the Triton
     epilogue, rewrite:sdpa), each timed with `kernelgate bench` when accepted,
  3. `kernelgate optimize --target cuda --budget B`.
Everything runs through the CLI in subprocesses, as a user would; one JSON with the derivations, verdicts and
speedups goes to --out, rewritten after every workload, and a short table is printed at the end.

    python benchmarks/lowprec_h200.py --out benchmarks/results/lowprec_h200.json --budget 60
KG_SUITE_SCALE shrinks the workloads (e.g. 0.001 for a CPU smoke run with --target cpu).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOADS = {   # workload -> (strategy, params) of the honest candidate
    "bf16_mlp": ("precision:bf16-linear-act", {}),
    "fp8_scaled_matmul": ("precision:fp8-scaled-mm", {}),
    "int8_linear_requant": ("precision:int8-requant", {"triton_epilogue": True}),
    "bf16_attention": ("rewrite:sdpa", {}),
}


def candidate_source(ref: Path, strategy: str, params: dict, target: str) -> str:
    """The library's candidate file for one strategy on ref (rendered even where applies() says no, so a
    strategy that does not match shows up as a verdict rather than a missing row)."""

    from kernelgate.graph import analyse
    from kernelgate.proposers import Context
    from kernelgate.proposers.library.library import REWRITE_FNS, STRATEGIES, Library
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference

    model = load_reference(Spec.parse(str(ref), "Model")).build()
    ctx = Context(ref.read_text(), "Model", target, "lowprec_h200", Contract(), analyse(model, None, REWRITE_FNS),
                  (), {})
    s = next(s for s in STRATEGIES if s.name == strategy)
    applies = s.applies(ctx)
    return Library()._make(ctx, [(s, params)], None, 0).source, applies


def _cli(args: list[str], timeout: float) -> tuple[int, dict | list | None, str]:
    """Run `python -m kernelgate ... --json`; (exit code, parsed JSON or None, stderr tail)."""
    cmd = [sys.executable, "-m", "kernelgate", *args, "--json"]
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, None, f"timed out after {timeout:.0f} s: {' '.join(cmd)}"
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return p.returncode, doc, (p.stderr[-3000:] + ("" if doc is not None else "\nstdout: " + p.stdout[-2000:]))


def _verdict(doc) -> dict:
    if not isinstance(doc, dict):
        return {"status": "no-json"}
    return {k: doc.get(k) for k in ("status", "reason", "message") if k in doc} or doc


def _speedup(doc) -> dict:
    """The parts of a bench/optimize JSON that hold timings and speedups (structure kept as the CLI gives it)."""
    if not isinstance(doc, dict):
        return {}
    keep = ("speedup", "speedup_ci", "best", "baselines", "results", "timings", "candidates", "median_ms",
            "evaluations", "accepted", "summary", "best_strategy", "best_speedup")
    return {k: doc[k] for k in keep if k in doc} or doc


def run_workload(name: str, target: str, budget: int, work: Path, timeout: float) -> dict:
    ref = ROOT / "benchmarks" / "lowprec" / f"{name}.py"
    rec: dict = {"workload": str(ref.relative_to(ROOT))}
    t0 = time.time()
    rc, doc, err = _cli(["explain-tolerance", str(ref), "--target", target], timeout)
    rec["explain_tolerance"] = {"rc": rc, "derivation": doc, **({"stderr": err} if rc else {})}

    rc, doc, err = _cli(["verify", str(ref), f"{ref}:Model", "--target", target], timeout)
    rec["verify_reference"] = {"rc": rc, **_verdict(doc), **({"stderr": err} if rc else {})}

    strategy, params = WORKLOADS[name]
    src, applies = candidate_source(ref, strategy, params, target)
    cand = work / f"{name}_candidate.py"
    cand.write_text(src)
    rec["candidate"] = {"strategy": strategy, "params": params, "applies": applies, "path": str(cand)}
    rc, doc, err = _cli(["verify", str(ref), str(cand), "--target", target], timeout)
    rec["verify_candidate"] = {"rc": rc, **_verdict(doc), **({"stderr": err} if rc else {})}
    if rc == 0:
        rc, doc, err = _cli(["bench", str(ref), str(cand), "--target", target], timeout)
        rec["bench_candidate"] = {"rc": rc, **_speedup(doc), **({"stderr": err} if rc else {})}

    out = work / f"{name}_optimize"
    rc, doc, err = _cli(["optimize", str(ref), "--target", target, "--budget", str(budget), "--out", str(out)],
                        budget * 3 + timeout)
    rec["optimize"] = {"rc": rc, "out": str(out), **_speedup(doc), **({"stderr": err} if rc else {})}
    rec["wall_s"] = round(time.time() - t0, 1)
    return rec


def _conditions(target: str, budget: int) -> dict:
    import torch
    try:
        import triton
        tv = triton.__version__
    except ImportError:
        tv = None
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or platform.machine()
    return {"command": " ".join([sys.executable, *sys.argv]), "target": target, "budget_s": budget,
            "device": dev, "torch": torch.__version__, "cuda": torch.version.cuda, "triton": tv,
            "scale": float(os.environ.get("KG_SUITE_SCALE", "1")), "started": time.strftime("%Y-%m-%d %H:%M:%S")}


def _row(name: str, rec: dict) -> str:
    def speed(d):
        for k in ("speedup", "best_speedup"):
            if isinstance(d.get(k), (int, float)):
                return f"{d[k]:.2f}x"
        return "-"
    vr = rec.get("verify_reference", {}).get("status", "-")
    vc = rec.get("verify_candidate", {}).get("status", "-")
    return (f"{name:22s} ref {str(vr):9s} cand {str(vc):9s} bench {speed(rec.get('bench_candidate', {})):>7s} "
            f"optimize {speed(rec.get('optimize', {})):>7s}  " + (rec.get("error", "")[:60]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/lowprec_h200.json", help="JSON results file")
    ap.add_argument("--budget", type=int, default=60, help="optimize budget per workload, seconds (default 60)")
    ap.add_argument("--target", default="cuda", help="cuda (default) or cpu for a smoke run")
    ap.add_argument("--only", nargs="*", default=None, help=f"subset of {', '.join(WORKLOADS)}")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per CLI call (default 1800)")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / (out.stem + "_work")
    work.mkdir(parents=True, exist_ok=True)
    doc = {"conditions": _conditions(a.target, a.budget), "workloads": {}}
    for name in a.only or list(WORKLOADS):
        try:
            doc["workloads"][name] = run_workload(name, a.target, a.budget, work, a.timeout)
        except Exception as e:  # noqa: BLE001 - one workload's failure is recorded, the others still run
            doc["workloads"][name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        out.write_text(json.dumps(doc, indent=1, default=str))
        print(_row(name, doc["workloads"][name]), flush=True)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
