"""Where a suite's problems run. Each problem runs in a child process of its own (kernelgate.suite.child);
an executor starts them, enforces the per-problem timeout, and hands each finished attempt to the driver,
which alone writes results (status files, summary).

LocalPool: one slot per GPU (CUDA_VISIBLE_DEVICES pinned per slot) or, on a CPU, `--workers N` slots; the
host's cores are split between slots (affinity and OMP/MKL thread counts). A slot whose process dies
(kill -9, OOM killer) gets the next problem in a fresh process; the driver decides whether the dead one's
problem is tried again. RayExecutor: the same over a Ray cluster (Ray's GPU resources; each task runs the
child in a private directory on its node and returns the files; the driver writes them).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from ..errors import KernelgateError, MissingExtra
from ..records import Reason
from .child import OUTCOME
from .discover import Problem

POLL_S = 0.2
TERM_GRACE_S = 15.0            # SIGTERM, then SIGKILL after this long
LOG_TAIL = 64 << 10


@dataclass
class Job:
    """One problem in a suite's plan: where its outputs go and what was tried so far."""

    problem: Problem
    dir: Path
    index: int                                  # 1-based position in the plan
    attempts: list[dict[str, Any]] = field(default_factory=list)
    number: int = 0                             # 1-based order in which this run started it (progress lines)


@dataclass
class Attempt:
    """One run of a problem's child process, as the executor saw it."""

    rc: int | None                              # exit status; negative: killed by that signal; None: lost
    seconds: float
    slot: str
    device: str | None = None
    timed_out: bool = False
    log_tail: str = ""
    files: dict[str, bytes] | None = None       # Ray: the outputs, for the driver to write
    store: bytes | None = None                  # Ray: the task's own store (SQLite), for the driver to merge
    log: str | None = None                      # Ray: the whole log, for the driver to write
    lost: str | None = None                     # why no exit status came back (a Ray worker that died)

    @property
    def outcome(self) -> dict[str, Any] | None:
        """The child's OUTCOME line, if it got that far."""
        import json
        for line in reversed(self.log_tail.splitlines()):
            if line.startswith(OUTCOME):
                try:
                    return json.loads(line[len(OUTCOME):])
                except ValueError:
                    return None
        return None

    def to_json(self) -> dict[str, Any]:
        return {"rc": self.rc, "seconds": round(self.seconds, 3), "slot": self.slot, "device": self.device,
                "timed_out": self.timed_out, "lost": self.lost}


@dataclass(frozen=True)
class Slot:
    """A place one problem runs at a time: an index, a GPU (CUDA_VISIBLE_DEVICES) or none, a share of cores."""

    index: int
    device: str | None
    cpus: tuple[int, ...] = ()
    name: str = "slot"

    @property
    def label(self) -> str:
        return f"{self.name} {self.index}" + (f" (GPU {self.device})" if self.device is not None else "")


#: (job, slot, model path, out dir) -> argv of the child process
Command = Callable[[Job, Slot, str, str], list[str]]
Launch = Callable[[Job, Slot], None]
Done = Callable[[Job, Attempt], bool]           # True: queue the job again (a retry)


class Executor(Protocol):
    def run(self, jobs: list[Job], command: Command, on_start: Launch, on_done: Done) -> None: ...


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else torch's count."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    try:
        import torch
        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no CUDA build, no driver: no GPUs
        return []


def plan_slots(target: str, workers: int | None = None, devices: str | None = None) -> list[Slot]:
    """--target cuda: one slot per GPU (--devices 0,1 or the visible ones; --workers N takes the first N);
    on a CPU, --workers N slots (default 1) with `devices` as fake ids when given (tests). Cores are split
    evenly when there is more than one slot."""
    ids = [d.strip() for d in devices.split(",") if d.strip()] if devices else None
    if target.startswith("cuda"):
        ids = ids if ids is not None else visible_gpus()
        if not ids:
            raise KernelgateError("suite --target cuda: no GPU visible", Reason.NO_DEVICE)
        if workers is not None:
            if workers > len(ids):
                raise KernelgateError(f"--workers {workers}: only {len(ids)} GPUs ({', '.join(ids)})", Reason.USAGE)
            ids = ids[:workers]
        n = len(ids)
    else:
        n = workers or (len(ids) if ids else 1)
        if ids is not None and len(ids) < n:
            raise KernelgateError(f"--devices names {len(ids)} ids for {n} workers", Reason.USAGE)
    if n < 1:
        raise KernelgateError(f"--workers must be at least 1, got {n}", Reason.USAGE)
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cores = list(range(os.cpu_count() or 1))
    per = max(1, len(cores) // n)
    slots = []
    for i in range(n):
        share = tuple(cores[i * per:(i + 1) * per]) if len(cores) >= n else (cores[i % len(cores)],)
        slots.append(Slot(i, ids[i] if ids is not None else None, share if n > 1 else ()))
    return slots


def slot_env(slot: Slot, base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: its GPU and its share of cores (threads), nothing else changed."""
    env = dict(os.environ if base is None else base)
    if slot.device is not None:
        env["CUDA_VISIBLE_DEVICES"] = slot.device
    if slot.cpus:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[k] = str(len(slot.cpus))
    env["KERNELGATE_SUITE_SLOT"] = str(slot.index)
    return env


def _tail(path: Path, limit: int = LOG_TAIL) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _stop(proc: subprocess.Popen, grace: float = TERM_GRACE_S) -> None:
    """SIGTERM (the child unwinds and closes its workers), SIGKILL after `grace` seconds."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


@dataclass
class _Running:
    job: Job
    proc: subprocess.Popen
    t0: float
    log: Path
    timed_out: bool = False


class LocalPool:
    """Slots on this host, one child process per problem at a time, scheduled from this one thread (so that the
    children's PR_SET_PDEATHSIG is tied to the driver's life, not a helper thread's)."""

    def __init__(self, slots: list[Slot], timeout_s: float | None = None):
        self.slots = slots
        self.timeout_s = timeout_s

    def run(self, jobs: list[Job], command: Command, on_start: Launch, on_done: Done) -> None:
        queue: deque[Job] = deque(jobs)
        running: dict[int, _Running] = {}
        try:
            while queue or running:
                for slot in self.slots:
                    if slot.index not in running and queue:
                        job = queue.popleft()
                        running[slot.index] = self._start(job, slot, command)
                        on_start(job, slot)
                time.sleep(POLL_S)
                for slot in self.slots:
                    r = running.get(slot.index)
                    if r is None:
                        continue
                    if r.proc.poll() is None:
                        if self.timeout_s is not None and time.monotonic() - r.t0 > self.timeout_s and not r.timed_out:
                            r.timed_out = True
                            _stop(r.proc)
                        else:
                            continue
                    del running[slot.index]
                    att = Attempt(r.proc.returncode, time.monotonic() - r.t0, str(slot.index), slot.device,
                                  r.timed_out, _tail(r.log))
                    if on_done(r.job, att):
                        queue.appendleft(r.job)             # tried again first, in a fresh process
        except BaseException:
            for r in running.values():
                _stop(r.proc, grace=5.0)
            raise

    def _start(self, job: Job, slot: Slot, command: Command) -> _Running:
        job.dir.mkdir(parents=True, exist_ok=True)
        log = job.dir / "optimize.log"
        with open(log, "a") as f:
            f.write(f"--- attempt {len(job.attempts) + 1} of {job.problem.id} on {slot.label}, "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S')} ---\n")
            f.flush()
            proc = subprocess.Popen(command(job, slot, job.problem.path, str(job.dir)), stdin=subprocess.DEVNULL,
                                    stdout=f, stderr=subprocess.STDOUT, env=slot_env(slot))
        return _Running(job, proc, time.monotonic(), log)


# ------------------------------------------------------------------ Ray

def _ray_task(spec: dict[str, Any]) -> dict[str, Any]:
    """On a Ray worker: the problem's source written into a private directory, the child run there with its
    out dir and its own store beside it, and every file it wrote and the store returned (the driver writes the
    files into the suite's out dir and merges the store into its own: the driver alone writes either)."""
    import sqlite3
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernelgate-suite-") as tmp:
        model = Path(tmp) / "problem" / spec["file"]
        model.parent.mkdir()
        model.write_text(spec["source"])
        out = Path(tmp) / "out"
        argv = [a.replace("{model}", str(model)).replace("{out}", str(out)).replace("{parent}", str(os.getpid()))
                for a in spec["argv"]]
        env = dict(os.environ)
        env.update(spec.get("env") or {})
        store = Path(tmp) / "store.sqlite"
        env["KERNELGATE_STORE"] = str(store)
        timed_out = False
        with open(Path(tmp) / "log", "w") as f:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env)
            try:
                proc.wait(spec.get("timeout"))
            except subprocess.TimeoutExpired:
                timed_out = True
                _stop(proc)
        files = {}
        if out.is_dir():
            for p in out.rglob("*"):
                if p.is_file():
                    files[str(p.relative_to(out))] = p.read_bytes()
        kept = None
        if store.exists():
            try:
                db = sqlite3.connect(store)
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")        # every record in the main file
                db.close()
                kept = store.read_bytes()
            except sqlite3.Error:
                kept = None
        return {"rc": proc.returncode, "seconds": time.monotonic() - t0, "timed_out": timed_out,
                "log": (Path(tmp) / "log").read_text(errors="replace"), "files": files, "store": kept,
                "device": os.environ.get("CUDA_VISIBLE_DEVICES"), "node": os.uname().nodename}


def import_ray():
    try:
        import ray
    except ImportError:
        raise MissingExtra("ray", "ray") from None
    return ray


class RayExecutor:
    """Problems as Ray tasks: one GPU each for --target cuda (Ray places them), `cpus` cores each. At most
    `workers` in flight (default: the cluster's GPUs, or its CPUs / cpus). A task whose worker dies comes back
    as an attempt with no exit status (`lost`), which the driver retries once like a killed local child."""

    def __init__(self, target: str, address: str | None = None, workers: int | None = None, cpus: float = 1.0,
                 timeout_s: float | None = None):
        self.ray = import_ray()
        self.target, self.address, self.workers, self.cpus, self.timeout_s = target, address, workers, cpus, timeout_s

    def run(self, jobs: list[Job], command: Command, on_start: Launch, on_done: Done) -> None:
        ray = self.ray
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        try:
            gpus = 1 if self.target.startswith("cuda") else 0
            res = ray.cluster_resources()
            limit = self.workers or max(1, int(res.get("GPU", 0)) if gpus else int(res.get("CPU", 1) // self.cpus))
            task = ray.remote(num_gpus=gpus, num_cpus=self.cpus, max_retries=0)(_ray_task)
            queue: deque[Job] = deque(jobs)
            flight: dict[Any, tuple[Job, float, Slot]] = {}
            n = 0
            while queue or flight:
                while queue and len(flight) < limit:
                    job = queue.popleft()
                    slot = Slot(n, None, name="Ray task")
                    n += 1
                    spec = {"file": Path(job.problem.path).name, "source": Path(job.problem.path).read_text(),
                            "argv": command(job, slot, "{model}", "{out}"), "timeout": self.timeout_s,
                            "env": {"KERNELGATE_SUITE_SLOT": "ray"}}
                    flight[task.remote(spec)] = (job, time.monotonic(), slot)
                    on_start(job, slot)
                done, _ = ray.wait(list(flight), num_returns=1, timeout=1.0)
                for ref in done:
                    job, t0, slot = flight.pop(ref)
                    try:
                        out = ray.get(ref)
                        att = Attempt(out["rc"], out["seconds"], f"ray:{out['node']}", out["device"],
                                      out["timed_out"], out["log"][-LOG_TAIL:], out["files"], out["store"],
                                      out["log"])
                    except Exception as e:  # noqa: BLE001 - a worker that died, a node lost: no exit status
                        att = Attempt(None, time.monotonic() - t0, "ray", None, lost=f"{type(e).__name__}: "
                                      f"{str(e).splitlines()[0] if str(e) else ''}")
                    if on_done(job, att):
                        queue.appendleft(job)
        finally:
            if started_here:
                ray.shutdown()


def child_command(target: str, budget: str, max_candidates: int, seed: int, store: str | None) -> Command:
    """The real child: `python -m kernelgate.suite.child` with optimize's arguments; continues an interrupted
    optimize in the same directory (--resume) when one left its run.json without a result, else starts anew
    (--force clears what an earlier attempt left)."""
    def argv(job: Job, slot: Slot, model: str, out: str) -> list[str]:
        a = [sys.executable, "-m", "kernelgate.suite.child", model, "--out", out, "--target", target,
             "--budget", str(budget), "--max-candidates", str(max_candidates), "--seed", str(seed),
             "--parent", "{parent}" if model == "{model}" else str(os.getpid())]
        if store:
            a += ["--store", store]
        if slot.cpus:
            a += ["--cpus", ",".join(map(str, slot.cpus))]
        interrupted = model != "{model}" and (job.dir / "run.json").exists() and not (job.dir / "result.json").exists()
        a.append("--resume" if interrupted else "--force")
        return a
    return argv


def template_command(template: list[str]) -> Command:
    """A command from an argv template ({model}, {out}, {attempt}, {slot}, {device} filled in): tests put a
    stand-in for the child here."""
    def argv(job: Job, slot: Slot, model: str, out: str) -> list[str]:
        parent = "{parent}" if model == "{model}" else str(os.getpid())      # Ray: filled in on the node
        return [a.replace("{model}", model).replace("{out}", out).replace("{attempt}", str(len(job.attempts) + 1))
                .replace("{slot}", str(slot.index)).replace("{device}", slot.device or "")
                .replace("{parent}", parent) for a in template]
    return argv
