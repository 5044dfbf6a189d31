"""The runner thread: where every line of candidate code in the worker runs, on a stack that holds nothing.

Python hands frames to whoever asks for them through library code that walks `f_back` itself (torch's JIT
resolution callbacks, pytest's traceback entries: no audit event sees the walk), and from a frame on the
harness's stack its locals lead to the harness. So the harness (kernelgate/sandbox/worker.py) never calls
candidate code: it hands each call (the import and construction, every forward, the profile) to this thread as a
job, waits, and reads the result. The thread's stack under the candidate's frames is `_run` and `_execute`,
whose locals are the job's box (the function, its arguments, the result), the queue jobs arrive on and the
`done` lock; nothing there leads back.

What candidate code can do to the box, the queue or the lock (they are on its stack) buys it nothing: every job
has a fresh box, and the harness never stores into one it has handed over (a store drops the slot's old value,
which a thread of the candidate's could have set); the harness takes a call as finished only when the thread is
parked again in `_run`'s wait for the next job (read from the interpreter's own view of the thread's stack,
`sys._current_frames`, not from anything the thread could write), so work cannot go on past the harness's clock;
the thread found anywhere else once `done` is released, or the lock released twice, ends the worker. Right after each job, before the harness reads
the result, the guard's integrity check runs (kernelgate/sandbox/guard.py: nothing the harness looks up was
rebound during the job) and gc is switched off again (a collection on the harness's thread would run the
candidate's finalizers there).

Everything the harness side uses is bound when the runner is made (closure cells of the function it gets,
which nothing else references, or default arguments): candidate code can rebind module and class attributes
without an audit event.
"""
from __future__ import annotations

import _queue
import _thread
import dis
import gc
import sys
import threading
import time
import traceback
from typing import Any, Callable

import torch

from ..errors import KernelgateError

# the job box, a list (its item access cannot be redefined):
# [function, arguments, grad enabled, result, error, what the harness hands back to be dropped here]
_FN, _ARGS, _GRAD, _RESULT, _ERROR, _TRASH = range(6)


class CandidateFailure(Exception):
    """A job ended in an exception of the candidate's (or its build's): carries the worker's error reply."""

    def __init__(self, reply: dict):
        super().__init__(reply.get("message", ""))
        self.reply = reply


class BuildFailure(Exception):
    """Raised on the runner by the harness's own job functions: a build error with its message."""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:500] if text else type(e).__name__


def _failure(e: BaseException) -> dict:
    """The error reply for an exception raised by a job, made on the runner thread (describing it can run the
    candidate's code: its __str__, its class's attributes), of plain str values only."""
    try:
        if isinstance(e, BuildFailure):
            return {"error": "build_error", "message": "".join(str(a) for a in e.args)[:2000]}
        if isinstance(e, KernelgateError):
            return {"error": "build_error", "message": f"{e}"[:2000]}
        if isinstance(e, SystemExit):
            return {"error": "exit", "message": f"candidate called sys.exit({e.code})"}
        if isinstance(e, torch.cuda.OutOfMemoryError):
            return {"error": "crash", "message": f"out of memory: {_first_line(e)}"}
        return {"error": "crash", "message": f"{type(e).__name__}: {_first_line(e)}",
                "traceback": traceback.format_exc()[-4000:]}
    except BaseException:  # noqa: BLE001 - an exception that cannot be described is still a failure
        return {"error": "crash", "message": "the candidate raised an exception that could not be described"}


def _execute(box: list, _set_grad=torch._C._set_grad_enabled, _failure=_failure) -> None:
    box[_TRASH] = None          # the last references to what the harness disposed of: dropped on this thread
    fn, args = box[_FN], box[_ARGS]
    box[_FN] = box[_ARGS] = None
    try:
        _set_grad(bool(box[_GRAD]))
        box[_RESULT] = fn(*args)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a reply
        box[_RESULT] = None
        box[_ERROR] = _failure(e)
    fn = args = None            # dropped here, in this frame, not as it returns to `_run`


def _run(jobs: Any, done: Any, _execute=_execute, _disable=gc.disable) -> None:
    """The runner thread's whole life: wait for a job (a fresh box, through a queue), run it, say so. Parked at
    `jobs.get()` between jobs. Nothing of a job is dropped in this frame: the box goes back to the harness, which
    hands it to the next job's `_execute` to be dropped there."""
    while True:
        box = jobs.get()
        _execute(box)
        # no collection between here and the wait (the candidate may have switched gc on): after `done` is
        # released, candidate code on this thread ends the worker (see `idle`)
        _disable()
        done.release()


def _call_offset(name: str) -> int:
    """The bytecode offset in `_run` of the call of its method `name` (`get`: the wait for a job; `release`: the
    end of one)."""
    seen = False
    for ins in dis.get_instructions(_run):
        if ins.argval == name:
            seen = True
        elif seen and ins.opname == "CALL":
            return ins.offset
    raise RuntimeError(f"runner: no call of {name} found in _run")


def _plain_reply(error: Any) -> dict:
    """The error reply, rebuilt from exact str values only (the harness then encodes it)."""
    out = {"error": "crash", "message": "a job failed with an unreadable error"}
    if type(error) is dict:
        for key in ("error", "message", "traceback"):
            v = error.get(key)
            if type(v) is str:
                out[key] = v
    return out


def _plain_call(event: str, fn: Callable, *args: Any) -> Any:
    return fn(*args)


def _nothing() -> None:
    return None


def start(stack_bytes: int, fatal: Callable[[str], None]) -> tuple[Callable[..., Any], Callable[..., None],
                                                                   Callable[[Any], None]]:
    """Start the runner thread (at the worker's prime, before any candidate code exists and before the judge
    counts the process's threads) and return (call, arm, dispose).

    `call(fn, args, grad=False)` runs fn(*args) there and returns its result, or raises CandidateFailure with the
    error reply. `arm(own, integrity, enforce)`, once, when the guard is installed: `own` is the guard's exemption
    for the harness's own sys._current_frames (kernelgate/sandbox/audit.py), `integrity` its check after each job;
    enforcing, a failed check or a lock released by someone else ends the worker through `fatal`.
    `dispose(obj)`: the harness is done with obj (anything the candidate was given or returned, and what holds
    it); the harness's last reference goes with the next job and is dropped on the runner thread, so a weakref
    callback or finalizer the candidate attached never runs on the harness's thread (where builtins such as
    `locals()`, which raise no audit event, would hand over its frame)."""
    trash: list = []
    jobs, done = _queue.SimpleQueue(), _thread.allocate_lock()
    done.acquire()
    previous = _thread.stack_size(stack_bytes)
    try:
        ident = _thread.start_new_thread(_run, (jobs, done))
    finally:
        _thread.stack_size(previous)
    guard: list = [_plain_call, _nothing, False]          # own, integrity, enforce (set once by `arm`)
    parked_at, released_at = _call_offset("get"), _call_offset("release")
    run_code = _run.__code__

    def idle(_guard=guard, _frames=sys._current_frames, _ident=ident, _code=run_code, _at=parked_at,
             _released=released_at, _me=_thread.get_ident, _main=threading.main_thread().ident, _trash=trash,
             _fatal=fatal) -> bool:
        """Whether the runner is parked in its wait. The snapshot holds a frame object of every thread's top
        frame: one of a candidate frame that returns while it is held owns that frame's locals, and dropping it
        here would drop them on the harness's thread (red team 12). So the snapshot, less the harness's own
        frame and the main thread's, goes to the runner to be dropped with the next job; and candidate code
        running on the runner once it has released `done` (only `_run`'s few steps between that release and the
        wait may run there) ends the worker before anything is dropped: a frame of the candidate's on top, or
        `_run` anywhere between its wait and its release (in `_execute`, or in a C callable the candidate made
        run there: red team 13)."""
        frames = _guard[0]("sys._current_frames", _frames)
        frames.pop(_me(), None)
        frames.pop(_main, None)
        _trash.append(frames)
        f = frames.get(_ident)
        if f is not None and (f.f_code is not _code or _at < f.f_lasti < _released):
            _fatal("kernelgate ended the worker: candidate code ran on the runner thread after its call ended "
                   "(the runner's lock was released early)")
        return f is not None and f.f_code is _code and f.f_back is None and f.f_lasti == _at

    def wait_parked(_idle=idle, _sleep=time.sleep) -> None:
        while not _idle():
            _sleep(0.0002)

    wait_parked()           # parked once before any candidate code: the offset is the real one

    def arm(own: Callable, integrity: Callable[[], Any], enforce: bool, _guard=guard) -> None:
        _guard[0], _guard[1], _guard[2] = own, integrity, enforce is True

    def call(fn: Any, args: Any = (), grad: bool = False, _put=jobs.put, _done=done, _idle=idle,
             _wait=wait_parked, _guard=guard, _fatal=fatal, _isenabled=gc.isenabled, _disable=gc.disable,
             _tuple=tuple, _type=type, _Failure=CandidateFailure, _plain=_plain_reply, _trash=trash) -> Any:
        if not _idle():
            _fatal("kernelgate ended the worker: the runner thread was busy before a call (candidate code "
                   "kept running after its call ended)")
        # a fresh box: the harness never stores into a list candidate code can reach (a store drops the slot's
        # old value, which a thread of the candidate's could have set just before it: red team 13)
        box = [fn, args if _type(args) is _tuple else _tuple(args), grad, None, None, _tuple(_trash)]
        _trash.clear()
        _put(box)
        _done.acquire()
        _wait()                         # the job is over only when the thread is parked again
        if not _done.locked():
            _fatal("kernelgate ended the worker: the end of a call was signalled twice (candidate code released "
                   "the runner's lock)")
        if _isenabled():
            _disable()
        why = _guard[1]()
        if why and _guard[2]:
            _fatal("kernelgate ended the worker: " + why)
        result, error = box[3], box[4]
        _trash.append(box)              # dropped on the runner, with what candidate code may have put in it
        if error is not None:
            _trash.append(error)
            raise _Failure(_plain(error))
        return result

    return call, arm, trash.append
