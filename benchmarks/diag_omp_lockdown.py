"""Which thread pools a worker needs after its lockdown (no new thread from then on): the caller probe
(sandbox/caller.py) run on a thread laid out as the worker's (a runner thread primed by jobs.prime, the harness
thread's own parallel region), before and after isolation.lockdown_self, each step in a fresh process so that
libgomp's abort ("Thread creation failed") names the step; then `kernelgate verify` of a small workload
against itself on the device. Prints the OpenMP/MKL thread settings the process starts with.

    python benchmarks/diag_omp_lockdown.py --device cuda --out diag.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

STEPS = ("info", "probe_twice", "probe_after_lockdown", "probe_after_lockdown_fresh_thread",
         "harness_op_after_lockdown")

WORKLOAD = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))
def get_inputs():
    return [torch.tril(torch.rand(512, 512)), torch.tril(torch.rand(512, 512))]
def get_init_inputs():
    return []
ModelNew = Model
'''


def _on_thread(fn, *args):
    box = {}

    def run():
        try:
            box["r"] = fn(*args)
        except BaseException as e:          # noqa: BLE001 - reported
            box["e"] = repr(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "e" in box:
        raise RuntimeError(box["e"])
    return box.get("r")


def step(name: str, device: str) -> dict:
    import torch
    from kernelgate.sandbox import caller, isolation, jobs
    if name == "info":
        return {"cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                "env": {k: v for k, v in os.environ.items() if "THREAD" in k or k.startswith(("OMP", "MKL", "GOMP"))},
                "torch_threads": torch.get_num_threads(), "parallel_info": torch.__config__.parallel_info()}
    runner = _Runner()
    runner.call(jobs.prime, device)
    first = runner.call(caller.probe, 12345)
    (torch.ones(1 << 20) + 1).sum().item()          # the harness thread's own region, as op_prime
    out = {"threads_before": threading.active_count(), "runner_torch_threads": runner.call(torch.get_num_threads)}
    if name != "probe_twice":
        isolation.lockdown_self()
        out["locked"] = True
    if name == "harness_op_after_lockdown":
        (torch.ones(1 << 22) * 2).sum().item()
        out["ok"] = True
        return out
    if name == "probe_after_lockdown_fresh_thread":
        try:
            _on_thread(caller.probe, 12345)
        except RuntimeError as e:
            out["thread_refused"] = str(e)[:200]
        return out
    again = runner.call(caller.probe, 12345)
    out["same"] = all(torch.equal(a, b) for a, b in zip(first, again))
    return out


class _Runner:
    """One long-lived thread that runs jobs, as the worker's runner does."""

    def __init__(self):
        import queue
        self.q, self.r = queue.SimpleQueue(), queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            fn, args = self.q.get()
            try:
                self.r.put((True, fn(*args)))
            except BaseException as e:          # noqa: BLE001 - reported
                self.r.put((False, repr(e)))

    def call(self, fn, *args):
        self.q.put((fn, args))
        ok, v = self.r.get()
        if not ok:
            raise RuntimeError(v)
        return v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--step", default=None)
    a = ap.parse_args()
    if a.step:
        print(json.dumps(step(a.step, a.device), default=str))
        return 0
    rows = []
    for s in STEPS:
        t = time.time()
        p = subprocess.run([sys.executable, __file__, "--step", s, "--device", a.device], capture_output=True,
                           text=True, timeout=300)
        rows.append({"step": s, "rc": p.returncode, "seconds": round(time.time() - t, 1),
                     "stdout": p.stdout[-3000:], "stderr": p.stderr[-1500:]})
        print(f"{s:<40} rc {p.returncode}  {p.stdout.strip()[-300:]}  {p.stderr.strip()[-300:]}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "tril.py")
        with open(ref, "w") as f:
            f.write(WORKLOAD)
        for target in (["cuda"] if a.device.startswith("cuda") else []) + ["cpu"]:
            t = time.time()
            p = subprocess.run([sys.executable, "-m", "kernelgate", "verify", ref, ref, "--target", target, "--json"],
                               capture_output=True, text=True, timeout=400)
            try:
                doc = json.loads(p.stdout)
                verdict = {k: doc.get(k) for k in ("verdict", "reason", "message") if k in doc}
            except ValueError:
                verdict = {"stdout": p.stdout[-1500:]}
            rows.append({"step": f"verify_{target}", "rc": p.returncode, "seconds": round(time.time() - t, 1),
                         "verdict": verdict, "stderr": p.stderr[-1500:]})
            print(f"verify_{target:<33} rc {p.returncode}  {json.dumps(verdict)[:300]}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
