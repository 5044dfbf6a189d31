"""What one judgement costs on the judge's side: its wall time, and each request kind's count and median wall time
(a trial's forward is a `call`: the harness's checks around the candidate's call included).

    python benchmarks/diag_judge_calls.py benchmarks/workloads/cpu_softmax.py [--cand FILE --cls ModelNew]
                                          [--repeats 2] [--label L] [--out F]

The candidate defaults to the workload's own Model (the harness's cost does not depend on what the forward is).
Prints a table; the figures and the conditions go to --out.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate import workload  # noqa: E402
from kernelgate.config import GateConfig  # noqa: E402
from kernelgate.gate import session as session_mod  # noqa: E402
from kernelgate.gate.judge import judge, prepare  # noqa: E402
from kernelgate.records import Contract  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--cand")
    ap.add_argument("--cls", default="Model")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    walls: dict[str, list[float]] = collections.defaultdict(list)
    original = session_mod.Session.request

    def request(self, msg, *args, **kw):
        t = time.perf_counter()
        try:
            return original(self, msg, *args, **kw)
        finally:
            walls[str(msg.get("op"))].append(1e3 * (time.perf_counter() - t))

    session_mod.Session.request = request
    a.workload, a.cand = os.path.abspath(a.workload), os.path.abspath(a.cand or a.workload)   # a worker's cwd is its own
    task = prepare(workload.Spec(a.workload, "Model"), a.target, Contract())
    totals, statuses = [], []
    for _ in range(a.repeats):
        walls.clear()
        t = time.perf_counter()
        v = judge(task, workload.Spec(a.cand, a.cls), GateConfig())
        totals.append(round(time.perf_counter() - t, 2))
        statuses.append(v.status.value)
    ops = {op: {"count": len(ws), "median_ms": round(statistics.median(ws), 2), "total_ms": round(sum(ws), 1)}
           for op, ws in sorted(walls.items(), key=lambda kv: -sum(kv[1]))}
    doc = {"what": "one judgement's requests on the judge's side (benchmarks/diag_judge_calls.py)", "label": a.label,
           "workload": os.path.relpath(a.workload, ROOT), "candidate": os.path.relpath(a.cand, ROOT), "judge_s": totals, "status": statuses,
           "ops_last_judgement": ops, "conditions": {**conditions(a.target), "command": " ".join(sys.argv)}}
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1))
    print(f"judgements: {totals} s ({', '.join(statuses)})")
    print(f"{'request':12s} {'count':>6s} {'median ms':>10s} {'total ms':>10s}")
    for op, r in ops.items():
        print(f"{op:12s} {r['count']:6d} {r['median_ms']:10.2f} {r['total_ms']:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
