"""The suite's driver: plan the problems, skip those already finished (--resume), run the rest through an
executor, and write each one's status file (atomically: temp file + rename) and the aggregates as problems
finish. The driver alone writes results; a problem's child writes only optimize's own outputs (locally) or
nothing (Ray: the driver writes the files it returns).

Layout of OUT: suite.json (the settings, checked on --resume), summary.json / summary.csv / index.html, and per
problem OUT/<level>/<name>/: optimize's outputs (result.json, optimized.py, report.md/html, ...),
optimize.log (the child's output, every attempt) and status.json (written once, when the problem finished:
its presence is what --resume skips on).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..errors import KernelgateError
from ..records import Reason
from . import aggregate
from .aggregate import DEGENERATE, FAILED, OK, PENDING
from .discover import Problem, discover, select
from .executors import Attempt, Command, Job, LocalPool, RayExecutor, Slot, child_command, plan_slots

STATUS = "status.json"
#: optimize's task errors that mean the problem cannot be verified (listed apart, not failures)
DEGENERATE_REASONS = {Reason.DEGENERATE.value, Reason.RANDOM_TASK.value}
FLAG_ABOVE = 3.0                      # gate/timing.py IMPLAUSIBLE: speedups above it are flagged for review


@dataclass
class Settings:
    root: str
    out: str = "results"
    target: str = "cpu"
    budget_per: str = "90"
    max_candidates: int = 64
    seed: int = 0                           # --sample's draw, and optimize's search seed
    only: str | None = None
    sample: int | None = None
    shard: str | None = None
    resume: bool = False
    retry_failed: bool = False
    executor: str = "local"                 # local | ray
    workers: int | None = None
    devices: str | None = None
    ray_address: str | None = None
    ray_cpus: float = 1.0
    timeout_per: float | None = None        # seconds before a problem is stopped (default: 3 x budget + 10 min)
    retries: int = 1                        # further attempts of a problem whose process died (killed, lost)
    store: str | None = None
    command: list[str] | None = None        # argv template of a stand-in child (tests)
    say: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr, flush=True))

    def budget_s(self) -> float:
        from ..api import parse_budget
        return parse_budget(self.budget_per)

    def timeout_s(self) -> float:
        return self.timeout_per if self.timeout_per is not None else 3 * self.budget_s() + 600

    def record(self) -> dict[str, Any]:
        """What suite.json keeps (and --resume checks: target, budget, candidates)."""
        return {"dir": str(Path(self.root).resolve()), "target": self.target, "budget_per_s": self.budget_s(),
                "max_candidates": self.max_candidates, "seed": self.seed, "only": self.only, "sample": self.sample,
                "shard": self.shard, "executor": self.executor, "workers": self.workers, "devices": self.devices,
                "kernelgate": __version__, "store": str(self.store) if getattr(self, "store", None) else None}


def _atomic_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, path)


def read_status(d: Path) -> dict[str, Any] | None:
    try:
        return json.loads((d / STATUS).read_text())
    except (OSError, ValueError):
        return None


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("---")]
    return lines[-1][:300] if lines else ""


def _result_fields(doc: dict[str, Any], budget_s: float, outcome: dict[str, Any]) -> dict[str, Any]:
    speedup = doc.get("speedup")
    claimed = bool(doc.get("speedup_claimed"))
    setup = outcome.get("setup_s")
    floor = doc.get("floor") or {}
    floor_s = floor.get("seconds")
    return {
        "speedup": speedup, "claimed": claimed,
        "flagged": bool(claimed and isinstance(speedup, (int, float)) and speedup > FLAG_ABOVE),
        "ci": doc.get("speedup_ci"), "best_strategy": doc.get("best_strategy"),
        "baseline_kind": doc.get("baseline_kind"), "baseline_ms": doc.get("baseline_ms"), "best_ms": doc.get("best_ms"),
        "candidates": doc.get("candidates"), "accepted": doc.get("accepted"), "device": doc.get("device"),
        "seconds": outcome.get("seconds", doc.get("seconds")),
        "setup_s": setup, "first_result_s": outcome.get("first_result_s"),
        "setup_share": round(setup / budget_s, 4) if isinstance(setup, (int, float)) else None,
        "floor_ms": 1e3 * floor_s if isinstance(floor_s, (int, float)) else None,
        "floor_bound": floor.get("bound"), "best_over_floor": doc.get("best_over_floor"),
    }


class Suite:
    def __init__(self, settings: Settings):
        self.s = settings
        self.out = Path(settings.out)
        self.budget = settings.budget_s()
        self.problems: list[Problem] = []
        self.rows: dict[str, dict[str, Any]] = {}
        self.done = 0
        self.started = 0
        self.todo = 0
        self.stopping = False

    # ------------------------------------------------------------ plan
    def plan(self) -> list[Job]:
        s = self.s
        mine = self.out.resolve()             # --out inside DIR: its reference.py / optimized.py are no problems
        found = [p for p in discover(s.root) if mine not in Path(p.path).parents]
        if not found:
            raise KernelgateError(f"suite: no problems under {s.root} outside --out {self.out}", Reason.USAGE)
        self.problems = select(found, s.only, s.sample, s.seed, s.shard)
        if self.out.exists() and not self.out.is_dir():
            raise KernelgateError(f"--out {self.out} is a file, not a directory", Reason.USAGE)
        meta = self.out / "suite.json"
        if meta.exists():
            if not s.resume:
                raise KernelgateError(f"--out {self.out} already holds a suite's results; use --resume to continue "
                                      "it, or another --out", Reason.USAGE)
            old = json.loads(meta.read_text())
            for k in ("target", "budget_per_s", "max_candidates"):
                if old.get(k) != s.record()[k]:
                    raise KernelgateError(f"--resume: {k} was {old.get(k)} in the interrupted suite, now "
                                          f"{s.record()[k]}; one summary cannot mix them", Reason.USAGE)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            _atomic_json(meta, {**s.record(), "started": time.time(), "problems": [p.id for p in self.problems]})
        except OSError as e:
            raise KernelgateError(f"--out {self.out} cannot be written: {e.strerror or e}", Reason.USAGE) from None
        jobs = []
        for i, p in enumerate(self.problems, 1):
            d = p.out_dir(self.out)
            st = read_status(d) if s.resume else None
            if st is not None and not (s.retry_failed and st.get("outcome") == FAILED):
                self.rows[p.id] = st
                continue
            if st is not None:
                (d / STATUS).unlink()
            self.rows[p.id] = {"id": p.id, "level": p.level, "name": p.name, "outcome": PENDING}
            jobs.append(Job(p, d, i))
        self.todo = len(jobs)
        return jobs

    # ------------------------------------------------------------ run
    def executor(self):
        s = self.s
        if s.executor == "ray":
            return RayExecutor(s.target, s.ray_address, s.workers, s.ray_cpus, self.s.timeout_s())
        if s.executor != "local":
            raise KernelgateError(f"--executor takes local or ray, got '{s.executor}'", Reason.USAGE)
        return LocalPool(plan_slots(s.target, s.workers, s.devices), self.s.timeout_s())

    def command(self) -> Command:
        from .executors import template_command
        s = self.s
        if s.command:
            return template_command(s.command)
        # Ray: each task keeps a store of its own, which the driver merges into --store
        return child_command(s.target, s.budget_per, s.max_candidates, s.seed,
                             None if s.executor == "ray" else s.store)

    def run(self) -> dict[str, Any]:
        """Plan, run what is not finished, and return summary.json's document."""
        jobs = self.plan()
        ex = self.executor()
        skipped = len(self.problems) - len(jobs)
        where = (f"{len(ex.slots)} slot{'s' if len(ex.slots) > 1 else ''}" if isinstance(ex, LocalPool)
                 else "Ray")
        self.s.say(f"suite: {len(self.problems)} problems from {self.s.root}, {self.budget:g} s each on {self.s.target}"
                   f" ({where})" + (f"; {skipped} already finished, skipped (--resume)" if skipped else ""))
        self.write_summary()
        try:
            ex.run(jobs, self.command(), self.on_start, self.on_done)
        except KeyboardInterrupt:
            self.stopping = True
            self.write_summary()
            raise
        return self.write_summary()

    def on_start(self, job: Job, slot: Slot) -> None:
        again = f" (attempt {len(job.attempts) + 1})" if job.attempts else ""
        if not job.number:
            self.started += 1
            job.number = self.started
        self.s.say(f"[{job.number}/{self.todo}] start {job.problem.id} on {slot.label}{again}")

    def on_done(self, job: Job, att: Attempt) -> bool:
        """Classify an attempt; a process that died (a signal, a lost Ray worker) is tried again `retries` times,
        anything else is the problem's result. Returns True to queue it again."""
        if self.stopping or att.rc in (130, -signal.SIGINT):
            return False                        # interrupted with the suite: no result, --resume redoes it
        if att.log is not None or att.files is not None:
            self._write_returned(job, att)
        died = att.lost is not None or (att.rc is not None and att.rc < 0 and not att.timed_out)
        why = (f"the worker was lost ({att.lost})" if att.lost is not None else
               f"killed by {_signal_name(-att.rc)}" if died else None)
        job.attempts.append({**att.to_json(), **({"reason": why} if why else {})})
        if died and len(job.attempts) <= self.s.retries:
            self.s.say(f"      {job.problem.id}: {why} on {att.slot} after {att.seconds:.0f} s; trying it again "
                       "in a fresh process")
            return True
        row = self.classify(job, att, why)
        _atomic_json(job.dir / STATUS, row)
        self.rows[job.problem.id] = row
        self.done += 1
        self.s.say(f"[{self.done}/{self.todo}] done  {job.problem.id}  {self.describe(row)}")
        self.write_summary()
        return False

    def _write_returned(self, job: Job, att: Attempt) -> None:
        """Ray: the files the task returned, written by the driver (the previous attempt's are replaced)."""
        import shutil
        from ..api import OUTPUTS
        job.dir.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            p = job.dir / name
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        for rel, data in (att.files or {}).items():
            p = (job.dir / rel).resolve()
            if job.dir.resolve() not in p.parents:
                continue                        # never outside the problem's directory
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        with open(job.dir / "optimize.log", "a") as f:
            f.write(f"--- attempt {len(job.attempts) + 1} of {job.problem.id} on {att.slot} ---\n{att.log or ''}")
        if att.store:
            from ..store import Store
            tmp = job.dir / f".store.{os.getpid()}.sqlite"
            try:
                tmp.write_bytes(att.store)
                Store(self.s.store).merge(tmp)
            except KernelgateError as e:
                self.s.say(f"      {job.problem.id}: its records were not kept in the store: {e}")
            finally:
                tmp.unlink(missing_ok=True)

    def classify(self, job: Job, att: Attempt, died: str | None) -> dict[str, Any]:
        p = job.problem
        row: dict[str, Any] = {"id": p.id, "level": p.level, "name": p.name, "source": p.path,
                               "budget_s": self.budget, "attempts": job.attempts, "finished": time.time(),
                               "device": att.device, "reason": None, "message": None}
        out = att.outcome or {}
        if att.timed_out:
            return {**row, "outcome": FAILED, "reason": "timeout",
                    "message": f"no result after {self.s.timeout_s():.0f} s: stopped"}
        if died:
            return {**row, "outcome": FAILED, "reason": "killed",
                    "message": f"{died}, {len(job.attempts)} times"}
        if att.rc == 0 and out.get("status") == "ok":
            try:
                doc = json.loads((job.dir / "result.json").read_text())
            except (OSError, ValueError) as e:
                return {**row, "outcome": FAILED, "reason": "no_result", "message": f"result.json unreadable: {e}"}
            return {**row, "outcome": OK, **_result_fields(doc, self.budget, out), "device": doc.get("device"),
                    "report": f"{job.dir.relative_to(self.out).as_posix()}/report.html"}
        if att.rc == 2 and out.get("reason") in DEGENERATE_REASONS:
            return {**row, "outcome": DEGENERATE, "reason": out.get("reason"), "message": out.get("message")}
        if out.get("status") in ("error", "crash"):
            return {**row, "outcome": FAILED, "reason": out.get("reason"), "message": out.get("message")}
        return {**row, "outcome": FAILED, "reason": "crash",
                "message": f"exit status {att.rc}: {_last_line(att.log_tail) or 'no output'}"}

    @staticmethod
    def describe(row: dict[str, Any]) -> str:
        o = row.get("outcome")
        secs = f"{row['seconds']:.0f} s" if isinstance(row.get("seconds"), (int, float)) else ""
        if o == OK:
            if row.get("flagged"):
                what = f"{row['speedup']:.2f}x FLAGGED for review ({row.get('best_strategy')})"
            elif row.get("claimed"):
                what = f"{row['speedup']:.2f}x claimed ({row.get('best_strategy')})"
            else:
                what = f"baseline kept ({row.get('baseline_kind')}, {row.get('candidates')} candidates)"
            return f"{what}  {secs}"
        if o == DEGENERATE:
            return f"degenerate task ({row.get('reason')}): {(row.get('message') or '')[:160]}"
        return f"FAILED {row.get('reason')}: {(row.get('message') or '')[:160]}"

    def write_summary(self) -> dict[str, Any]:
        rows = [self.rows[p.id] for p in self.problems]
        doc = aggregate.summarize(rows, {**self.s.record(), "out": str(self.out.resolve())})
        aggregate.write(self.out, doc)
        return doc


def run(settings: Settings) -> dict[str, Any]:
    return Suite(settings).run()
