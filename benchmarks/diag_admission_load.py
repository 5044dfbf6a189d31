"""Task admission's trials (Task.admission_s: the pace search.policy.pace compares runs by) for the projection
example at 1024 and 4096 tokens, idle and with every core busy with another process (`yes`, one per core).

    python benchmarks/diag_admission_load.py --out benchmarks/results/cpu_admission_load_session28.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgate.api import _contract, gate_config, prepare  # noqa: E402
from kernelgate import workload  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def admission_s(path: str) -> float:
    cfg = gate_config()
    spec = workload.Spec.parse(path, workload.REFERENCE_CLASS, None)
    return round(prepare(spec, "cpu", _contract(None), cfg.memory).admission_s, 3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    src = (ROOT / "examples" / "projection.py").read_text()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for tokens in (1024, 4096):
            path = Path(d) / f"projection_{tokens}.py"
            path.write_text(src.replace("TOKENS, D_MODEL, D_MID = 1024,", f"TOKENS, D_MODEL, D_MID = {tokens},"))
            for cond in ("idle", "loaded"):
                load = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(os.cpu_count() or 1)] \
                    if cond == "loaded" else []
                try:
                    got = [admission_s(str(path)) for _ in range(args.reps)]
                finally:
                    for p in load:
                        p.kill()
                        p.wait()
                rows.append({"tokens": tokens, "condition": cond, "admission_s": got})
                print(f"{tokens} tokens, {cond}: admission {got} s", flush=True)
    doc = {"what": "task admission's trials for examples/projection.py at 1024 and 4096 tokens, idle and with every "
                   "core busy with `yes`", "conditions": {**conditions("cpu"), "nproc": os.cpu_count(),
                                                         "command": "python benchmarks/diag_admission_load.py"},
           "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
