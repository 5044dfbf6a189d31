"""CPU: the drop-in module of every dev problem (tests/test_dropin_dev.py's check, problem by problem),
with each problem's outcome, the sizes the test shrank it to and the seconds it took.

    KERNELGATE_DEV_PROBLEMS=<dev problems folder> python benchmarks/dropin_dev.py \
        --out benchmarks/results/dropin_dev_cpu.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgate.versions import conditions  # noqa: E402


def _test_module():
    spec = importlib.util.spec_from_file_location("test_dropin_dev", ROOT / "tests" / "test_dropin_dev.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["test_dropin_dev"] = mod
    spec.loader.exec_module(mod)
    return mod


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None, help="substring of the problems to run (default: all)")
    args = ap.parse_args()
    T = _test_module()
    paths = T.problems()
    if not paths:
        print(f"{T.ENV} is not set (or not a directory)", file=sys.stderr)
        return 2
    if args.only:
        paths = [p for p in paths if args.only in f"{p.parent.name}/{p.name}"]
    load_before = os.getloadavg()
    rows, t_all = [], time.perf_counter()
    for p in paths:
        rec: dict = {}
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            try:
                T.check_problem(p, Path(d), rec)
            except Exception as e:  # noqa: BLE001 - recorded as the problem's failure
                rec.update(outcome="failed", error=f"{type(e).__name__}: {e}"[:2000],
                           where=traceback.format_exc().splitlines()[-3:])
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        rows.append(rec)
        print(f"{rec['problem']:<90} {rec['outcome']:<8} {rec['seconds']:7.2f}s "
              f"{rec.get('reason') or rec.get('error', '')[:150]}", flush=True)
    count = {k: sum(r["outcome"] == k for r in rows) for k in ("matched", "skipped", "failed")}
    constructed = sum(all(c.get("constructed") for c in r.get("candidates", {}).values()) and bool(r.get("candidates"))
                      for r in rows)
    cond = {**conditions("cpu"), "cpu_model": _cpu_model(), "nproc": os.cpu_count(),
            "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
            "loadavg_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
            "note": "a shared machine: other work ran on the same cores (load averages above)",
            "dev_problems": "$" + T.ENV + " (" + str(len(paths)) + " files)",
            "command": "KERNELGATE_DEV_PROBLEMS=<dev problems> python " + " ".join(sys.argv)}
    budget = {k: getattr(T, k) for k in ("PARAM_LIMIT", "FORWARD_BUDGET_S", "INPUT_BUDGET", "PARAM_BUDGET",
                                         "FIRST_TIER", "FLOP_RATE", "BYTE_RATE", "OP_COST", "META_MAX_S")}
    doc = {"conditions": cond, "budget": budget, "candidates": list(T.CANDIDATES),
           "summary": {"problems": len(rows), "constructed": constructed, **count,
                       "shrunk": sum(bool(r.get("shrunk")) for r in rows),
                       "bitwise_equal_eval": sum(all(c.get("eval_exact") for c in r.get("candidates", {}).values())
                                                 for r in rows if r["outcome"] == "matched"),
                       "total_s": round(time.perf_counter() - t_all, 1)},
           "problems": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(json.dumps(doc["summary"]))
    return 0 if count["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
