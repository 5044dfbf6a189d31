"""Worker processes for untrusted code: spawn, confinement, scrubbed environment, fresh cache dirs,
timeouts, freezing, and killing with every descendant.

A crash, hang, `sys.exit`, runaway output or OOM becomes a `WorkerFailure` with a reason, never a hang.
Confinement (kernelgate/sandbox/isolation.py) is applied between fork and exec and checked from /proc; what a
worker actually got is `Worker.protections`. A worker's processes are found from outside (/proc): its
session (setsid is refused to them), its process group, and descendants by parent links; orphans are
reparented to the judge (a child subreaper), which reaps those it identified as the worker's.
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

from . import ipc, isolation
from .audit import EXIT_INTRUSION
from ..errors import KernelgateError
from ..records import Reason
from .compiler import compiler_error

log = logging.getLogger(__name__)

#: credentials stay out of the worker: keys, tokens, passwords, credential files, SDK header settings (an
#: Authorization header), and whole families of provider settings
SECRET = re.compile(r"(_KEY$|_KEY_ID$|_TOKEN$|SECRET|PASSW|CREDENTIAL|_HEADERS$|AUTH"
                    r"|^(OPENAI|ANTHROPIC|HF|HUGGING_?FACE|AWS|AZURE|GOOGLE|GCP)_)", re.IGNORECASE)
#: the gate's own settings stay out of the worker too: a candidate must not tell the gate by them
GATE_VARS = re.compile(r"^KERNELGATE_")
CACHE_VARS = ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH")
#: other places libraries write by default (~/.triton, ~/.cache): private too, the rest of the filesystem is read-only
HOME_VARS = ("TRITON_HOME", "XDG_CACHE_HOME", "TORCH_HOME")


class WorkerFailure(Exception):
    """The worker died, timed out, printed too much, or reported a failure of the candidate. A build's compiler
    error (C++, CUDA, Triton) comes first in the message, in one line (`compiler_error`): what a person or an
    agent fixes first, rather than a build log's command lines."""

    def __init__(self, reason: Reason, message: str, detail: str = ""):
        line = compiler_error(message + "\n" + detail)
        if line and line not in message:
            first = (message.splitlines()[0] if message else "").split(": [", 1)[0]    # less a build log's command
            message = f"compiler error: {line}" + (f" ({first[:160]})" if first else "")
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.detail = detail


WORKER_THREADS = 1        # every worker's intra-op CPU threads (scrubbed_env: docs/GATE.md, timing hygiene)
#: the compilers' caches a trusted worker shares (`Worker(cache=...)`)
SHARED_CACHE_VARS = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def scrubbed_env(workdir: Path, cache: Path | None = None) -> dict[str, str]:
    """The parent's environment minus secrets, with private temp and cache directories (the compilers'
    caches in `cache` instead, where given)."""
    env = {k: v for k, v in os.environ.items() if not SECRET.search(k) and not GATE_VARS.search(k)}
    for var in ("TMPDIR",) + CACHE_VARS + HOME_VARS:
        d = (cache / var.lower()) if cache is not None and var in SHARED_CACHE_VARS else workdir / var.lower()
        d.mkdir(parents=True, exist_ok=True)
        env[var] = str(d)
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"      # no pool of compile subprocesses that outlives the build
    # the judge answers every timed iteration: OpenMP threads spinning after each parallel region would take
    # the cores it needs on a small machine (the same setting for every implementation, baselines included)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # libgomp retires surplus pool threads at a smaller team and restarts them for a larger one, which the
    # lockdown refuses (libgomp then aborted every worker on a 16-core host): one thread, for every implementation
    env.update(dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), str(WORKER_THREADS)))
    # the directory holding the judge's own kernelgate package (its parent, not the package): a worker imports the
    # same code as its judge, whatever other copy an install put on the path
    pkg_root = str(Path(__file__).resolve().parents[2])
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


def _scan() -> dict[int, tuple[str, int, int, int]]:
    """Every process: pid -> (state, ppid, process group, session), from /proc/<pid>/stat."""
    out: dict[int, tuple[str, int, int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                rest = f.read().rpartition(b")")[2].split()
            state = rest[0].decode()
            if state == "Z":                    # the leader thread is gone; the others may still run
                state = _group_state(name)
            out[int(name)] = (state, int(rest[1]), int(rest[2]), int(rest[3]))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _group_state(pid: str) -> str:
    """State of a process whose leader thread has exited: that of a thread still there (running or
    stopped), else Z."""
    try:
        tids = [t for t in os.listdir(f"/proc/{pid}/task") if t != pid]
    except OSError:
        return "Z"
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/stat", "rb") as f:
                st = f.read().rpartition(b")")[2].split()[0].decode()
        except (OSError, IndexError):
            continue
        if st not in "ZX":
            return st
    return "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


class Worker:
    """One spawned process that hosts one model (a candidate or a baseline)."""

    def __init__(self, label: str = "candidate", *, output_limit: int = 4 << 20, memory_limit: int | None = None,
                 cache: Path | str | None = None):
        """`cache`: a compile cache shared by trusted workers only (the reference as a baseline, a module
        kernelgate emitted from it), across workers and runs: torch.compile's and Triton's caches go there
        instead of the worker's private directory. Used only where `isolation.confines_files()` (no
        candidate's worker can write it, so none can plant code a baseline would load); ignored elsewhere."""
        self.label = label
        self.cache = Path(cache) if cache is not None and isolation.confines_files() else None
        self.output_limit = output_limit
        self.memory_limit = memory_limit
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="tmp"))      # a name that says nothing of the gate
        self.over_limit = False
        self._early: bytes | None = None     # a final reply that arrived where a streamed step was awaited
        self.drains: list[_Drain] = []
        self.device = "cpu"             # where tensors of replies are placed (the judge's device)
        self.reply_capacity = 0         # bytes of the worker->judge shared region (0: replies inline)
        self._in: ipc.Bulk | None = None
        self._out: ipc.Bulk | None = None
        self._regions: socket.socket | None = None     # the judge's end of the channel regions travel on
        #: the protections this worker actually has (measured at start, and by `lockdown`); entries for those
        #: missing on this machine start with "missing:"
        self.protections: tuple[str, ...] = ()
        self.frozen = False
        self.locked = False
        self._gone = False              # killed, every descendant gone, and reaped: nothing to look for
        self._lock = threading.Lock()

    def start(self) -> None:
        isolation.judge_setup()
        parent, child = socket.socketpair()
        rparent, rchild = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = scrubbed_env(self.workdir, self.cache)
        mem = self.memory_limit
        confine = isolation.Confinement(self.workdir, (self.cache,) if self.cache is not None else ())

        def limits() -> None:
            if mem:
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            confine.apply()

        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernelgate.sandbox.worker", str(child.fileno()), str(rchild.fileno())],
                pass_fds=(child.fileno(), rchild.fileno()) + confine.pass_fds, env=env, cwd=self.workdir,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                preexec_fn=limits)
            report = confine.report()
        except BaseException:
            parent.close()
            rparent.close()
            raise
        finally:
            confine.close()
            child.close()
            rchild.close()
        self.conn = Connection(parent.detach())
        self._regions = rparent
        self._key = os.urandom(32)            # sent with the first request; every reply is signed with it
        self._keyed = False
        self._open = ipc.opener(self._key)
        self.protections = isolation.verify_start(self.proc.pid, report) + (
            ("sealed shared memory",) if isolation.sealed_memory() else
            ("missing: sealed shared memory (a worker could truncate a region under the judge)",))
        for stream in (self.proc.stdout, self.proc.stderr):
            d = _Drain(stream, self.output_limit, self._output_limit_hit)
            d.start()
            self.drains.append(d)

    def library_paths(self, candidate_files: list[str]) -> tuple[str, ...]:
        """The directories the user vouches for as library code (KERNELGATE_LIBRARY_PATH: packages installed with
        `pip --target`, a vendored tree), which this worker's guard then treats as it treats site-packages. Being
        on PYTHONPATH is not enough: whoever writes a candidate can often write next to it. Kept only while the
        worker is confined to its own files (Landlock, measured at start), and only absolute directories whose
        spelled and real paths agree (no `..` across a symlink), that hold none of `candidate_files`, and that
        neither hold nor lie under a directory the worker can write. Each comes back in both spellings (a
        symlinked entry: the path imports use, and the real one)."""
        if not any(p.startswith("landlock abi") for p in self.protections):
            return ()
        writable = [os.path.realpath(d) for d in (self.workdir, self.cache) if d is not None]
        held = {g for f in candidate_files if f for g in (os.path.abspath(f), os.path.realpath(f))}

        def under(path: str, root: str) -> bool:
            return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

        out: list[str] = []
        for entry in os.environ.get("KERNELGATE_LIBRARY_PATH", "").split(os.pathsep):
            if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
                continue
            spelled, real = os.path.normpath(entry), os.path.realpath(entry)
            if os.path.realpath(spelled) != real:           # normalising crossed a symlink: two different places
                continue
            forms = (spelled, real)
            if any(under(f, r) for f in held for r in forms) or any(
                    under(w, real) or under(real, w) for w in writable):
                continue
            out += forms
        return tuple(dict.fromkeys(out))

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

    # ------------------------------------------------------------ the worker's processes, seen from outside
    def _exited(self) -> bool:
        """Whether the worker process has ended, without reaping it (a zombie keeps its pid, so the pid
        cannot be reused before its descendants are dealt with)."""
        assert self.proc is not None
        if self.proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except (AttributeError, ChildProcessError, OSError):
            return self.proc.poll() is not None

    def alive(self) -> bool:
        return self.proc is not None and not self._exited()

    def processes(self) -> dict[int, str]:
        """The worker and every process descended from it, alive or zombie: pid -> state letter (/proc).
        Found by session and process group (setsid is refused to the worker's processes, so a daemon stays
        in the session) and by parent links from the worker while its pid is still its own (not reaped)."""
        if self.proc is None or self._gone or not sys.platform.startswith("linux"):
            return {}
        root = self.proc.pid
        own_pid = self.proc.returncode is None          # not reaped: the number cannot have been reused
        procs = _scan()
        found = {p for p, (_, _, pgrp, sid) in procs.items() if sid == root or pgrp == root}
        if own_pid and root in procs:
            found.add(root)
            children: dict[int, list[int]] = {}
            for p, (_, ppid, _, _) in procs.items():
                children.setdefault(ppid, []).append(p)
            todo = list(found)
            while todo:
                for c in children.get(todo.pop(), []):
                    if c not in found:
                        found.add(c)
                        todo.append(c)
        return {p: procs[p][0] for p in found}

    def descendants(self) -> list[int]:
        """Live processes of the worker's tree other than the worker itself (after `lockdown` there should
        be none: a non-empty list means a process was started anyway)."""
        root = self.proc.pid if self.proc else -1
        return sorted(p for p, st in self.processes().items() if p != root and st not in "ZX")

    def _kill_tree(self, include_root: bool = True, deadline_s: float = 10.0, settle: bool = False) -> None:
        """SIGSTOP every process of the tree (a stopped process cannot fork), then SIGKILL, until none is left
        alive; reap the orphans the judge adopted (only those identified as this worker's). With `settle`,
        also until no zombie of the tree is left (they reach the judge, as subreaper, once their parent's
        last thread is gone)."""
        root = self.proc.pid if self.proc else -1
        me = os.getpid()
        killed: set[int] = set()
        deadline = time.monotonic() + deadline_s
        while True:
            tree = {p: st for p, st in self.processes().items() if include_root or p != root}
            live = [p for p, st in tree.items() if st not in "ZX"]
            fresh = [p for p in live if p not in killed]
            for p in fresh:
                _signal(p, signal.SIGSTOP)
            for p in fresh:
                _signal(p, signal.SIGKILL)
                killed.add(p)
            if include_root and root not in killed and self.proc and self.proc.returncode is None:
                if not sys.platform.startswith("linux"):
                    try:
                        os.killpg(root, signal.SIGKILL)   # no /proc: its process group at least
                    except OSError:
                        pass
                _signal(root, signal.SIGKILL)        # not in /proc any more, or not scanned: by pid, once
                killed.add(root)
            procs = _scan() if tree else {}
            for p in tree:
                if p != root and p in procs and procs[p][1] == me and procs[p][0] == "Z":
                    try:
                        os.waitpid(p, os.WNOHANG)
                    except ChildProcessError:
                        pass
            if not (tree if settle else live) or time.monotonic() > deadline:
                return
            if not fresh:
                time.sleep(0.005)                    # killed ones still exiting (uninterruptible sleep)

    def freeze(self) -> None:
        """Stop the worker and every descendant (SIGSTOP, repeated until all are stopped), so none of its
        processes can run while others are timed. `thaw` resumes them; `close` kills them stopped."""
        if self.proc is None or self._gone:
            return
        self.frozen = True
        deadline = time.monotonic() + 2.0
        while True:
            running = [p for p, st in self.processes().items() if st not in "TtZX"]
            if not running or time.monotonic() > deadline:
                return
            for p in running:
                _signal(p, signal.SIGSTOP)
            time.sleep(0.001)

    def thaw(self) -> None:
        """Resume what `freeze` stopped."""
        if self.proc is None or self._gone:
            self.frozen = False
            return
        for p in self.processes():
            _signal(p, signal.SIGCONT)
        self.frozen = False

    def lockdown(self, timeout: float = 60.0) -> None:
        """After the build: no new processes or threads. Kills the worker's descendants (build-time children such as
        compilers), has the worker install a seccomp filter on every thread that refuses fork, vfork, clone of
        a process, exec and setting a signal's action (isolation._lockdown_program), then checks from /proc that
        every thread gained a filter (the reply proves nothing: a candidate can replace the op) and kills
        whatever was forked meanwhile."""
        if self.proc is None:
            self.start()
        if self.locked:
            return
        if not isolation.seccomp_supported() or isolation.disabled() or not sys.platform.startswith("linux"):
            missing = "missing: no new processes or signal handler changes after build (no seccomp filters here)"
            self.protections += (missing,) if missing not in self.protections else ()
            return
        self._kill_tree(include_root=False)
        before = isolation.seccomp_filters(self.pid)
        self.request({"op": "lockdown"}, timeout)
        after = isolation.seccomp_filters(self.pid)
        status = isolation.proc_status(self.pid)
        visible, counted = "Seccomp" in status, "Seccomp_filters" in status
        ok = not visible or (status.get("NoNewPrivs", "1") == "1" and status.get("Seccomp") == "2" and bool(after)
                             and min(after) >= 0 and (not counted or min(after) > max(before or [0])))
        if not ok:
            self.kill()
            raise WorkerFailure(Reason.CRASH, "isolation: the worker did not install its process filter",
                                f"seccomp filters per thread before {before}, after {after}; "
                                f"NoNewPrivs {status.get('NoNewPrivs')}, Seccomp {status.get('Seccomp')}")
        self._kill_tree(include_root=False)          # anything forked before the filter took effect
        self.locked = True
        self.protections += ("no new processes after build, no signal handler changes, no new threads (seccomp, " + (
            "verified from /proc)" if counted else "verified from /proc; filter count not shown by this kernel)"
            if visible else "unverified: this kernel's /proc shows no seccomp state)"),)

    # ------------------------------------------------------------ requests
    def _await(self, deadline: float, timeout: float, op: str) -> None:
        """Until the worker has something to read: raises EOFError if it died, WorkerFailure past the deadline."""
        assert self.conn is not None
        while not self.conn.poll(0.05):
            if self._exited() or self.over_limit:
                raise EOFError
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerFailure(Reason.TIMEOUT, f"{op} did not finish within {timeout:g} s; killed")

    def roundtrip(self, data: bytes, timeout: float, op: str) -> bytes | None:
        """Inside a streamed request: send raw bytes, return the worker's raw answer (a per-step message,
        marked b"I"), or None when the worker sent its final reply instead (kept for `request`)."""
        assert self.conn is not None
        self.conn.send_bytes(data)
        self._await(time.monotonic() + timeout, timeout, op)
        got = self._opened(self.conn.recv_bytes(), op)
        if got[:1] == b"I":
            return got[1:]
        self._early = got
        return None

    def request(self, msg: dict[str, Any], timeout: float, stream=None) -> dict[str, Any]:
        """Send one request; return the reply or raise WorkerFailure (the worker is then dead). With
        `stream`, it is called after the request is sent and before the final reply is read, to exchange
        per-step messages through `roundtrip` (the timed loop: one step per iteration, on the judge's clock)."""
        if self.proc is None:
            self.start()
        assert self.conn is not None and self._regions is not None
        if self.frozen:
            raise KernelgateError(f"{msg['op']} sent to a frozen worker ({self.label}); thaw it first")
        if not self._keyed:
            msg = dict(msg, key=self._key)
            self._keyed = True
        try:
            data = ipc.encode(self._pack(msg))
        except OSError as e:     # the judge's side (no memory for a shared region): not the candidate's doing
            raise KernelgateError(f"cannot stage {msg['op']} for the worker: {e} (no memory for a shared "
                                  "region)") from e
        try:
            for region in (self._in, self._out):
                if region is not None:
                    region.send(self._regions)   # its descriptor, once; then closed on this side
            self.conn.send_bytes(data)
            self._early = None
            if stream is not None:
                stream()
            raw = self._early
            if raw is None:
                self._await(time.monotonic() + timeout, timeout, msg["op"])
                raw = self._opened(self.conn.recv_bytes(), msg["op"])
            self._early = None
            reply = ipc.unpack(ipc.decode(raw), self._out, self.device)
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
            reason = {"build_error": Reason.BUILD_ERROR, "exit": Reason.EXIT, "output_type": Reason.OUTPUT_TYPE,
                      "introspection": Reason.INTROSPECTION, "input_mutated": Reason.INPUT_MUTATED,
                      "aliasing": Reason.ALIASING, "flags": Reason.FLAGS}.get(reply["error"], Reason.CRASH)
            raise WorkerFailure(reason, str(reply.get("message", "")), str(reply.get("traceback", "")))
        return reply

    def _opened(self, raw: bytes, op: str) -> bytes:
        """A message of the worker's with its tag checked and removed (ipc.opener); anything else ends the worker."""
        body = self._open(raw)
        if body is None:
            self.kill()
            raise WorkerFailure(Reason.INTROSPECTION, f"a message on the worker's channel during {op} was not "
                                "signed by its harness (another writer took over the channel)")
        return body

    def _pack(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Large tensors into the judge->worker region (grown as needed); name both regions in the message."""
        need = ipc.bulk_bytes(msg, strided=True)
        if need and (self._in is None or self._in.size < need):
            size = ipc.grown(self._in.size if self._in else 0, need)
            if self._in is not None:           # gone before the new one is made: never both reserved here
                self._in.close()
                self._in = None
            self._in = ipc.Bulk.create(size)
        wants = self._out is not None or msg.get("op") in ipc.BULK_REPLIES
        if self.reply_capacity and wants and (self._out is None or self._out.size < self.reply_capacity):
            if self._out is not None:
                self._out.close()
                self._out = None
            self._out = ipc.Bulk.create(self.reply_capacity)
        packed = ipc.pack(msg, self._in, strided=True) if need else dict(msg)
        packed["_bulk"] = [self._in.ident, self._in.size] if self._in else None
        packed["_reply_bulk"] = [self._out.ident, self._out.size] if self._out else None
        return packed

    def shed(self) -> None:
        """Drop both shared regions on this side (the lean memory plan, after the worker released its own
        mappings): each holds up to a task's worth of host memory, reserved, for as long as it is mapped. The
        next request that carries tensors makes a region of the size it needs."""
        for region in (self._in, self._out):
            if region is not None:
                region.close()
        self._in = self._out = None

    def _death(self, op: str) -> WorkerFailure:
        assert self.proc is not None
        deadline = time.monotonic() + 5
        while not self._exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.kill()                                  # what is left of it, and its descendants; reaps it
        rc = self.proc.returncode if self.proc.returncode is not None else self.proc.wait()
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
        if rc == EXIT_INTRUSION:     # the worker's guard ended it (kernelgate/sandbox/audit.py); its line is the last
            last = tail.splitlines()[-1] if tail else "the worker's guard ended it"
            return WorkerFailure(Reason.INTROSPECTION, f"{last} (during {op})", tail)
        last = tail.splitlines()[-1] if tail else ""
        if "MemoryError" in tail or "out of memory" in tail.lower():
            return WorkerFailure(Reason.CRASH, f"worker ran out of memory during {op}: {last}", tail)
        return WorkerFailure(Reason.EXIT, f"worker exited with code {rc} during {op}" + (f": {last}" if last else ""),
                             tail)

    def kill(self) -> None:
        """Kill the worker and every process of its tree (stopped first, so none can fork meanwhile), then
        reap the worker."""
        if self.proc is None or self._gone:
            return
        with self._lock:
            if self._gone:
                return
            self._kill_tree(include_root=True)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                return
            # children of a thread group are reparented only when its last thread is gone: now, for the
            # worker; zombies adopted since then, and anything its session still holds, are dealt with here
            self._kill_tree(include_root=False, deadline_s=2.0, settle=True)
            self.frozen = False
            self._gone = not self.processes()

    def close(self) -> None:
        """Stop the worker (politely, then by force, with every descendant) and remove its private directories."""
        if self.proc and not self.frozen and self.alive() and self.conn is not None:
            try:
                self.conn.send_bytes(ipc.encode({"op": "exit"}))
                deadline = time.monotonic() + 5
                while not self._exited() and time.monotonic() < deadline:
                    time.sleep(0.01)
            except OSError:
                pass
        self.kill()
        if self.conn is not None:
            self.conn.close()
        if self._regions is not None:
            self._regions.close()
            self._regions = None
        self.shed()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

