"""`kernelgate port`'s arguments and printing (kernelgate/cli.py registers them)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


def add_parser(sub: Any, common: Callable, proposer_args: Callable) -> argparse.ArgumentParser:
    p = sub.add_parser("port", help="rewrite a kernel implementation (the reference) in another kernel language, "
                                    "through the gate; source and port side by side")
    p.add_argument("impl", help="the implementation: file.py (class Model calling its kernels) or file.py:Class")
    p.add_argument("--to", default="pallas", help="the kernel language to port to (default pallas; built-in "
                                                  "templates: pallas; others need an LLM)")
    p.add_argument("--budget", default="5m", help="wall-time budget: seconds, or 90s / 5m / 1h (default 5m)")
    p.add_argument("--max-candidates", type=int, default=64)
    p.add_argument("--out", default="out", help="output directory (default out/): port.py, port.json, report.md")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="replace the results of an earlier run in --out")
    p.add_argument("--call-timeout", type=float, default=None, help="seconds allowed per forward (default 120)")
    proposer_args(p)
    common(p)
    return p


def main(args: argparse.Namespace, options: tuple) -> int:
    """Run the port; print its line (or one JSON document with --json). Exit 0: a port verified, 1: none."""
    from ..config import gate_config
    from . import line, port
    _, llm, hints = options
    progress = (lambda m: print(m, file=sys.stderr, flush=True))
    res = port(args.impl, to=args.to, target=args.target, out=args.out, budget=args.budget,
               max_candidates=args.max_candidates, seed=args.seed, force=args.force, store=args.store,
               config=gate_config(call_timeout=args.call_timeout), llm=llm, hints=hints,
               progress=None if args.json else progress)
    print(json.dumps(res.to_json(), indent=1) if args.json else line(res))
    return res.exit_code
