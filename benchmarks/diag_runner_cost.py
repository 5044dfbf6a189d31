"""What the runner thread costs: the harness's per-call cost and short calls' times, before and after it.

    python benchmarks/diag_runner_cost.py --old DIR --target cuda --out runner_cost.json [--reps 3]

DIR holds an earlier `kernelgate` package (this repository's files at the commit before the runner thread,
`git archive <commit> kernelgate | tar -x -C DIR`). For each size of a ReLU workload (a candidate that calls
torch.relu, timed against eager), `kernelgate.api.bench` runs once per version per rep, the versions alternated
in fresh processes so the host's state is comparable. Per run: the harness's subtracted per-call cost, each
row's judge-clock wall per call and its median after the subtraction. JSON with conditions in --out; a table last.
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

ROOT = Path(__file__).resolve().parents[1]
REF = """import torch
N = {n}
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""
CAND = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""
CHILD = """
import json, sys
from kernelgate import api
r = api.bench(sys.argv[1], [sys.argv[2]], target=sys.argv[3], baselines=("eager",), store=sys.argv[4])
rows = {row.label: {k: getattr(row.timing, k) for k in ("median_ms", "wall_ms_per_iter", "harness_ms", "spread")}
        for row in r.rows if row.timing}
print("RESULT " + json.dumps({"status": r.status.value, "rows": rows, "device": r.device}))
"""


def run(root: Path, ref: Path, cand: Path, target: str, store: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", CHILD, str(ref), str(cand), target, str(store)], env=env,
                       capture_output=True, text=True, timeout=600, cwd=str(root))
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"error": (p.stderr or p.stdout)[-800:], "wall_s": time.monotonic() - t0}
    out = json.loads(line[7:])
    out["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--sizes", default="4096,4194304")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    versions = {"before": Path(a.old).resolve(), "runner": ROOT}
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as d:
        for n in [int(x) for x in a.sizes.split(",")]:
            ref, cand = Path(d) / f"relu_{n}.py", Path(d) / "cand.py"
            ref.write_text(REF.format(n=n))
            cand.write_text(CAND)
            for rep in range(a.reps):
                for name, root in (versions.items() if rep % 2 == 0 else reversed(list(versions.items()))):
                    r = run(root, ref, cand, a.target, Path(d) / f"store_{name}")
                    r.update({"version": name, "n": n, "rep": rep})
                    results.append(r)
                    print(json.dumps(r), flush=True)
                    write(a, results, None)         # kept as it goes: a time limit loses nothing
    table = summary(results, versions)
    write(a, results, table)
    print(f"{'n':>9} {'version':>8} {'harness ms (runs)':>28} {'candidate ms':>28} {'eager ms':>28}")
    for t in table:
        fmt = lambda v: ",".join(f"{x:.4f}" if isinstance(x, float) else str(x) for x in v)
        print(f"{t['n']:>9} {t['version']:>8} {fmt(t['harness_ms']):>28} {fmt(t['candidate_ms']):>28} {fmt(t['eager_ms']):>28}")


def write(a: argparse.Namespace, results: list[dict], table: list | None) -> None:
    from kernelgate.versions import conditions
    doc = {"command": " ".join(["python"] + sys.argv), "conditions": conditions(a.target), "runs": results,
           "summary": table}
    Path(a.out).write_text(json.dumps(doc, indent=1))


def summary(results: list[dict], versions: dict) -> list[dict]:
    table = []
    for n in sorted({r["n"] for r in results}):
        for name in versions:
            rs = [r for r in results if r["n"] == n and r["version"] == name and "rows" in r]
            h = [r["rows"]["eager"]["harness_ms"] for r in rs]
            c = [r["rows"].get("cand", {}).get("median_ms") for r in rs]
            e = [r["rows"]["eager"]["median_ms"] for r in rs]
            w = [r["rows"]["eager"]["wall_ms_per_iter"] for r in rs]
            table.append({"n": n, "version": name, "runs": len(rs), "harness_ms": h, "candidate_ms": c,
                          "eager_ms": e, "eager_wall_ms": w})
    return table


if __name__ == "__main__":
    main()
