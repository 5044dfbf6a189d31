"""The runner thread: where every line of candidate code in the worker runs, on a stack that holds nothing.

Python hands frames to whoever asks for them through library code that walks `f_back` itself (torch's JIT
resolution callbacks, pytest's traceback entries: no audit event sees the walk), and from a frame on the
harness's stack its locals lead to the harness. So the harness (kernelgate/sandbox/worker.py) never calls
candidate code: it hands each call (the import and construction, every forward, the profile) to this thread as a
job, waits, and reads the result. The thread's loop is C alone (a deque consuming a map of `_execute` over the
job queue's `get`): under the candidate's frames its stack is `_execute`, whose locals are the job's box (the
function, its arguments, the result) and the `done` lock; nothing there leads back, and no frame holds the
queue (red team 14 took the harness's jobs from it when a Python loop held it).

What candidate code can do to the box or the lock (they are on its stack) buys it nothing: every job has a fresh
box, and the harness never stores into one it has handed over (a store drops the slot's old value, which a
thread of the candidate's could have set: red team 13), and what it reads from one goes to the runner to be
dropped; the harness takes a call as finished only when the thread is parked again in the queue's wait, with no
Python frame (read from the interpreter's own view of the threads' stacks, `sys._current_frames`, not from
anything the thread could write), so work cannot go on past the harness's clock; the thread found anywhere but
past `_execute`'s release once `done` is released, a box the runner never took, or the lock released twice,
ends the worker. Right after each job, before the harness reads
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
import collections
import dis
import functools
import gc
import itertools
import sys
import threading
import time
import traceback
from typing import Any, Callable

import torch

from ..errors import KernelgateError

# the job box, a fresh list per job (its item access cannot be redefined), by slot:
# 0 function, 1 arguments, 2 grad enabled, 3 result, 4 error, 5 what the harness hands back to be dropped here


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


def _execute(box: list, done: Any, _set_grad=torch._C._set_grad_enabled, _failure=_failure, _bool=bool,
             _Base=BaseException, _disable=gc.disable) -> None:
    """One job, then `done` released. Called by the runner's loop, which is C alone (`start`): under the
    candidate's frames this frame is the only one, and the queue jobs come through is in none."""
    # the box's slots by number (the layout above): this frame looks up no global the candidate could rebind
    box[5] = None               # the last references to what the harness disposed of, dropped here
    fn, args = box[0], box[1]
    box[0] = box[1] = None
    try:
        _set_grad(_bool(box[2]))
        box[3] = fn(*args)
    except _Base as e:          # noqa: BLE001 - every failure becomes a reply
        box[3] = None
        box[4] = _failure(e)
    fn = args = None            # dropped here, in this frame
    # no collection between here and the wait (the candidate may have switched gc on): after `done` is
    # released, candidate code on this thread ends the worker (see `idle`)
    _disable()
    done.release()


def _load_offset(name: str) -> int:
    """The bytecode offset in `_execute` of the load of its method `name` (`release`: the end of a job). The
    load, not the call: on Python 3.11 a specialised PRECALL makes the call itself, and the thread can give up
    the interpreter with its frame still there, before the CALL instruction (a poll then, with `done` released
    honestly, once ended the worker)."""
    for ins in dis.get_instructions(_execute):
        if ins.argval == name and ins.opname in ("LOAD_METHOD", "LOAD_ATTR"):
            return ins.offset
    raise RuntimeError(f"runner: no load of {name} found in _execute")


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


def _thread_states() -> Callable[[], int] | None:
    """A counter of the interpreter's thread states (CPython's C API through ctypes, bound now, before any candidate
    code: the function objects are this closure's alone), or None where it cannot be had. Every thread that runs
    Python holds one, frame or none: a chain of C callables that native code runs on a library's thread (a ctypes
    callback as an OpenMP team's body, red team 19) shows here and not in sys._current_frames."""
    try:
        import ctypes
        api = ctypes.pythonapi
        get, head, nxt = (api["PyInterpreterState_Get"], api["PyInterpreterState_ThreadHead"],
                          api["PyThreadState_Next"])
        get.restype, get.argtypes = ctypes.c_void_p, []
        head.restype, head.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
        nxt.restype, nxt.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    except (ImportError, AttributeError, OSError):
        return None

    def count(_get=get, _head=head, _next=nxt) -> int:
        n, t = 0, _head(_get())
        while t:
            n += 1
            t = _next(t)
        return n
    return count


#: how long an extra thread state may take to go in a JAX task's worker (runner.start's `arm`). The checker holds
#: the GIL while it counts, so a thread that holds a state without the GIL is waiting for it; the checker's pauses
#: hand it over, and JAX's drop of a Python reference ends within them.
JAX_SETTLE_S = 0.05


def _gone(states: Callable[[], int], base: int, window: float, now: Callable[[], float],
          pause: Callable[[float], None], foreign: Callable[[], bool]) -> bool:
    """Whether the interpreter's thread states come back to `base` within `window` seconds (pausing, so a thread
    waiting for the GIL gets it) with no Python frame on another thread at any look (`foreign`: the pauses hand
    the GIL over, and a thread could run Python there and let its state go by the end: red team 49); False at
    once for a window of 0."""
    if window <= 0:
        return False
    end = now() + window
    while now() < end:
        pause(0.0005)
        if foreign():
            return False
        if states() <= base:
            return True
    return False


def start(stack_bytes: int, fatal: Callable[[str], None]) -> tuple[Callable[..., Any], Callable[..., None],
                                                                   Callable[[Any], None]]:
    """Start the runner thread (at the worker's prime, before any candidate code exists and before the judge
    counts the process's threads) and return (call, arm, dispose).

    `call(fn, args, grad=False, drop=False)` runs fn(*args) there and returns its result, or raises CandidateFailure
    with the error reply; with `drop`, the job first drops what was disposed of. `arm(own, integrity, enforce)`, once, when the guard is installed: `own` is the guard's exemption
    for the harness's own sys._current_frames (kernelgate/sandbox/audit.py), `integrity` its check after each job;
    enforcing, a failed check or a lock released by someone else ends the worker through `fatal`.
    `dispose(obj)`: the harness is done with obj (anything the candidate was given or returned, and what holds
    it); the harness's reference goes with the next job called with `drop` and is dropped on the runner thread, so
    a weakref callback or finalizer the candidate attached never runs on the harness's thread (where builtins such
    as `locals()`, which raise no audit event, would hand over its frame). The harness drops only where no frame
    of its own still refers to what was disposed of (the end of a request, the next call of a loop): a job in
    the middle of a request that dropped the trash would leave a local of the harness's the last reference,
    to die on the harness's thread when its frame ends (a returned tensor with a weakref callback did, in
    Harness.op_call)."""
    trash: list = []
    jobs, done = _queue.SimpleQueue(), _thread.allocate_lock()
    done.acquire()
    # the thread's loop is C alone: parked in `jobs.get()` it has no Python frame, and the queue is held by
    # nothing a frame can reach (red team 14 took the harness's jobs from a queue on the loop's frame)
    loop = functools.partial(collections.deque, map(_execute, iter(jobs.get, None), itertools.repeat(done)), 0)
    previous = _thread.stack_size(stack_bytes)
    try:
        ident = _thread.start_new_thread(loop, ())
    finally:
        _thread.stack_size(previous)
    del loop
    # own, integrity, enforce (set once by `arm`), and whether the lockdown has sealed the threads (`seal`)
    # and the interpreter's thread states when the guard was armed (before the candidate's import)
    # and how long an extra thread state may take to go before it counts (`settle`: a JAX task's, see `arm`)
    guard: list = [_plain_call, _nothing, False, False, 0, 0.0]
    states = _thread_states()
    released_at = _load_offset("release")
    run_code = _execute.__code__

    def idle(_guard=guard, _frames=sys._current_frames, _ident=ident, _code=run_code, _released=released_at,
             _me=_thread.get_ident, _main=threading.main_thread().ident, _trash=trash, _fatal=fatal,
             _states=states, _now=time.monotonic, _pause=time.sleep, _gone=_gone) -> bool:
        """Whether the runner is parked in its wait: it has no Python frame (its loop is C). The snapshot holds
        a frame object of every thread's top frame: one of a candidate frame that returns while it is held owns
        that frame's locals, and dropping it here would drop them on the harness's thread (red team 12). So the
        snapshot, less the harness's own frame and the main thread's, goes to the runner to be dropped with the
        next job; and once `done` is released, the runner found anywhere but the last steps of `_execute` (past
        its release) ends the worker before anything is dropped: a frame of the candidate's on top, or
        `_execute` before its release (candidate code that released `done` early)."""
        frames = _guard[0]("sys._current_frames", _frames)
        frames.pop(_me(), None)
        frames.pop(_main, None)
        _trash.append(frames)
        if _guard[3]:
            # after the lockdown the only threads are those from before the candidate's import (the judge checks):
            # Python on any other than the harness's, the main one and this one is a callback from native code run
            # on a thread of a library's pool (red team 18, `omp_team_hijack`)
            for k in frames:
                if k != _ident:
                    _fatal("kernelgate ended the worker: Python code ran on a thread of the worker's other than the "
                           "gate's own after the lockdown (a callback from native code on a library's thread)")
            # one with no frame (a chain of C callables run by native code, red team 19) still holds a thread state
            if _states is not None and _states() > _guard[4]:
                def foreign(_guard=_guard, _frames=_frames, _me=_me, _main=_main, _trash=_trash, _ident=_ident):
                    seen = _guard[0]("sys._current_frames", _frames)
                    seen.pop(_me(), None)
                    seen.pop(_main, None)
                    _trash.append(seen)
                    for k in seen:              # no builtins looked up here (tests/sandbox/test_audit.py)
                        if k != _ident:
                            return True
                    return False
                if not _gone(_states, _guard[4], _guard[5], _now, _pause, foreign):
                    _fatal("kernelgate ended the worker: a thread of the worker's other than the gate's own holds "
                           "Python state after the lockdown (native code runs Python on a library's thread)")
        f = frames.get(_ident)
        if f is None:
            return True
        if f.f_code is not _code or f.f_back is not None or f.f_lasti < _released:
            _fatal("kernelgate ended the worker: candidate code ran on the runner thread after its call ended "
                   "(the runner's lock was released early)")
        return False

    def wait_parked(_idle=idle, _sleep=time.sleep) -> None:
        while not _idle():
            _sleep(0.0002)

    wait_parked()           # parked once before any candidate code: the offset is the real one

    def arm(own: Callable, integrity: Callable[[], Any], enforce: bool, settle: float = 0.0, _guard=guard,
            _states=states) -> None:
        """`settle`: seconds an extra thread state may take to go before it ends the worker; 0 (the default)
        ends it at once. A JAX task's worker passes `JAX_SETTLE_S`: on a GPU, JAX's runtime threads (py_xla_*)
        take a thread state for a moment after a Pallas call to drop Python objects (measured into
        h200_jax_threads.json: one more state than the baseline, gone at each call's end)."""
        _guard[0], _guard[1], _guard[2] = own, integrity, enforce is True
        _guard[4] = _states() if _states is not None else 0     # before the candidate's import
        _guard[5] = settle if settle > 0 else 0.0      # no global lookups (tests/sandbox/test_audit.py)

    def seal(_guard=guard) -> None:
        """At the lockdown (enforcing): from now on a Python frame on any thread but the gate's ends the worker."""
        if _guard[2]:
            _guard[3] = True

    def call(fn: Any, args: Any = (), grad: bool = False, drop: bool = False, _put=jobs.put, _done=done, _idle=idle,
             _wait=wait_parked, _guard=guard, _fatal=fatal, _isenabled=gc.isenabled, _disable=gc.disable,
             _tuple=tuple, _type=type, _Failure=CandidateFailure, _plain=_plain_reply, _trash=trash) -> Any:
        if not _idle():
            _fatal("kernelgate ended the worker: the runner thread was busy before a call (candidate code "
                   "kept running after its call ended)")
        # a fresh box: the harness never stores into a list candidate code can reach (a store drops the slot's
        # old value, which a thread of the candidate's could have set just before it: red team 13)
        # the trash goes only when the harness says no frame of its own still refers to anything in it (`drop`):
        # a job in the middle of a request leaves it (a local of the harness's, held across the job, would be the
        # last reference once the runner dropped the trash's, and die on the harness's thread when its frame ends)
        box = [fn, args if _type(args) is _tuple else _tuple(args), grad, None, None, _tuple(_trash) if drop else None]
        if drop:
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
        if box[0] is not None:          # never taken by the runner (`done` released by someone else)
            _fatal("kernelgate ended the worker: a call ended before the runner took it (candidate code released "
                   "the runner's lock)")
        result, error = box[3], box[4]
        # dropped on the runner, with what candidate code may have put in them (a thread of the candidate's can
        # empty the box once the harness has read it, leaving the harness's reference the last: red team 14)
        _trash.append(box)
        _trash.append(result)
        if error is not None:
            _trash.append(error)
            raise _Failure(_plain(error))
        return result

    arm.seal = seal
    return call, arm, trash.append


def stack_bytes() -> int:
    """The harness thread's stack: what the main thread may grow to (RLIMIT_STACK), at least 8 MiB (glibc gives a
    thread 2 MiB where that limit is unlimited; deep compiler recursion needs more)."""
    import resource
    soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    return 64 << 20 if soft == resource.RLIM_INFINITY else min(max(soft, 8 << 20), 256 << 20)
