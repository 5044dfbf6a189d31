"""CPU: wall time of `kernelgate verify` on a small workload, start-up included (a fresh interpreter).

    python benchmarks/gate_cpu.py --out benchmarks/results/gate_cpu.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
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
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "kernelgate", "verify", "examples/rowsoftmax.py", "examples/rowsoftmax_exp2.py",
           "--json"]
    walls, verdicts = [], []
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "KERNELGATE_STORE": str(Path(d) / "s.sqlite")}
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            verdicts.append(json.loads(p.stdout)["status"])
    doc = {"conditions": {**conditions("cpu"), "nproc": os.cpu_count(), "command": " ".join(cmd[1:])},
           "wall_s": walls, "median_wall_s": statistics.median(walls), "max_wall_s": max(walls),
           "verdicts": verdicts, "limit_s": 20.0}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"verify wall: median {doc['median_wall_s']:.2f} s, max {doc['max_wall_s']:.2f} s over {len(walls)} runs "
          f"({set(verdicts)}); limit 20 s")
    return 0 if max(walls) <= 20.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
