"""How many times a lean-plan run moves a task's worth of inputs, counted by phase (search/policy.LEAN_*_CROSSINGS).

    python benchmarks/diag_lean_moves.py [--file benchmarks/workloads/cpu_argmin_big.py] [--budget 400] --out moves.json

optimize on the CPU with the memory plan forced to lean, every call of the functions that move a task's worth of
inputs on a GPU counted, split at the progress lines (before the baselines' figures, the search, the emitted check):
the phases' seconds too. `ipc.pack` (a call's inputs into shared memory, then the worker's move onto its device), `task.inputs_at` (inputs
drawn on the device and moved to the host), `Oracle.run` and `Prober.ok` (the reference on the device), `relayout`
(a layout made on the device: there and back). Counts, not times: on the CPU nothing crosses a bus.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate import api  # noqa: E402
from kernelgate.config import gate_config  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

#: a call of each, in moves of the inputs on a GPU (see the docstring)
MOVES = {"pack": 2, "inputs_at": 1, "oracle": 1, "prober": 1, "relayout": 2}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default=str(ROOT / "benchmarks/workloads/cpu_argmin_big.py"))
    ap.add_argument("--budget", type=float, default=400.0)
    ap.add_argument("--out", default="lean_moves.json")
    args = ap.parse_args()
    import kernelgate.gate.layouts as layouts
    import kernelgate.gate.prober as prober
    import kernelgate.gate.task as task_mod
    import kernelgate.oracle as oracle
    import kernelgate.sandbox.ipc as ipc
    events: list[tuple[float, str]] = []

    def traced(owner, name, label):
        f = getattr(owner, name)

        @functools.wraps(f)
        def wrapper(*a, **k):
            events.append((time.monotonic(), label))
            return f(*a, **k)
        setattr(owner, name, wrapper)
    traced(ipc, "pack", "pack")
    traced(task_mod, "inputs_at", "inputs_at")
    traced(oracle.Oracle, "run", "oracle")
    traced(layouts, "relayout", "relayout")
    traced(prober.Prober, "ok", "prober")
    marks: list[tuple[float, str]] = []

    def say(m: str) -> None:
        marks.append((time.monotonic(), m))
        print(m[:160], file=sys.stderr, flush=True)
    cfg = dataclasses.replace(gate_config(), memory="lean")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        r = api.optimize(args.file, target="cpu", budget=args.budget, out=f"{tmp}/out", config=cfg,
                         store=f"{tmp}/s.sqlite", progress=say)
    wall = time.monotonic() - t0
    t_build = next(t for t, m in marks if m.startswith("baseline "))
    t_base = next(t for t, m in marks if m.startswith("baselines:"))
    t_emit = next(t for t, m in marks if m.startswith("checking the emitted"))
    phases = {}
    for name, lo, hi in [("prepare (admission: on the device)", 0.0, t_build), ("baselines", t_build, t_base),
                         ("search", t_base, t_emit), ("emitted check", t_emit, float("inf"))]:
        calls = dict(collections.Counter(label for t, label in events if lo <= t < hi))
        phases[name] = {"calls": calls, "moves": sum(MOVES[k] * n for k, n in calls.items())}
    doc = {"command": "python benchmarks/diag_lean_moves.py --file " + str(Path(args.file).relative_to(ROOT))
           + f" --budget {args.budget:g}", "conditions": conditions("cpu"), "moves_per_call": MOVES,
           "phases": phases, "phases_s": r.phases.get("seconds") if isinstance(r.phases, dict) else None,
           "candidates": len(r.candidates) if hasattr(r, "candidates") else None, "wall_s": round(wall, 1)}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    for name, p in phases.items():
        print(f"{name:24} {p['moves']:4d} moves  {p['calls']}")


if __name__ == "__main__":
    main()
