"""Which of JAX's threads take Python thread states on the GPU after kernelgate's JAX prime: the worker ends a
Pallas candidate whose calls leave the interpreter with more thread states than before its import (runner.py's
`idle`). Primes JAX as the worker does (sandbox/jobs.prime_jax), counts thread states and lists the process's
threads, then calls a Pallas softmax through DLPack while a poller counts thread states every 50 us.

    python benchmarks/diag_jax_threads.py --out $OUT/jax_threads.json
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import threading
import time

import torch


def threads() -> dict[str, int]:
    out: dict[str, int] = {}
    for t in os.listdir("/proc/self/task"):
        try:
            name = open(f"/proc/self/task/{t}/comm").read().strip()
        except OSError:
            continue
        out[name] = out.get(name, 0) + 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    from kernelgate.sandbox import jobs, runner
    count = runner._thread_states()
    rec: dict = {"device": a.device, "torch": torch.__version__}
    rec["states_start"], rec["threads_start"] = count(), threads()
    jobs.prime_jax(a.device)
    gc.collect()
    time.sleep(0.5)
    rec["states_primed"], rec["threads_primed"] = count(), threads()
    import jax
    rec["jax"] = jax.__version__
    from kernelgate.kernels import pallas_launch as L
    seen, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            seen.append(count())
            time.sleep(0.00005)
    base = count()
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    steps = []
    for k in range(5):
        x = torch.randn(256, 1000, device=a.device)
        y = L.kg_pl_softmax(x, -1)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        ok = bool(torch.allclose(y, torch.softmax(x, -1), atol=1e-5))
        del x, y
        gc.collect()
        time.sleep(0.05)
        steps.append({"call": k, "ok": ok, "states": count(), "threads": sum(threads().values())})
    stop.set()
    th.join()
    rec["poller_base"] = base + 1
    rec["poller_max"] = max(seen) if seen else None
    rec["poller_samples"] = len(seen)
    rec["steps"], rec["threads_end"] = steps, threads()
    json.dump(rec, open(a.out, "w"), indent=1)
    print(json.dumps({k: rec[k] for k in ("states_start", "states_primed", "poller_base", "poller_max", "steps")}))
    new = {k: v - rec["threads_primed"].get(k, 0) for k, v in rec["threads_end"].items()
           if v != rec["threads_primed"].get(k, 0)}
    print("threads started after the prime:", new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
