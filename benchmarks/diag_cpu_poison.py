"""Does the worker's poison reach an unwritten CPU output? For outputs of several sizes: an earlier output freed,
the poison laid before a call, then `torch.empty` of the output's size, as a candidate computing nothing would
return; the share of NaN in it, of zeros, of the earlier output's values, and what the poison cost. Modes:

  blocks-same     two NaN blocks of `mult` outputs' bytes each (`handle.nan_blocks`), laid on the thread that then
                  allocates (this script's thread)
  blocks-other    the same blocks laid on another thread, as the worker laid them: the harness's thread poisons,
                  the candidate's forward runs on the runner thread (glibc gives each thread an arena of its own)
  fill            glibc's mallopt(M_PERTURB) through `handle.poison`: every allocation until `unpoison` filled with
                  0xFF bytes (NaN), whatever thread makes it (the worker's CPU poison since red team 54)

One intra-op thread, as in the workers; glibc's allocator as the worker has it.

    python benchmarks/diag_cpu_poison.py --reps 25 --out benchmarks/results/cpu_poison_session32.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelgate.sandbox import handle  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

SIZES_MIB = (1, 4, 8, 16, 24, 32, 64)


def lay(mode: str, mult: int, n: int) -> None:
    if mode == "fill":
        handle.poison(mult * n * 4, "cpu", lambda fn, args: fn(*args))
    elif mode == "blocks-same":
        handle.nan_blocks(max(mult * n, 1 << 16), "cpu")
    else:
        t = threading.Thread(target=handle.nan_blocks, args=(max(mult * n, 1 << 16), "cpu"))
        t.start()
        t.join()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--modes", default="blocks-same:2,blocks-same:1,blocks-other:2,blocks-other:1,fill:1")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for spec in args.modes.split(","):
        mode, mult = spec.split(":")
        for mib in SIZES_MIB:
            n = mib << 18                                   # floats
            shares, zeros, stale, costs = [], [], [], []
            for _ in range(args.reps):
                x = torch.randn(n)
                y = x * 2                                   # an earlier output, freed
                before = y.clone()
                del y
                t0 = time.perf_counter()
                lay(mode, int(mult), n)
                costs.append(1000 * (time.perf_counter() - t0))
                e = torch.empty(n)
                handle.unpoison()
                shares.append(round(e.isnan().float().mean().item(), 4))
                zeros.append(round((e == 0).float().mean().item(), 4))
                stale.append(round((e == before).float().mean().item(), 4))      # the earlier output's values
                del e, x, before
            rows.append({"mode": mode, "blocks_in_outputs": int(mult), "output_mib": mib, "nan_share": shares,
                         "zero_share": zeros, "earlier_output_share": stale,
                         "poison_ms_median": round(statistics.median(costs), 2)})
            print(f"{mode:12s} {mult}x {mib:3d} MiB: NaN share {min(shares):.2f}-{max(shares):.2f}, zeros "
                  f"{min(zeros):.2f}-{max(zeros):.2f}, the earlier output's values {max(stale):.2f} at most, "
                  f"poison {statistics.median(costs):.1f} ms", flush=True)
    doc = {"what": "the worker's poison against an unwritten CPU output (torch.empty after the poison), by mode",
           "conditions": {**conditions("cpu"), "command": " ".join(["python"] + sys.argv)}, "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
