"""The README's main command on the CPU, timed from outside, then the emitted module re-benched.

    python benchmarks/cpu_optimize.py --out benchmarks/results/cpu_optimize_projection.json
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

from kernelgate.versions import conditions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", default="90")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "KERNELGATE_STORE": str(Path(d) / "s.sqlite")}
        cmd = [sys.executable, "-m", "kernelgate", "optimize", "examples/projection.py", "--target", "cpu",
               "--budget", args.budget, "--out", str(Path(d) / "out"), "--json"]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        result = json.loads(p.stdout)
        bench = subprocess.run([sys.executable, "-m", "kernelgate", "bench", "reference.py", "optimized.py",
                                "--target", "cpu", "--json"], cwd=Path(d) / "out", env=env, capture_output=True,
                               text=True)
        rebench = json.loads(bench.stdout)
    doc = {"conditions": {**conditions("cpu"), "nproc": os.cpu_count(),
                          "command": "kernelgate optimize examples/projection.py --target cpu --budget " + args.budget},
           "wall_s": wall, "budget_s": float(args.budget), "result": result,
           "rebench_of_emitted_module": [{k: r[k] for k in ("label", "speedup", "note")} |
                                         {"median_ms": r["timing"]["median_ms"] if r["timing"] else None}
                                         for r in rebench["rows"]]}
    Path(args.out).write_text(json.dumps(doc, indent=1).replace(str(ROOT) + "/", ""))
    print(f"wall {wall:.1f} s (budget {args.budget} s); {result['best_strategy']} {result['speedup']:.3f}x "
          f"CI {result['speedup_ci']}")
    for r in doc["rebench_of_emitted_module"]:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
