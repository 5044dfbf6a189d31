"""The runner thread (kernelgate/sandbox/runner.py): what the harness's wait for a job does with what it sees."""
import _thread
import sys
import threading
import time
import weakref

import pytest

from kernelgate.sandbox import runner


class Fatal(Exception):
    pass


def _fatal(msg):
    raise Fatal(msg)


def _run_locals():
    """What candidate code on the runner can reach by walking its own stack: the runner's frame's locals
    (`_execute`'s: the box and the `done` lock; the loop under it is C)."""
    f = sys._getframe()
    while f is not None and f.f_code is not runner._execute.__code__:
        f = f.f_back
    assert f.f_back is None
    return f.f_locals


def test_a_call_returns_its_result_and_a_failure_its_reply():
    call, _, _ = runner.start(0, _fatal)
    assert call(lambda a, b: a + b, (2, 3)) == 5
    with pytest.raises(runner.CandidateFailure) as e:
        call(lambda: 1 / 0)
    assert e.value.reply["error"] == "crash" and "ZeroDivisionError" in e.value.reply["message"]


def test_candidate_code_running_after_an_early_release_ends_the_worker():
    """Red team 12: a job releases `done` early, so the harness polls while candidate code runs on (each poll
    holding frame objects of its frames), and a thread it starts re-locks `done` after the runner's own release,
    so the double release is not seen. A poll that finds candidate code on the runner ends the worker."""
    call, _, _ = runner.start(0, _fatal)

    def job():
        done = _run_locals()["done"]
        done.release()
        t = time.monotonic()
        while not done.locked() and time.monotonic() - t < 5:
            time.sleep(0)                              # the harness holds it again
        _thread.start_new_thread(done.acquire, ())     # re-locked after the runner's own release
        t = time.monotonic()
        while time.monotonic() - t < 0.3:              # candidate code still running past the end of its call
            pass
        return "late"

    with pytest.raises(Fatal, match="after its call ended"):
        call(job)


def test_frames_the_harness_took_are_dropped_on_the_runner():
    """The harness's snapshot of every thread's top frame: a frame that returns while a frame object of it is
    held hands its locals to that object, so the snapshot must never be dropped on the harness's thread. It
    goes to the runner with the next job: what the candidate's frame held dies there."""
    call, _, _ = runner.start(0, _fatal)
    runner_ident = call(_thread.get_ident)
    died_on: list[int] = []

    class X:
        pass

    def hold(x, lock):          # the only reference to x is this frame's
        lock.acquire()

    lock = threading.Lock()
    lock.acquire()
    x = X()
    ref = weakref.ref(x, lambda _: died_on.append(threading.get_ident()))
    side = threading.Thread(target=hold, args=(x, lock))
    side.start()
    del x
    t = time.monotonic()
    while sys._current_frames()[side.ident].f_code is not hold.__code__:     # hold() is waiting on the lock
        assert time.monotonic() - t < 30
        time.sleep(0.001)
    call(lambda: None)                     # the harness's snapshot takes a frame object of hold()'s frame
    lock.release()
    side.join()                            # hold() returned while that frame object was kept: it owns x now
    assert ref() is not None and not died_on
    call(lambda: None, (), False, True)    # the snapshot is dropped on the runner, with the next dropping job
    assert died_on == [runner_ident]


def test_a_job_in_the_middle_of_a_request_keeps_what_was_disposed_of():
    """Session 13: the harness disposed of a returned object but still held it in a local across a later job (the
    observations' flags job, in Harness.op_call); that job dropped the trash on the runner, the local became the
    last reference and the object died on the harness's thread when op_call returned. The trash now goes only
    with a job that says `drop`, which the harness makes where none of its frames refers to it."""
    call, _, dispose = runner.start(0, _fatal)
    runner_ident = call(_thread.get_ident)
    died_on: list[int] = []

    class X:
        pass

    refs = []

    def job():
        x = X()
        refs.append(weakref.ref(x, lambda _: died_on.append(threading.get_ident())))
        return x

    out = call(job)
    dispose(out)
    call(lambda: None)                      # a job in the middle of the request: the trash stays
    del out                                 # the harness's local goes: not the last reference
    assert not died_on and refs[0]() is not None
    call(lambda: None, (), False, True)     # the end of the request: dropped on the runner
    assert died_on == [runner_ident]


def test_the_harness_never_stores_into_a_box_candidate_code_can_reach():
    """Red team 13: a thread of the candidate's wrote a box slot between the harness's check that it was empty and
    its store, and the store dropped the object on the harness's thread. Every job now has a fresh box that the
    harness never writes once handed over: what candidate code leaves in an old box dies on the runner."""
    call, _, _ = runner.start(0, _fatal)
    runner_ident = call(_thread.get_ident)
    boxes = []
    call(lambda: boxes.append(_run_locals()["box"]))
    died_on: list[int] = []

    class X:
        pass

    x = X()
    ref = weakref.ref(x, lambda _: died_on.append(threading.get_ident()))
    old = boxes.pop()
    for i in range(6):
        old[i] = x if i == 0 else old[i]          # as a thread of the candidate's would, after the job ended
    del x, old
    call(lambda: None, (), False, True)           # a fresh box; the old one, handed back with it, dies on the runner
    assert died_on == [runner_ident]
    assert ref() is None
    assert call(lambda: _run_locals()["box"]) is not call(lambda: _run_locals()["box"])


def test_no_frame_on_the_runner_holds_the_job_queue():
    """Red team 14 took the harness's jobs from the queue, found on the runner loop's frame. The loop is C: under
    a job's frames there is `_execute` alone, and nothing in its locals is the queue."""
    call, _, _ = runner.start(0, _fatal)

    def job():
        f = sys._getframe(1)
        return f.f_code is runner._execute.__code__, f.f_back is None, sorted(
            type(v).__name__ for v in f.f_locals.values())

    top, bottom, kinds = call(job)
    assert top and bottom and "SimpleQueue" not in kinds and "lock" in kinds


def test_an_honest_call_is_never_taken_for_an_early_release_under_fast_thread_switches():
    """The runner gives up the interpreter wherever a switch is due; with `done` released by its own `release`
    call, a poll may find its frame on that call's first instruction (Python 3.11's specialised PRECALL makes
    the call before the CALL instruction). Red team 15 saw honest-looking calls end the worker so, with a
    1 us switch interval."""
    call, _, _ = runner.start(0, _fatal)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(2000):
            call(lambda: None)
    finally:
        sys.setswitchinterval(old)


def test_after_the_seal_python_on_another_thread_ends_the_worker():
    """Red team 18 ran candidate Python on a docked OpenMP worker (a thread from before the import, started by the
    library, with a ctypes callback): after the lockdown, a Python frame on any thread but the harness's, the main
    one and the runner's ends the worker at the next poll."""
    ended: list[str] = []
    call, arm, _ = runner.start(0, ended.append)
    arm(lambda event, fn, *a: fn(*a), lambda: None, True)
    stop = threading.Event()
    side = threading.Thread(target=lambda: stop.wait(30))      # Python waiting on a thread of its own
    side.start()
    try:
        call(lambda: None)
        assert not ended                    # before the seal: the judge's thread check decides
        arm.seal()
        call(lambda: None)
        assert ended and "other than the gate's own" in ended[0]
    finally:
        stop.set()
        side.join()


_SETTLE = """
import _thread, sys, time
from kernelgate.sandbox import runner

def sealed(settle):
    ended = []
    call, arm, _ = runner.start(0, ended.append)
    arm(lambda event, fn, *a: fn(*a), lambda: None, True, settle)
    arm.seal()
    call(lambda: None)
    assert not ended, ended
    return call, ended

# a thread holding a thread state with no frame (time.sleep called from C), as a runtime's thread does while it
# waits for the GIL to drop a Python object
call, ended = sealed(2.0)                      # gone within the window: passes
_thread.start_new_thread(time.sleep, (0.2,))
call(lambda: None)
print("within", not ended)
call, ended = sealed(0.0)                      # no window: ends the worker at once
_thread.start_new_thread(time.sleep, (0.5,))
call(lambda: None)
print("none", bool(ended) and "holds Python state" in ended[0])
time.sleep(0.6)
call, ended = sealed(runner.JAX_SETTLE_S)      # stays past the window: ends it after the window
_thread.start_new_thread(time.sleep, (1.0,))
t0 = time.monotonic()
call(lambda: None)
print("past", bool(ended) and "holds Python state" in ended[0] and time.monotonic() - t0 < 0.9)
time.sleep(1.1)
"""


@pytest.mark.slow
def test_an_extra_thread_state_is_let_go_only_within_the_settle_window():
    """JAX's runtime threads take a thread state for a moment after a Pallas call on the GPU (the softmax port was
    ended `introspection`): a JAX task's worker on a GPU lets an extra frameless state go within its window; with no
    window it ends the worker at once, and a state that stays past the window ends it then. In a process of its
    own: threads other tests leave in this one would end a sealed runner."""
    import subprocess
    p = subprocess.run([sys.executable, "-c", _SETTLE], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["within", "True", "none", "True", "past", "True"], p.stdout + p.stderr[-2000:]


def test_python_on_another_thread_during_the_settle_window_ends_it():
    """The window's pauses hand the GIL over: a thread could run Python there and let its state go by the end
    (red team 49). Every look in the window also looks for frames on other threads."""
    clock, states = iter(range(100)), iter([3, 3, 2])
    looks = iter([False, True])
    assert not runner._gone(lambda: next(states), 2, 50, lambda: next(clock) * 0.001, lambda s: None,
                            lambda: next(looks))
    clock, states = iter(range(100)), iter([3, 2])
    assert runner._gone(lambda: next(states), 2, 50, lambda: next(clock) * 0.001, lambda s: None, lambda: False)
    assert not runner._gone(lambda: 2, 2, 0.0, lambda: 0.0, lambda s: None, lambda: False)   # no window
