"""Timing on the workload's own draws (gate/measure.drawn): `kernelgate bench` of an honest candidate, which must
keep its claim, and of the two red-team candidates that claimed 3.5-4x on timed draws the workload never makes
(red team 64's nearly sorted timestamps, red team 65's 5-smooth FFT lengths), which must not. Prints each row's
ratio on the timed draws and on the workload's own draws, and writes them with the conditions.

    python benchmarks/diag_drawn.py [--target cuda] [--rounds 5] [--out F]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate import api  # noqa: E402
from kernelgate.config import TimingConfig  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"

SOFTMAX_REF = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        m = x.max(dim=-1, keepdim=True).values
        e = (x - m).exp()
        return e / e.sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(2048, 4096)]


def get_init_inputs():
    return []
'''

SOFTMAX_CAND = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kg-drawn-"))
    (tmp / "softmax_ref.py").write_text(SOFTMAX_REF)
    (tmp / "softmax_cand.py").write_text(SOFTMAX_CAND)
    cases = [("honest softmax", tmp / "softmax_ref.py", tmp / "softmax_cand.py"),
             ("arrangement_sort_bench", CORPUS / "refs/nearly_sorted_timestamps.py",
              CORPUS / "exploits_redteam64/arrangement_sort_bench.py"),
             ("smooth_nfft_bench", CORPUS / "refs/matched_filter_nfft.py",
              CORPUS / "exploits_redteam65/smooth_nfft_bench.py")]
    rows = []
    for name, ref, cand in cases:
        t0 = time.time()
        res = api.bench(str(ref), [str(cand)], target=args.target, baselines=("eager",),
                        timing=TimingConfig(rounds=args.rounds, iters=8, warmup_ms=50.0))
        row = next((r for r in res.rows if r.label == cand.stem), None)
        sp = row.speedup if row is not None else None
        verdict = row.verdict.reason.value if row is not None and row.verdict is not None else None
        rows.append({"case": name, "status": res.status.value, "verdict": verdict,
                     "ratio": sp.ratio if sp else None, "low": sp.low if sp else None,
                     "threshold": sp.threshold if sp else None, "drawn_ratio": sp.drawn_ratio if sp else None,
                     "claimed": sp.claimed if sp else None, "seconds": round(time.time() - t0, 1),
                     "timings": {r.label: r.timing.to_json() for r in res.rows if r.timing}})
    doc = {"command": "python benchmarks/diag_drawn.py " + " ".join(sys.argv[1:]),
           "conditions": conditions(args.target), "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'case':24s} {'ratio':>7s} {'low':>6s} {'drawn':>7s} claimed")
    for r in rows:
        f = (lambda v: f"{v:.2f}" if isinstance(v, float) else str(v))
        print(f"{r['case']:24s} {f(r['ratio']):>7s} {f(r['low']):>6s} {f(r['drawn_ratio']):>7s} {r['claimed']}"
              f"  ({r['status']}, {r['verdict']}, {r['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
