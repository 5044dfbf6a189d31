"""Where a candidate worker's start goes: the interpreter and imports, then the harness's prime (the CUDA context,
torch's first-use threads, the digest kernels' Triton builds), each piece timed on its own.

    python benchmarks/diag_worker_start.py --device cuda --out worker_start.json [--repeats 2]

Part 1 runs the prime's pieces in plain child processes, each piece timed, with a Triton cache of its own that is
empty (cold, as every sandboxed worker's private cache is) and then the same cache again (warm). Part 2 starts
sandboxed workers (kernelgate/sandbox/host.py) as the search does: the time to the first reply (interpreter and
imports), then the prime request. Prints a table last; the figures and the conditions go to --out.
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
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, sys, time
T = {}
t = time.perf_counter()
def mark(k):
    global t
    now = time.perf_counter(); T[k] = round(now - t, 3); t = now
import torch; mark("import torch")
import triton; mark("import triton")
import kernelgate.sandbox.worker; mark("import the worker module")
dev = sys.argv[1]
if dev.startswith("cuda"):
    torch.cuda.set_device(0)
torch.ones(4, device=dev).sum().item(); mark("first op (CUDA context)")
(torch.ones(1 << 20) + 1).sum().item(); mark("intra-op pool")
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU]):
    torch.ones(4).sum()
mark("profiler's first use")
if dev.startswith("cuda"):
    with torch.enable_grad():
        x = torch.ones(2, device=dev, requires_grad=True)
        (x * 2).sum().backward()
mark("autograd's device thread")
from kernelgate import digest
digest.warm(dev); mark("digest.warm (Triton builds, private launcher)")
print(json.dumps(T))
"""


def pieces(device: str, cache: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, device], env=env, capture_output=True, text=True, timeout=300)
    total = time.perf_counter() - t
    if r.returncode != 0:
        return {"error": r.stderr[-800:], "total_s": round(total, 3)}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["process total"] = round(total, 3)
    return out


def sandboxed(device: str) -> dict:
    from kernelgate import native
    from kernelgate.sandbox.host import Worker
    out = {}
    t = time.perf_counter()
    w = Worker("diag")
    w.start()
    out["spawn"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    w.request({"op": "hello"}, 120)
    out["first reply (interpreter, imports)"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    nat = native.ensure()
    out["native.ensure (judge side)"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    w.request({"op": "prime", "device": device, "jax": False, "native": nat}, 300)
    out["prime"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    w.request({"op": "prime", "device": device, "jax": False, "native": nat}, 300)
    out["prime again (a primed spare)"] = round(time.perf_counter() - t, 3)
    w.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from kernelgate.versions import conditions
    res: dict = {"what": "where a worker's start goes (benchmarks/diag_worker_start.py)", "device": a.device,
                 "conditions": conditions(a.device), "command": " ".join(sys.argv), "plain": [], "sandboxed": []}
    for _ in range(a.repeats):
        with tempfile.TemporaryDirectory() as cache:
            res["plain"].append({"cache": "cold", **pieces(a.device, cache)})
            res["plain"].append({"cache": "warm", **pieces(a.device, cache)})
    for _ in range(a.repeats):
        res["sandboxed"].append(sandboxed(a.device))
    Path(a.out).write_text(json.dumps(res, indent=1))
    keys = list(dict.fromkeys(k for r in res["plain"] for k in r if k != "cache"))
    print(f"{'piece (s)':48s}" + "".join(f"{r['cache']:>8s}" for r in res["plain"]))
    for k in keys:
        print(f"{k:48s}" + "".join(f"{r.get(k, float('nan')):8.2f}" if isinstance(r.get(k), (int, float))
                                   else f"{'-':>8s}" for r in res["plain"]))
    for k in res["sandboxed"][0]:
        print(f"{k:48s}" + "".join(f"{r.get(k, float('nan')):8.2f}" for r in res["sandboxed"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
