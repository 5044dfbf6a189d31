"""How often the inputs' rounding run lets an honest prescaled softmax through, by how the run moves the inputs.

    python benchmarks/diag_rounding_run.py [--draws 300] --out results.json

The gate's far-from-zero families (gate/families.py ROUNDING) permit the fp64 oracle on inputs moved one ulp
(moves.one_ulp_fp64: up or down by a coin). Here, on the "scaled up" trial's inputs (a 64x512 standard normal
times 2^8..2^14), an honest softmax that scales its logits by log2(e) before it subtracts their max is compared
with the bound correctness.derive gives (2x the worst permitted run's max error plus the floor: beta 8, the
order term of a 512-term reduction), for several ways of moving the inputs:

  coin      one run, every input one ulp up or down by a coin (the gate's now)
  coin3     the worst of three such runs, independent coins
  frac      one run, every input moved by a uniform fraction of its ulp in [-1, 1] (fp64 holds it)
  frac2     the worst of two such runs

Prints the share of draws past the bound per way and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelgate.gate.correctness import derive  # noqa: E402
from kernelgate.moves import one_ulp_fp64  # noqa: E402

LOG2E = 1.4426950408889634


def candidate(x: torch.Tensor) -> torch.Tensor:
    y = x * LOG2E
    e = torch.exp2(y - y.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def fractional(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """x in fp64, each element moved by a uniform fraction in [-1, 1] of its float32 ulp."""
    ulp = (torch.nextafter(x, torch.full_like(x, float("inf"))) - x).double()
    return x.double() + ulp * (2 * torch.rand(x.shape, generator=g, dtype=torch.float64) - 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    g = torch.Generator().manual_seed(1)
    ways = ("coin", "coin3", "frac", "frac2")
    past = {w: 0 for w in ways}
    ratios: dict[str, list[float]] = {w: [] for w in ways}
    for t in range(a.draws):
        k = int(torch.randint(8, 15, (1,), generator=g))
        x = torch.randn(64, 512, generator=g) * float(2 ** k)
        exact = torch.softmax(x.double(), -1)
        ref = torch.softmax(x, -1)
        c = candidate(x).double()
        coin = [torch.softmax(one_ulp_fp64(x, "cpu", 3 * t + i), -1) for i in range(3)]
        frac = [torch.softmax(fractional(x, g), -1) for _ in range(2)]
        runs = {"coin": coin[:1], "coin3": coin, "frac": frac[:1], "frac2": frac}
        err = (c - exact).abs().max().item()
        for w in ways:
            refs = {"task dtype": ref.double(), **{f"moved {i}": r for i, r in enumerate(runs[w])}}
            tol = derive(exact, refs, torch.float32, reduce_k=512)
            ratios[w].append(err / tol.max_abs)
            past[w] += err > tol.max_abs
    doc = {"command": " ".join(["python", *sys.argv]), "torch": torch.__version__, "python": platform.python_version(),
           "draws": a.draws, "past_the_bound": past,
           "worst_ratio": {w: round(max(r), 3) for w, r in ratios.items()},
           "median_ratio": {w: round(sorted(r)[len(r) // 2], 4) for w, r in ratios.items()}}
    Path(a.out).write_text(json.dumps(doc, indent=1))
    for w in ways:
        print(f"{w:6s} past the bound in {past[w]:3d} of {a.draws}  (worst {doc['worst_ratio'][w]:.3g}x the bound)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
