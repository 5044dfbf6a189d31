"""What moving a large tensor between the device and the host costs, by the kind of host memory: the lean memory
plan keeps the judge's data on the host and hands inputs and outputs to workers through shared memory.

    python benchmarks/diag_transfers.py --gib 6 --out transfers.json

Per kind of host memory (fresh pageable, reused pageable, pinned from torch's caching host allocator, a
shared-memory region as kernelgate maps one, the same region registered with cudaHostRegister): device to
host and host to device, seconds and GB/s, each the median of 3; also the cost of registering and of a
host-side copy into the region. One JSON document with conditions; a table last. A diagnostic.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelgate import hostmem  # noqa: E402
from kernelgate.sandbox import ipc  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def timed(f, reps: int = 3) -> float:
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=6.0)
    ap.add_argument("--out", default="transfers.json")
    args = ap.parse_args()
    n = int(args.gib * 2**30) // 4
    nbytes = n * 4
    dev = torch.randn(n, device="cuda")
    rows = []

    def row(kind: str, d2h: float | None, h2d: float | None, **extra) -> None:
        r = {"kind": kind, "d2h_s": d2h, "h2d_s": h2d,
             "d2h_gbs": nbytes / d2h / 1e9 if d2h else None, "h2d_gbs": nbytes / h2d / 1e9 if h2d else None, **extra}
        rows.append(r)
        print(json.dumps(r), flush=True)

    row("pageable, fresh each time", timed(lambda: dev.to("cpu")), None)
    row("pageable, fresh, pages touched first (hostmem.to_host)", timed(lambda: hostmem.to_host(dev)), None)
    host = dev.to("cpu")
    row("pageable, reused", timed(lambda: host.copy_(dev)), timed(lambda: host.to("cuda")))
    del host
    t = time.perf_counter()
    pinned = torch.empty(n, pin_memory=True)
    alloc = time.perf_counter() - t
    row("pinned (caching host allocator)", timed(lambda: pinned.copy_(dev)), timed(lambda: pinned.to("cuda")),
        alloc_s=alloc, realloc_s=timed(lambda: torch.empty(n, pin_memory=True)))
    t = time.perf_counter()
    cpu_copy = timed(lambda: pinned.clone(), reps=1)
    del pinned
    bulk = ipc.Bulk.create(nbytes)
    view = bulk.buf.view(torch.float32)
    first = time.perf_counter()
    view.copy_(dev)
    first = time.perf_counter() - first
    row("shared region (memfd mmap)", timed(lambda: view.copy_(dev)), timed(lambda: view.to("cuda")),
        first_touch_s=first, host_clone_s=cpu_copy)
    cudart = torch.cuda.cudart()
    t = time.perf_counter()
    rc = cudart.cudaHostRegister(view.data_ptr(), nbytes, 0)
    reg = time.perf_counter() - t
    if int(rc) == 0:
        row("shared region, registered", timed(lambda: view.copy_(dev)), timed(lambda: view.to("cuda")),
            register_s=reg, pinned_seen=bool(view.is_pinned()))
        cudart.cudaHostUnregister(view.data_ptr())
    else:
        row("shared region, registered", None, None, register_error=int(rc))
    src = torch.empty(n)
    src.copy_(dev)
    row("host memcpy into the region (torch copy_)", None, None,
        host_copy_s=timed(lambda: view.copy_(src)), threads=torch.get_num_threads())
    doc = {"command": "python benchmarks/diag_transfers.py --gib " + str(args.gib), "conditions": conditions("cuda"),
           "bytes": nbytes, "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'kind':44} {'D2H GB/s':>9} {'H2D GB/s':>9}")
    for r in rows:
        print(f"{r['kind'][:44]:44} {r['d2h_gbs'] or 0:9.1f} {r['h2d_gbs'] or 0:9.1f}")


if __name__ == "__main__":
    main()
