"""One problem of a suite: `python -m kernelgate.suite.child MODEL --out D ...` runs kernelgate.api.optimize in a
process of its own, so that a crash, a hang or a kill -9 of one problem never takes the suite down.

Everything it prints goes to the problem's log (the driver opens it); each progress line carries the seconds
since optimize started. Its last line is `OUTCOME <json>`: status ok / error, the reason code and message of
an error, the optimize's seconds, and when the search reached its first candidate (`setup_s`: the time of the
last progress line before the first candidate's; `first_result_s`: the first candidate's line). Exit codes are
optimize's: 0 done, 2 a usage or task error (KernelgateError), 1 anything else (a traceback is printed).

It dies with the driver (PR_SET_PDEATHSIG): a suite killed with -9 leaves no problem running on, writing into
a directory the resumed suite redoes. SIGTERM unwinds (optimize closes its workers) before exiting 143.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import sys
import time
import traceback

OUTCOME = "OUTCOME "
#: the line optimize prints after each evaluated candidate (kernelgate/report.py progress_line): "[k] strategy ..."
CANDIDATE_LINE = re.compile(r"^\[\d+\] ")
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None) -> None:
    """Ask the kernel for SIGKILL when the driver dies; if it already died (we were reparented), leave now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(137)


class Clock:
    """Progress lines with their time since the start of optimize; setup and first-candidate times."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.last: float | None = None           # the latest line's time
        self.setup_s: float | None = None
        self.first_result_s: float | None = None

    def __call__(self, message: str) -> None:
        now = time.monotonic() - self.t0
        if self.first_result_s is None and CANDIDATE_LINE.match(message):
            self.first_result_s = now
            self.setup_s = self.last if self.last is not None else now
        self.last = now
        print(f"{now:8.2f}  {message}", file=sys.stderr, flush=True)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m kernelgate.suite.child")
    ap.add_argument("model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--budget", default="90")
    ap.add_argument("--max-candidates", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--parent", type=int, default=None, help="the driver's pid (die with it)")
    ap.add_argument("--cpus", default=None, help="comma list of cores to run on (the slot's share)")
    return ap.parse_args(argv)


def _outcome(doc: dict) -> None:
    print(OUTCOME + json.dumps(doc), flush=True)


def _terminated(signum, frame) -> None:
    raise SystemExit(143)             # unwinds: optimize's finally blocks close its workers


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    die_with_parent(args.parent)
    signal.signal(signal.SIGTERM, _terminated)
    if args.cpus:
        try:
            os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",") if c.strip()})
        except (OSError, ValueError) as e:
            print(f"suite: could not pin to cores {args.cpus}: {e}", file=sys.stderr)
    t_import = time.monotonic()
    from ..api import optimize, parse_budget
    from ..errors import KernelgateError
    import_s = time.monotonic() - t_import
    clock = Clock()
    base = {"import_s": round(import_s, 3), "pid": os.getpid(),
            "device_env": os.environ.get("CUDA_VISIBLE_DEVICES")}
    try:
        res = optimize(args.model, target=args.target, budget=args.budget, max_candidates=args.max_candidates,
                       out=args.out, seed=args.seed, resume=args.resume, force=args.force, store=args.store,
                       progress=clock)
    except KernelgateError as e:
        _outcome({**base, "status": "error", "reason": e.reason.value, "message": str(e),
                  "seconds": round(time.monotonic() - clock.t0, 3)})
        return 2
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - anything else is a crash of this problem, reported as such
        traceback.print_exc()
        _outcome({**base, "status": "crash", "reason": "crash", "message": f"{type(e).__name__}: {e}",
                  "seconds": round(time.monotonic() - clock.t0, 3)})
        return 1
    seconds = time.monotonic() - clock.t0
    setup = clock.setup_s
    if setup is None:                     # no candidate ran: the whole run went before one (capped at the budget)
        setup = min(seconds, parse_budget(args.budget))
    _outcome({**base, "status": "ok", "seconds": round(seconds, 3), "setup_s": round(setup, 3),
              "first_result_s": None if clock.first_result_s is None else round(clock.first_result_s, 3),
              "candidates": len(res.evaluations)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
