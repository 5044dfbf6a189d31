"""Does the worker's NaN poison reach an unwritten CPU output? For outputs of several sizes: an earlier output freed,
the poison the worker lays before a call (`handle.nan_blocks`: two blocks, each `--mults` times the output's bytes;
the CPU's plan is 1, gate/memory.py `poison_bytes`, a GPU's 2), then `torch.empty` of the output's size, as a
candidate computing nothing would return; the share of NaN in it and what the poison cost. One intra-op thread, as
in the workers; glibc's allocator as the worker has it.

    python benchmarks/diag_cpu_poison.py --mults 1,2 --reps 25 --out benchmarks/results/cpu_poison_session32.json
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

from kernelgate.sandbox.handle import nan_blocks  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--mults", default="1,2", help="the poison blocks' sizes, in outputs' bytes (comma list)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for mult, mib in [(int(m), mib) for m in args.mults.split(",") for mib in (1, 4, 8, 12, 16, 24, 32, 64)]:
        n = mib << 18                                   # floats
        shares, zeros, stale, costs = [], [], [], []
        for _ in range(args.reps):
            x = torch.randn(n)
            y = x * 2                                   # an earlier output, freed
            before = y.clone()
            del y
            t0 = time.perf_counter()
            nan_blocks(max(mult * n * 4 // 4, 1 << 16), "cpu")     # the worker's poison: mult x the output's bytes
            costs.append(1000 * (time.perf_counter() - t0))
            e = torch.empty(n)
            shares.append(e.isnan().float().mean().item())
            zeros.append(round((e == 0).float().mean().item(), 4))
            stale.append(round((e == before).float().mean().item(), 4))      # the earlier output's values
            del e, x, before
        rows.append({"poison_blocks_in_outputs": mult, "output_mib": mib, "nan_share": shares, "zero_share": zeros, "earlier_output_share": stale,
                     "poison_ms_median": round(statistics.median(costs), 2)})
        print(f"poison {mult}x, {mib:3d} MiB output: NaN share {min(shares):.2f}-{max(shares):.2f}, zeros {min(zeros):.2f}-"
              f"{max(zeros):.2f}, the earlier output's values {max(stale):.2f} at most, poison "
              f"{statistics.median(costs):.1f} ms", flush=True)
    doc = {"what": "the worker's NaN poison against an unwritten CPU output (torch.empty after handle.nan_blocks)",
           "conditions": {**conditions("cpu"), "command": " ".join(["python"] + sys.argv)}, "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
