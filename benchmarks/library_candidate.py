"""Write the strategy library's candidate for one strategy (and its parameters) on a workload, to verify or bench
it by hand.

    python benchmarks/library_candidate.py benchmarks/workloads/cpu_gemm_gelu.py cpu:onednn out/cand.py
    python benchmarks/library_candidate.py model.py triton:gemm out/cand.py --params '{"block_m": 64}' --target cuda
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgate.graph import analyse  # noqa: E402
from kernelgate.proposers import Context  # noqa: E402
from kernelgate.proposers.library.library import REWRITE_FNS, STRATEGIES, Library  # noqa: E402
from kernelgate.records import Contract  # noqa: E402
from kernelgate.workload import Spec, load_reference  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("strategy", help="a strategy's name, e.g. cpu:onednn")
    ap.add_argument("out")
    ap.add_argument("--params", default="{}", help="the variant's parameters, as JSON")
    ap.add_argument("--target", default="cpu")
    args = ap.parse_args()
    by = {s.name: s for s in STRATEGIES}
    if args.strategy not in by:
        print(f"unknown strategy {args.strategy!r}; known: {', '.join(sorted(by))}", file=sys.stderr)
        return 2
    ref = load_reference(Spec.parse(args.workload, "Model"))
    ctx = Context(Path(args.workload).read_text(), "Model", args.target, args.target, Contract(),
                  analyse(ref.build(), None, REWRITE_FNS), (), {})
    if not by[args.strategy].applies(ctx):
        print(f"{args.strategy} does not apply to {args.workload} on {args.target}", file=sys.stderr)
        return 1
    c = Library()._make(ctx, [(by[args.strategy], json.loads(args.params))], None, 0)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(c.source)
    print(f"{c.strategy} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
