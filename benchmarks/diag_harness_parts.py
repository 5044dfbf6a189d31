"""Where a timed iteration's harness goes: each part of the worker's per-iteration work timed alone, on one device.

    python benchmarks/diag_harness_parts.py --device cuda --out parts.json [--shape 1024x8192 --shape 4096x1024]

For each input shape (float32; the output the same shape, as a pointwise op's): the fresh inputs
(`sandbox/loop.fresh` into a kept buffer), the L2 flush (`handle.zero` of the flush buffer), the output's
digest, the inputs' positional digest, the output's description (`sensors.describe_output`), and all of them in
sequence, each synchronized on a GPU (medians of --iters, ms). The gate's harness figure for a row (`harness_ms`)
also holds the judge's round trip and the reply's JSON; this script has no worker, so the difference is that.
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
from kernelgate.gate import timing  # noqa: E402
from kernelgate.sandbox import handle, loop, sensors  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def timed(fn, device: str, iters: int) -> float:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fn()
    sync()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(out), 4)


def parts(shape: tuple[int, ...], device: str, iters: int) -> dict:
    x = torch.randn(shape, device=device)
    buf, out = torch.empty_like(x), torch.randn(shape, device=device)
    flush = handle.flush_buffer(timing.flush_bytes(device), device)
    r = loop.rms([x], [True])
    seeds = iter(range(1, 1 << 30))

    def fresh():
        return loop.fresh([x], 1.1, next(seeds), [True], r, device, out=[buf])

    def everything():
        xs = fresh()
        handle.zero(flush)
        sensors.describe_output(out, sensors._storages(xs), device)
        digest.digests([out])
        digest.positionals(xs, 7)

    row = {"shape": list(shape), "mib": round(x.numel() * 4 / 2**20, 1)}
    row["fresh"] = timed(fresh, device, iters)
    row["flush"] = timed(lambda: handle.zero(flush), device, iters)
    row["digest"] = timed(lambda: digest.digests([out]), device, iters)
    row["positional"] = timed(lambda: digest.positionals([buf], 7), device, iters)
    row["describe"] = timed(lambda: sensors.describe_output(out, sensors._storages([buf]), device), device, iters)
    row["all"] = timed(everything, device, iters)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", action="append", help="AxB[xC...] (default 1024x8192 and 4096x1024)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads on the CPU (the worker runs one)")
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    lib = native.ensure() is not None
    shapes = [tuple(int(v) for v in s.split("x")) for s in (a.shape or ["1024x8192", "4096x1024"])]
    rows = [parts(s, a.device, a.iters) for s in shapes]
    cols = ("fresh", "flush", "digest", "positional", "describe", "all")
    print(f"{'shape':>14} {'MiB':>6} " + " ".join(f"{c:>10}" for c in cols) + f"   (ms, {a.device}, native {lib})")
    for row in rows:
        print(f"{'x'.join(map(str, row['shape'])):>14} {row['mib']:>6} " + " ".join(f"{row[c]:>10.3f}" for c in cols))
    if a.out:
        doc = {"device": a.device, "native": lib, "iters": a.iters, "threads": a.threads, "rows": rows,
               "command": " ".join(sys.argv), "conditions": conditions(a.device)}
        Path(a.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
