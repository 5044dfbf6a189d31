"""C++ (load_inline) kernels on the CPU: the library's cpp:* candidates for a pointwise chain, a row
softmax and a LayerNorm, each benched by `kernelgate bench --target cpu --json` against eager and
torch.compile (verified by the gate first, then timed interleaved with both).

    python benchmarks/cpu_cpp_kernels.py --out benchmarks/results/cpu_cpp_kernels.json
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgate.graph import analyse  # noqa: E402
from kernelgate.proposers import Context  # noqa: E402
from kernelgate.proposers.library import Library  # noqa: E402
from kernelgate.proposers.library.library import REWRITE_FNS  # noqa: E402
from kernelgate.records import Contract  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402
from kernelgate.workload import Spec, load_reference  # noqa: E402

WORKLOADS = {"cpu_elementwise": "cpp:pointwise", "cpu_softmax": "cpp:softmax", "cpu_layernorm": "cpp:layernorm"}


def candidate(workload: Path, strategy: str, out: Path) -> Path:
    """The library's candidate file for one strategy on one workload."""
    ref = load_reference(Spec.parse(str(workload), "Model"))
    graph = analyse(ref.build(), None, REWRITE_FNS)
    ctx = Context(workload.read_text(), "Model", "cpu", "cpu", Contract(), graph, (), {})
    lib = Library()
    levels = {lv[0][0].name: lv[0] for lv in lib.singles(ctx)}
    if strategy not in levels:
        raise SystemExit(f"{strategy} does not apply to {workload.name} (patterns: {graph.patterns})")
    path = out / f"{workload.stem}_{strategy.replace(':', '_')}.py"
    path.write_text(lib._make(ctx, [levels[strategy]], None, 0).source)
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", default="10")
    ap.add_argument("--iters", default="10")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "KERNELGATE_STORE": str(Path(d) / "s.sqlite")}
        for name, strategy in WORKLOADS.items():
            wl = ROOT / "benchmarks" / "workloads" / f"{name}.py"
            cand = candidate(wl, strategy, Path(d))
            cmd = [sys.executable, "-m", "kernelgate", "bench", str(wl.relative_to(ROOT)), str(cand), "--target",
                   "cpu", "--json", "--rounds", args.rounds, "--iters", args.iters]
            t0 = time.perf_counter()
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if p.returncode not in (0, 1):
                raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
            res = json.loads(p.stdout)
            for r in res["rows"]:
                t = r["timing"]
                rows.append({"workload": name, "strategy": strategy, "label": r["label"] if r["label"] in
                             ("eager", "compile") else strategy, "median_ms": t["median_ms"] if t else None,
                             "spread": t["spread"] if t else None, "speedup": r["speedup"],
                             "verdict": (r["verdict"] or {}).get("status") if isinstance(r["verdict"], dict)
                             else r["verdict"], "note": r["note"]})
            rows.append({"workload": name, "strategy": strategy, "label": "bench wall", "wall_s": wall,
                         "baseline": res["baseline"]})
            print(f"{name}: {strategy} vs {res['baseline']}: " + ", ".join(
                f"{r['label']} {r['median_ms']:.3f} ms" for r in rows if r["workload"] == name and r.get("median_ms")))
    cmd = "python benchmarks/cpu_cpp_kernels.py --out " + args.out
    doc = {"conditions": {**conditions("cpu"), "nproc": os.cpu_count(), "command": cmd,
                          "note": "2 shared cores (other processes ran concurrently): timings are noisy"},
           "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1).replace(str(ROOT) + "/", ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
