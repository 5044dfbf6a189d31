"""Bench the generated Triton fusion strategies (triton_fusion.py) against eager and torch.compile on a GPU.

    python benchmarks/gpu_triton_fusion.py --out results.json [--only elementwise_chain,mlp] [--tf32] [--tf32x3]
                                           [--rounds 10 --iters 10] [--keep DIR]

For each workload (benchmarks/suite/elementwise_chain.py, linear_bias_gelu.py, mlp.py, softmax_scale.py,
layernorm_residual.py, rms_norm.py) it renders every applicable variant of triton:pointwise,
triton:row, triton:rowreduce, triton:gemm-epilogue and triton:gemm (the library's own
render(), so exactly what a search would propose) into candidate files, then runs
`kernelgate bench REF CANDS... --target cuda --json` on them (the gate verifies each, then times
eager, compile and the verified candidates interleaved). Extra experiments, each its own bench run:
  --tf32    the triton:gemm configurations with fp32_precision="tf32", under a contract allowing tf32
            (so the baselines are timed and judged under the same contract)
  --tf32x3  the triton:gemm configurations with fp32_precision="tf32x3" under the default contract
            (3xTF32 is meant to be fp32-accurate; the gate decides)
The JSON document holds the conditions, and per workload and run: the candidates (file, strategy,
params), the bench result as `kernelgate bench --json` prints it, its exit code and seconds. It is
rewritten after every run, so a killed script keeps what finished. A workload's bench takes about
1-3 minutes at full size (the gate's fp64 oracle and 8 trials on 0.3-1 GB inputs dominate); use
--only to split across calls, KG_SUITE_SCALE=s to shrink the workloads.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUITE = ("elementwise_chain", "linear_bias_gelu", "mlp", "softmax_scale", "layernorm_residual", "rms_norm")
FUSION = ("triton:pointwise", "triton:row", "triton:rowreduce", "triton:gemm-epilogue", "triton:gemm")


def candidates(path: Path, precision: tuple[str, ...], gemm_override: str | None) -> list[dict[str, Any]]:
    """Rendered candidates of the fusion strategies that apply to the workload's traced graph. With
    gemm_override, only triton:gemm, every configuration with that fp32_precision."""
    sys.path.insert(0, str(ROOT))
    from kernelgate.graph import analyse
    from kernelgate.proposers import Context, make_candidate
    from kernelgate.proposers.library import library, triton_fusion
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference

    ref = load_reference(Spec.parse(str(path), "Model"))
    graph = analyse(ref.build(), None, library.REWRITE_FNS)
    ctx = Context(path.read_text(), "Model", "cuda", "bench", Contract(precision=precision), graph, (), {})
    by_name = {s.name: s for s in library.STRATEGIES}
    if gemm_override is not None:
        if graph.patterns.get("triton-epilogue", 0) == 0:
            return []
        levels = [(by_name["triton:gemm"], {**v, "fp32_precision": gemm_override})
                  for v in triton_fusion.gemm_variants(False)]
    else:
        levels = [(by_name[n], v) for n in FUSION if by_name[n].applies(ctx) for v in by_name[n].variants(ctx)]
    out = []
    for s, params in levels:
        c = make_candidate(ctx, s.name, library.render(ctx, [(s, params)]), params=params, language="triton")
        out.append({"strategy": s.name, "params": params, "source": c.source, "id": c.id})
    return out


def bench(ref: Path, files: list[str], precision: tuple[str, ...], args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "kernelgate", "bench", str(ref), *files, "--target", "cuda", "--json",
           "--rounds", str(args.rounds), "--iters", str(args.iters)]
    if precision:
        cmd += ["--precision", ",".join(precision)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        result: Any = json.loads(p.stdout)
    except json.JSONDecodeError:
        result = None
    return {"command": " ".join(cmd[2:]), "exit": p.returncode, "seconds": round(time.monotonic() - t0, 1),
            "result": result, "stderr_tail": p.stderr[-3000:] if result is None or p.returncode == 2 else ""}


def write(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    ap.add_argument("--only", default=",".join(SUITE), help=f"comma list of {', '.join(SUITE)}")
    ap.add_argument("--tf32", action="store_true", help="also triton:gemm with tf32, under a tf32 contract")
    ap.add_argument("--tf32x3", action="store_true", help="also triton:gemm with 3xTF32, default contract")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--keep", default=None, help="directory for the candidate files (default: a temp dir)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch
    from kernelgate.versions import conditions
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kg-triton-fusion-"))
    work.mkdir(parents=True, exist_ok=True)
    runs = [("default", (), None)]
    if args.tf32:
        runs.append(("tf32", ("tf32",), "tf32"))
    if args.tf32x3:
        runs.append(("tf32x3", (), "tf32x3"))
    doc: dict[str, Any] = {"conditions": conditions("cuda"), "scale": float(os.environ.get("KG_SUITE_SCALE", "1")),
                           "workloads": {}}
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        ref = HERE / "suite" / f"{name}.py"
        doc["workloads"][name] = {}
        for label, precision, override in runs:
            cands = candidates(ref, precision, override)
            if not cands:
                doc["workloads"][name][label] = {"candidates": [], "note": "no fusion strategy applies"}
                write(out, doc)
                continue
            files = []
            for c in cands:
                f = work / f"{name}_{label}_{c['id']}.py"
                f.write_text(c.pop("source"))
                c["file"] = str(f)
                files.append(str(f))
            print(f"=== {name} [{label}]: {len(files)} candidates", flush=True)
            doc["workloads"][name][label] = {"candidates": cands, **bench(ref, files, precision, args)}
            write(out, doc)
            rows = (doc["workloads"][name][label]["result"] or {}).get("rows", [])
            for r in rows:
                t = r.get("timing") or {}
                print(f"  {r.get('label', '?'):<40} {t.get('median_ms', float('nan')):10.4f} ms  "
                      f"{(r.get('verdict') or {}).get('status', '')}", flush=True)
    write(out, doc)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
