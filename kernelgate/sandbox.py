"""Worker processes for untrusted code: spawn, scrubbed environment, fresh cache dirs, timeouts, kill.

A crash, hang, `sys.exit`, runaway output or OOM becomes a `WorkerFailure` with a reason, never a hang.
"""
from __future__ import annotations

import logging
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from . import wire
from .errors import KernelgateError
from .records import Reason

log = logging.getLogger(__name__)

SECRET = re.compile(r"(_API_KEY$|_TOKEN$|SECRET)", re.IGNORECASE)
CACHE_VARS = ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH")


class WorkerFailure(Exception):
    """The worker died, timed out, printed too much, or reported a failure of the candidate."""

    def __init__(self, reason: Reason, message: str, detail: str = ""):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.detail = detail


def scrubbed_env(workdir: Path) -> dict[str, str]:
    """The parent's environment minus secrets, with private temp and cache directories."""
    env = {k: v for k, v in os.environ.items() if not SECRET.search(k)}
    for var in ("TMPDIR",) + CACHE_VARS:
        d = workdir / var.lower()
        d.mkdir(parents=True, exist_ok=True)
        env[var] = str(d)
    pkg_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else pkg_root
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class _Drain(threading.Thread):
    """Reads a worker's stdout/stderr, keeps the tail, and kills the worker past the byte limit."""

    def __init__(self, stream, limit: int, on_limit):
        super().__init__(daemon=True)
        self.stream, self.limit, self.on_limit = stream, limit, on_limit
        self.count = 0
        self.tail = b""

    def run(self) -> None:
        while True:
            chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            if not chunk:
                return
            self.count += len(chunk)
            self.tail = (self.tail + chunk)[-2000:]
            if self.count > self.limit:
                self.on_limit()
                return


class Worker:
    """One spawned process that hosts one model (a candidate or a baseline)."""

    def __init__(self, label: str = "candidate", *, output_limit: int = 4 << 20, memory_limit: int | None = None):
        self.label = label
        self.output_limit = output_limit
        self.memory_limit = memory_limit
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="kernelgate-"))
        self.over_limit = False
        self.drains: list[_Drain] = []
        self.device = "cpu"             # where tensors of replies are placed (the judge's device)
        self.reply_capacity = 0         # bytes of the worker->judge shared region (0: replies inline)
        self._in: wire.Bulk | None = None
        self._out: wire.Bulk | None = None

    def start(self) -> None:
        parent, child = socket.socketpair()
        env = scrubbed_env(self.workdir)
        mem = self.memory_limit

        def limits() -> None:
            if mem:
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelgate.worker", str(child.fileno())],
            pass_fds=(child.fileno(),), env=env, cwd=self.workdir, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=limits)
        child.close()
        self.conn = Connection(parent.detach())
        for stream in (self.proc.stdout, self.proc.stderr):
            d = _Drain(stream, self.output_limit, self._output_limit_hit)
            d.start()
            self.drains.append(d)

    def _output_limit_hit(self) -> None:
        self.over_limit = True
        self.kill()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def os_threads(self) -> int:
        """Thread count of the worker read from outside it (/proc), 0 where unavailable."""
        try:
            return len(os.listdir(f"/proc/{self.pid}/task"))
        except OSError:
            return 0

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; return the reply or raise WorkerFailure (the worker is then dead)."""
        if self.proc is None:
            self.start()
        assert self.conn is not None
        try:
            data = wire.encode(self._pack(msg))
        except OSError as e:     # the judge's side (no room for a shared region): not the candidate's doing
            raise KernelgateError(f"cannot stage {msg['op']} for the worker: {e} (free space in /dev/shm or "
                                  "$TMPDIR)") from e
        try:
            self.conn.send_bytes(data)
            deadline = time.monotonic() + timeout
            while not self.conn.poll(0.05):
                if self.proc.poll() is not None or self.over_limit:
                    raise EOFError
                if time.monotonic() > deadline:
                    self.kill()
                    raise WorkerFailure(Reason.TIMEOUT, f"{msg['op']} did not finish within {timeout:g} s; killed")
            reply = wire.unpack(wire.decode(self.conn.recv_bytes()), self._out, self.device)
            for region in (self._in, self._out):
                if region is not None:
                    region.unlink()          # mapped on both sides by now; the name is no longer needed
        except (EOFError, OSError, BrokenPipeError, ConnectionError):
            raise self._death(msg["op"]) from None
        except WorkerFailure:
            raise
        except Exception as e:  # noqa: BLE001 - an undecodable reply is the candidate's doing
            self.kill()
            raise WorkerFailure(Reason.CRASH, f"unreadable reply from the worker: {type(e).__name__}: {e}") from None
        if not isinstance(reply, dict):
            self.kill()
            raise WorkerFailure(Reason.CRASH, "malformed reply from the worker")
        if "error" in reply:
            reason = {"build_error": Reason.BUILD_ERROR, "exit": Reason.EXIT,
                      "output_type": Reason.OUTPUT_TYPE}.get(reply["error"], Reason.CRASH)
            raise WorkerFailure(reason, str(reply.get("message", "")), str(reply.get("traceback", "")))
        return reply

    def _pack(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Large tensors into the judge->worker region (grown as needed); name both regions in the message."""
        need = wire.bulk_bytes(msg)
        if need and (self._in is None or self._in.size < need):
            if self._in is not None:
                self._in.unlink()
            self._in = wire.Bulk.create(max(need, 2 * self._in.size if self._in else 0))
        if self.reply_capacity and (self._out is None or self._out.size < self.reply_capacity):
            if self._out is not None:
                self._out.unlink()
            self._out = wire.Bulk.create(self.reply_capacity)
        packed = wire.pack(msg, self._in) if need else dict(msg)
        packed["_bulk"] = [self._in.path, self._in.size] if self._in else None
        packed["_reply_bulk"] = [self._out.path, self._out.size] if self._out else None
        return packed

    def _death(self, op: str) -> WorkerFailure:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.wait()
        for d in self.drains:
            d.join(timeout=1)
        tail = b"".join(d.tail for d in self.drains).decode(errors="replace").strip()[-600:]
        if self.over_limit:
            return WorkerFailure(Reason.OUTPUT_LIMIT,
                                 f"printed more than {self.output_limit >> 20} MiB during {op}; killed", tail)
        if rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            hint = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed (out of memory?)", "SIGABRT": "aborted",
                    "SIGBUS": "bus error", "SIGFPE": "arithmetic fault", "SIGXFSZ": "file size limit"}.get(sig, sig)
            return WorkerFailure(Reason.CRASH, f"worker died during {op}: {hint} ({sig})", tail)
        if rc == 0:
            return WorkerFailure(Reason.EXIT, f"worker exited during {op} (exit code 0)", tail)
        last = tail.splitlines()[-1] if tail else ""
        if "MemoryError" in tail or "out of memory" in tail.lower():
            return WorkerFailure(Reason.CRASH, f"worker ran out of memory during {op}: {last}", tail)
        return WorkerFailure(Reason.EXIT, f"worker exited with code {rc} during {op}" + (f": {last}" if last else ""),
                             tail)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()

    def close(self) -> None:
        """Stop the worker (politely, then by force) and remove its private directories."""
        if self.proc and self.proc.poll() is None and self.conn is not None:
            try:
                self.conn.send_bytes(wire.encode({"op": "exit"}))
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self.proc:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.conn is not None:
            self.conn.close()
        for region in (self._in, self._out):
            if region is not None:
                region.unlink()
        self._in = self._out = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Spares:
    """Workers started ahead of need, for a caller that judges one candidate after another (optimize):
    the next candidate's interpreter start and torch import overlap the current candidate's checks.
    A spare has loaded no candidate code, and every candidate still gets a process of its own."""

    def __init__(self, *, output_limit: int = 4 << 20, memory_limit: int | None = None):
        self.output_limit, self.memory_limit = output_limit, memory_limit
        self._spare: Worker | None = None

    def take(self, label: str = "candidate") -> Worker:
        """The spare if it is alive (then none is left until refill), else a new, unstarted worker."""
        w, self._spare = self._spare, None
        if w is None or w.proc is None or w.proc.poll() is not None:
            if w is not None:
                w.close()
            w = Worker(label, output_limit=self.output_limit, memory_limit=self.memory_limit)
        w.label = label
        return w

    def refill(self) -> None:
        """Start the next spare now (its start-up runs while the caller works)."""
        if self._spare is None:
            w = Worker("spare", output_limit=self.output_limit, memory_limit=self.memory_limit)
            w.start()
            self._spare = w

    def close(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None
