"""`kernelgate suite`'s arguments and printing (kernelgate/cli.py registers them)."""
from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from .aggregate import FAST_P


def add_parser(sub: Any, common: Any) -> argparse.ArgumentParser:
    s = sub.add_parser("suite", help="optimize every KernelBench-format problem under a directory and aggregate")
    s.add_argument("dir", help="directory of problems (levels as subfolders: DIR/level1/*.py, ...)")
    s.add_argument("--budget-per", default="90", help="wall-time budget per problem: seconds, 90s, 5m (default 90)")
    s.add_argument("--out", default="results", help="output directory (default results/)")
    s.add_argument("--resume", action="store_true", help="continue a suite in --out: finished problems are skipped")
    s.add_argument("--retry-failed", action="store_true", help="with --resume: run failed problems again too")
    s.add_argument("--only", default=None, help="comma-separated globs on level/name, name or file name")
    s.add_argument("--shard", default=None, help="I/N: the I-th of N shards (1 <= I <= N)")
    s.add_argument("--sample", type=int, default=None, help="N problems drawn with --seed")
    s.add_argument("--seed", type=int, default=0, help="seed of --sample and of each optimize (default 0)")
    s.add_argument("--max-candidates", type=int, default=64, help="per problem (default 64)")
    s.add_argument("--executor", default="local", choices=("local", "ray"),
                   help="local pool (default) or Ray (pip install 'kernelgate[ray]')")
    s.add_argument("--workers", "--gpus", dest="workers", type=int, default=None,
                   help="problems at once: local, one per GPU (default: every visible GPU) or N on a CPU "
                        "(default 1, cores split); Ray: at most N in flight")
    s.add_argument("--devices", default=None, help="GPU ids for the local pool's slots, e.g. 0,1 (default: visible)")
    s.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local Ray instance)")
    s.add_argument("--ray-cpus", type=float, default=1.0, help="cores Ray reserves per problem (default 1)")
    s.add_argument("--timeout-per", type=float, default=None,
                   help="seconds before a problem is stopped and failed (default 3 x budget + 600)")
    common(s)
    return s


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_summary(doc: dict[str, Any], out: str) -> str:
    fp = "  ".join(f"fast_{p:g} {_fmt(doc['fast_p'][f'{p:g}'], '.0%')}" for p in FAST_P)
    bud = doc["budget_before_first_candidate"]
    lines = [f"{doc['finished']} of {doc['problems']} problems finished; {doc['counted']} counted "
             f"({len(doc['claimed'])} claimed, {len(doc['kept_baseline'])} baseline kept, {len(doc['failures'])} "
             f"failed, {len(doc['flagged'])} flagged, {len(doc['degenerate'])} degenerate)",
             f"geometric-mean speedup over the faster baseline: {_fmt(doc['geomean_speedup'], '.3f')}x "
             "(kept baselines, failures and flagged results count 1.0)",
             fp,
             f"budget spent before the first candidate: mean {_fmt(bud['mean_share'], '.0%')}, median "
             f"{_fmt(bud['median_share'], '.0%')} of {bud['problems']} problems"
             + (f" ({len(bud['no_candidate'])} tried none)" if bud["no_candidate"] else "")]
    for title, items in (("failed", doc["failures"]), ("flagged", doc["flagged"]), ("degenerate", doc["degenerate"])):
        for i in items:
            detail = i.get("message") or (f"{i['speedup']:.2f}x {i.get('best_strategy')}" if "speedup" in i else "")
            why = f" ({i['reason']})" if i.get("reason") else ""
            lines.append(f"  {title:<10} {i['id']}{why}: {str(detail)[:160]}")
    if doc["pending"]:
        lines.append(f"  {len(doc['pending'])} not finished: rerun with --resume")
    lines.append(f"wrote {out}/summary.json, summary.csv, index.html")
    return "\n".join(lines)


def _sigterm(signum, frame) -> None:
    raise KeyboardInterrupt            # children are stopped cleanly, the summary is written


def main(args: argparse.Namespace) -> int:
    from .runner import Settings, run
    settings = Settings(root=args.dir, out=args.out, target=args.target, budget_per=args.budget_per,
                        max_candidates=args.max_candidates, seed=args.seed, only=args.only, sample=args.sample,
                        shard=args.shard, resume=args.resume, retry_failed=args.retry_failed,
                        executor=args.executor, workers=args.workers, devices=args.devices,
                        ray_address=args.ray_address, ray_cpus=args.ray_cpus, timeout_per=args.timeout_per,
                        store=args.store)
    if args.max_candidates < 1:
        from ..errors import KernelgateError
        raise KernelgateError(f"--max-candidates must be at least 1, got {args.max_candidates}")
    signal.signal(signal.SIGTERM, _sigterm)
    doc = run(settings)
    if args.json:
        print(json.dumps(doc, indent=1, default=str))
    else:
        print(format_summary(doc, args.out))
    return 1 if doc["failures"] else 0
