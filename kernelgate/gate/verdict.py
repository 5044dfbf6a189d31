"""The one builder of records.Verdict: verify's verdict, each candidate's in bench and the search, and a
candidate rejected while it is measured all carry the same fields, from the task and the session."""
from __future__ import annotations

import time

from .. import workload
from ..records import Reason, Status, Verdict
from .session import Rejected, Session
from .task import Task, device_name


def build(task: Task, s: Session, status: Status, reason: Reason, message: str, t0: float | None = None) -> Verdict:
    """The verdict on `s`'s candidate: its checks and notes so far, the task's contract and identity, the
    candidate file's hash, the device; `t0` (time.perf_counter) gives the seconds the judgement took."""
    try:
        chash = workload.file_hash(s.cand.path)
    except OSError:
        chash = ""
    notes = tuple(s.notes)
    if task.lean:
        where = "the device" if getattr(task.memory, "home", "cpu") != "cpu" else "the host"
        notes += (f"lean memory plan ({task.memory.reason}): inputs, oracle and compared outputs on {where}, "
                  "workers hold a task's worth only while called or timed (docs/GATE.md)",)
    return Verdict(status, reason, message, tuple(s.checks), notes, tuple(task.contract.assumptions()),
                   task.hash, chash, task.target, device_name(task.device),
                   time.perf_counter() - t0 if t0 is not None else 0.0)


def rejected(task: Task, s: Session, r: Rejected, t0: float | None = None) -> Verdict:
    """`s`'s candidate rejected by `r` (the failed check joins its checks)."""
    s.checks.append(r.check)
    return build(task, s, Status.REJECTED, r.reason, r.line, t0)
