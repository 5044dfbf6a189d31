"""Which threads torch.compile leaves in a worker-like process on this machine: OS threads (/proc, with their
names) and Python threads (with who started them, their target and their top frame) before and after a compiled
call, as the gate's lockdown rule sees them (no thread may be left that was not there before the import).

    python benchmarks/diag_worker_threads.py --out threads.json [--device cuda] [--mode default]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")          # as the gate's workers run
sys.path.insert(0, ".")

import torch  # noqa: E402

from kernelgate.sandbox import sensors  # noqa: E402,F401 - tracks Thread.start from here on


def os_threads() -> dict[int, str]:
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                out[int(t)] = f.read().strip()
        except OSError:
            pass
    return out


def py_threads() -> list[dict]:
    frames = sys._current_frames()
    rows = []
    for t in threading.enumerate():
        f = frames.get(t.ident)
        stack = []
        while f is not None and len(stack) < 6:
            stack.append(f"{f.f_code.co_filename.split('site-packages/')[-1]}:{f.f_code.co_name}:{f.f_lineno}")
            f = f.f_back
        target = getattr(t, "_target", None)
        rows.append({"name": t.name, "type": type(t).__name__, "native_id": t.native_id,
                     "origin": sensors._THREAD_ORIGIN.get(t, "?"),
                     "target": getattr(target, "__qualname__", repr(target))[:120] if target else None,
                     "stack": stack})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mode", default="default")
    args = ap.parse_args()
    dev = args.device
    torch.ones(4, device=dev).sum().item()                  # as the worker's prime
    (torch.ones(1 << 20) + 1).sum().item()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(4).sum()
    before = os_threads()
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU()).to(dev)
    f = torch.compile(m, mode=None if args.mode == "default" else args.mode)
    x = torch.randn(64, 256, device=dev)
    t0 = time.monotonic()
    f(x)
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
    compile_s = time.monotonic() - t0
    time.sleep(2.0)
    after = os_threads()
    new = {tid: name for tid, name in after.items() if tid not in before}
    res = {"env": {"python": platform.python_version(), "torch": torch.__version__, "device": dev,
                   "gpu": torch.cuda.get_device_name() if dev.startswith("cuda") else None, "mode": args.mode,
                   "command": "python benchmarks/diag_worker_threads.py " + " ".join(sys.argv[1:])},
           "compile_s": round(compile_s, 2), "os_before": len(before), "os_after": len(after),
           "new_os_threads": {str(k): v for k, v in new.items()}, "python_threads": py_threads()}
    print(json.dumps(res, indent=1))
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
