"""Where a GPU timed iteration's fixed cost goes: the harness's pieces on a small tensor, with and without the
harness thread's trace function, and the runner's and the guard's per-call work.

    python benchmarks/diag_harness_fixed.py --device cuda --out fixed.json

The worker's harness thread runs under a trace function for good (kernelgate/sandbox/guard.py `watch_thread`:
candidate code called there ends the worker), so every Python function call the harness makes per iteration pays
a Python-level callback; torch ops are C and pay nothing. Each piece (medians of --iters, microseconds, each
synchronized on a GPU) is timed plain and traced, with the count of Python calls it makes. Also: a runner job
(kernelgate/sandbox/runner.py) of nothing and of a small ReLU, the guard's per-call integrity check over the
names it watches, `time.sleep(0.0002)` as the host gives it, and `sys._current_frames()`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelgate import digest, native  # noqa: E402
from kernelgate.sandbox import audit, guard, handle, history, ipc, loop, runner, sensors  # noqa: E402, F401
import kernelgate.sandbox.worker  # noqa: E402, F401 - the harness's modules, as a worker has them
from kernelgate.versions import conditions  # noqa: E402


def timed(fn, sync, iters: int) -> float:
    fn()
    sync()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        sync()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return round(statistics.median(out), 1)


def calls(fn) -> int:
    """Python function calls fn makes (a counting trace function, as the harness's tracer sees them)."""
    n = [0]

    def count(frame, event, arg):
        if event == "call":
            n[0] += 1
        return None
    sys.settrace(count)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", default="128x512")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out")
    a = ap.parse_args()
    dev = a.device
    torch.set_num_threads(1)
    native.ensure()
    cuda = dev.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        digest.warm(dev)
    shape = tuple(int(v) for v in a.shape.split("x"))
    x = torch.randn(shape, device=dev)
    buf, out = torch.empty_like(x), torch.relu(x)
    flush = handle.flush_buffer(4 << 20, dev)
    r = loop.rms([x], [True])
    seeds = iter(range(1, 1 << 30))
    w = digest.words(out)

    def ev():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        s.synchronize()
        e.record()
        e.synchronize()
        return s.elapsed_time(e)

    pieces = {
        "fresh": lambda: loop.fresh([x], 1.1, next(seeds), [True], r, dev, out=[buf]),
        "flush_zero": lambda: handle.zero(flush),
        "digest": lambda: digest.digests([out]),
        "positional": lambda: digest.positionals([buf], 0),
        "describe": lambda: sensors.describe_output(out, sensors._storages([buf]), dev),
        "json": lambda: json.dumps({"d": [1 << 62], "i": [1 << 61], "t": 0.1, "m": {"single": True,
                                                                                   "meta": [[[128, 512], "float32"]]}}),
    }
    if cuda:
        fast = digest._gpu

        def dispatched(fn):          # through Triton's dispatch (the form before the direct launch)
            def run():
                digest._gpu = digest._dispatched
                try:
                    return fn()
                finally:
                    digest._gpu = fast
            return run
        pieces["digest_dispatch"] = dispatched(lambda: digest.digests([out]))
        pieces["positional_dispatch"] = dispatched(lambda: digest.positionals([buf], 0))
        pieces["digest_torch"] = lambda: digest._digest_torch(w)
        pieces["positional_torch"] = lambda: digest._positional_torch(w, 1 << 40)
        pieces["sync"] = torch.cuda.synchronize
        pieces["events"] = ev
        from kernelgate import clock
        E, stream = clock.EventBase, torch.cuda.current_stream()
        s0, e0 = E(enable_timing=True), E(enable_timing=True)

        def window_c():              # the timed loop's synchronizes and events as it runs them now
            clock.device_sync()
            E.record(s0, stream)
            E.synchronize(s0)
            clock.device_sync()
            E.record(e0, stream)
            E.synchronize(e0)
            return E.elapsed_time(s0, e0)

        def window_py():             # the same as the loop ran them before (torch.cuda's Python forms)
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            s.synchronize()
            torch.cuda.synchronize()
            e.record()
            e.synchronize()
            return s.elapsed_time(e)
        pieces["window_py"] = window_py
        pieces["window_c"] = window_c
    call, arm, dispose = runner.start(runner.stack_bytes(), lambda m: sys.exit(m))
    pieces["runner_nothing"] = lambda: call(lambda: None, (), False, True)
    pieces["runner_relu"] = lambda: call(torch.relu, (x,), False, True)
    g = guard.Guard(enforce=False)
    g.watch(*guard.harness_namespaces("kernelgate.sandbox.worker"), (torch._C._len_torch_function_stack,
                                                    torch._C._len_torch_dispatch_stack))
    watched = sum(len(ns[2]) for ns in g._namespaces)
    pieces["integrity"] = g.integrity
    pieces["current_frames"] = sys._current_frames
    pieces["sleep_0.2ms"] = lambda: time.sleep(0.0002)
    tracer = audit.make_tracer(g.trusted, g.stdlib, frozenset(), lambda m: None)
    rows = []
    direct = digest._gpu not in (digest._dispatched, digest._unlaunched)
    print("direct digest launch:", direct)
    for name, fn in pieces.items():
        plain = timed(fn, sync, a.iters)
        sys.settrace(tracer)
        try:
            traced = timed(fn, sync, a.iters)
        finally:
            sys.settrace(None)
        rows.append({"piece": name, "plain_us": plain, "traced_us": traced, "python_calls": calls(fn)})
    print(f"{'piece':>18} {'plain us':>10} {'traced us':>10} {'py calls':>9}   ({dev}, {a.shape}, "
          f"{watched} watched names)")
    for row in rows:
        print(f"{row['piece']:>18} {row['plain_us']:>10.1f} {row['traced_us']:>10.1f} {row['python_calls']:>9}")
    if a.out:
        doc = {"device": dev, "direct_launch": direct, "shape": list(shape), "iters": a.iters, "watched_names": watched, "rows": rows,
               "command": " ".join(sys.argv), "conditions": conditions(dev)}
        Path(a.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
