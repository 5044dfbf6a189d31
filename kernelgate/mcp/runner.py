"""The server's side of a job (kernelgate/mcp/jobs.py): a process per evaluation, at most `concurrent` at once
(a semaphore; a call waits for a slot within its own time limit), each stopped at its time limit.

A call that runs out of time: SIGTERM to the job (it unwinds through the API and closes the gate's workers),
then after GRACE_S SIGKILL to it and to every process below it (found from /proc before the job goes: the
gate's workers live in sessions of their own). Candidate source text is written to a private temporary
directory (mode 0700) that is removed when the call ends.
"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import anyio

log = logging.getLogger("kernelgate.mcp")

GRACE_S = 15.0                       # after SIGTERM, before SIGKILL
LOG_TAIL = 1500                      # characters of a failed job's log kept in its error
#: per-call time limits by kind (seconds); the server's --timeout caps them all
DEFAULT_TIMEOUTS = {"workload": 300.0, "verify": 600.0, "bench": 900.0, "profile": 600.0, "explain": 300.0,
                    "submit": 900.0}
#: the server's own settings that a job (the judge) has no use for
DROP_ENV = ("KERNELGATE_MCP_TOKEN",)


@dataclass
class Limits:
    concurrent: int = 1              # evaluations at once (timed work on one machine disturbs itself)
    timeout_s: float = 900.0         # the most any call may take, waiting for a slot included
    call_timeout: float | None = None   # seconds per forward inside the gate (GateConfig.call_timeout)


class Jobs:
    """Runs jobs under the limits; one instance per server."""

    def __init__(self, limits: Limits, store: str | None = None):
        if limits.concurrent < 1:
            raise ValueError("at least one concurrent evaluation")
        if not limits.timeout_s > 0:
            raise ValueError("the time limit must be positive")
        self.limits = limits
        self.store = store
        self.slots = anyio.Semaphore(limits.concurrent)
        self.running = 0

    def timeout_for(self, kind: str, asked: float | None) -> float:
        t = DEFAULT_TIMEOUTS.get(kind, self.limits.timeout_s)
        if asked is not None and asked > 0:
            t = asked
        return min(t, self.limits.timeout_s)

    async def run(self, kind: str, args: dict[str, Any], workdir: Path, timeout: float | None = None
                  ) -> dict[str, Any]:
        """The job's result document ({"ok": ..., "doc" | "status"/"reason"/"message"}), never raising for a
        timeout or a crash of the job."""
        limit = self.timeout_for(kind, timeout)
        t0 = time.monotonic()
        if self.limits.call_timeout is not None and "call_timeout" not in args:
            args = {**args, "call_timeout": self.limits.call_timeout}
        with anyio.move_on_after(limit) as waiting:
            await self.slots.acquire()
        if waiting.cancelled_caught:
            return _error("busy", f"no evaluation slot came free within {limit:g} s ({self.limits.concurrent} at "
                                  "once): try again later")
        try:
            self.running += 1
            return await self._spawn(kind, args, workdir, limit - (time.monotonic() - t0))
        finally:
            self.running -= 1
            self.slots.release()

    async def _spawn(self, kind: str, args: dict[str, Any], workdir: Path, limit: float) -> dict[str, Any]:
        result, logf = workdir / f"{kind}.result.json", workdir / f"{kind}.log"
        req = workdir / f"{kind}.request.json"
        req.write_text(json.dumps({"kind": kind, "args": args, "store": self.store, "result": str(result),
                                   "parent": os.getpid()}))
        env = {k: v for k, v in os.environ.items() if k not in DROP_ENV}
        with open(logf, "wb") as out:
            proc = await anyio.open_process([sys.executable, "-m", "kernelgate.mcp.jobs", str(req)],
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                                            start_new_session=True, cwd=os.getcwd())
        timed_out = False
        try:
            with anyio.move_on_after(max(limit, 0.1)) as scope:
                await proc.wait()
            timed_out = scope.cancelled_caught
        finally:
            if proc.returncode is None:          # out of time, or the call was cancelled: stop it
                with anyio.CancelScope(shield=True):
                    await stop(proc)
        log.info("%s job pid %s: exit %s%s", kind, proc.pid, proc.returncode, " (timed out)" if timed_out else "")
        try:
            doc = json.loads(result.read_text())
        except (OSError, ValueError):
            doc = None
        if timed_out:
            return _error("timeout", f"the call ran past its time limit ({limit:.0f} s) and was stopped"
                          + (f"; {doc.get('message')}" if doc and not doc.get("ok") else ""))
        if doc is None:
            tail = _tail(logf)
            return _error("crash", f"the evaluation process ended with status {proc.returncode} and no result"
                          + (f": {tail}" if tail else ""))
        return doc


async def stop(proc: Any) -> None:
    """SIGTERM the job, then SIGKILL it and what is left below it."""
    below = descendants(proc.pid)
    _signal(proc.pid, signal.SIGTERM)
    with anyio.move_on_after(GRACE_S):
        await proc.wait()
    below |= descendants(proc.pid)
    for pid in [proc.pid, *sorted(below)]:
        _signal(pid, signal.SIGKILL, group=True)
    with anyio.move_on_after(5):
        await proc.wait()


def _signal(pid: int, sig: int, group: bool = False) -> None:
    try:
        if group:
            os.killpg(pid, sig)          # a worker leads its own session and process group
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc's children lists (empty where /proc has none)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            for k in kids:
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


def _error(reason: str, message: str) -> dict[str, Any]:
    return {"ok": False, "status": "error", "reason": reason, "message": message}


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-6:])[-LOG_TAIL:]


NAME = re.compile(r"[^A-Za-z0-9_]+")


@contextmanager
def workspace() -> Iterator[Path]:
    """A private temporary directory for one call (candidate files, the job's request, result and log)."""
    d = Path(tempfile.mkdtemp(prefix="kernelgate-mcp-"))
    os.chmod(d, 0o700)
    try:
        yield d
    finally:
        import shutil
        shutil.rmtree(d, ignore_errors=True)


def write_source(d: Path, text: str, name: str | None, taken: set[str] | None = None) -> str:
    """Candidate source text as a file in the call's private directory; its path. `name` becomes the file's stem
    (letters, digits, underscores: bench labels and submit's strategy name use it)."""
    stem = NAME.sub("_", (name or "candidate").strip())[:40].strip("_") or "candidate"
    if stem[0].isdigit():
        stem = f"c_{stem}"
    base, k = stem, 2
    while taken is not None and stem in taken:
        stem, k = f"{base}_{k}", k + 1
    if taken is not None:
        taken.add(stem)
    p = d / f"{stem}.py"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return str(p)
