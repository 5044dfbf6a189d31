
import sys

import pytest

from kernelgate.records import Reason
from kernelgate.sandbox import Worker, WorkerFailure, scrubbed_env


def test_secrets_are_not_passed_and_cache_dirs_are_private(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GH_TOKEN", "t")
    monkeypatch.setenv("MY_SECRET_THING", "s")
    monkeypatch.setenv("HARMLESS", "1")
    env = scrubbed_env(tmp_path)
    assert "OPENAI_API_KEY" not in env and "GH_TOKEN" not in env and "MY_SECRET_THING" not in env
    assert env["HARMLESS"] == "1"
    for var in ("OPENAI_ADMIN_KEY", "ANTHROPIC_WEBHOOK_SIGNING_KEY", "OPENAI_CUSTOM_HEADERS", "ANTHROPIC_CUSTOM_HEADERS",
                "DB_PASSWORD", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_ACCESS_KEY_ID", "OPENAI_BASE_URL",
                "ANTHROPIC_AUTH_TOKEN", "HF_HOME", "MY_AUTH"):
        monkeypatch.setenv(var, "x")
    env = scrubbed_env(tmp_path)
    kept = {"OPENAI_ADMIN_KEY", "ANTHROPIC_WEBHOOK_SIGNING_KEY", "OPENAI_CUSTOM_HEADERS", "ANTHROPIC_CUSTOM_HEADERS",
            "DB_PASSWORD", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_ACCESS_KEY_ID", "OPENAI_BASE_URL",
            "ANTHROPIC_AUTH_TOKEN", "HF_HOME", "MY_AUTH"} & set(env)
    assert not kept, kept
    assert env["HARMLESS"] == "1" and "PATH" in env and "CUDA_VISIBLE_DEVICES" not in kept
    for var in ("TMPDIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert env[var].startswith(str(tmp_path))


def test_two_workers_get_different_directories():
    a, b = Worker(), Worker()
    try:
        assert a.workdir != b.workdir
    finally:
        a.close()
        b.close()
    assert not a.workdir.exists()


@pytest.mark.slow
def test_worker_answers_and_dies_cleanly():
    with Worker() as w:
        reply = w.request({"op": "hello"}, timeout=60)
        assert reply["pid"] == w.pid
    with Worker() as w:
        with pytest.raises(WorkerFailure) as e:
            w.request({"op": "no_such_op"}, timeout=60)
        assert e.value.reason is Reason.CRASH


@pytest.mark.slow
def test_spares_start_ahead_and_are_never_shared():
    """A spare is started before it is needed; taking it leaves none until refill; a dead spare is
    replaced by a fresh worker; close stops the one left."""
    import os
    import signal
    from kernelgate.sandbox import Spares
    sp = Spares()
    sp.refill()
    first = sp._spare
    assert first is not None and first.proc is not None and first.proc.poll() is None   # already running
    w = sp.take("candidate")
    assert w is first and w.label == "candidate" and sp._spare is None
    assert sp.take() is not w                          # none left: a new, unstarted worker
    sp.refill()
    os.killpg(sp._spare.proc.pid, signal.SIGKILL)
    sp._spare.proc.wait()
    fresh = sp.take()
    assert fresh.proc is None                          # the dead spare was not handed out
    # each take says whether a spare was there and alive (where a search's "worker start" went)
    assert [(t["spare"], t["alive"]) for t in sp.takes] == [(True, True), (False, False), (True, False)]
    assert sp.takes[0]["age_s"] >= 0 and sp.takes[1]["age_s"] is None and all(t["wait_s"] >= 0 for t in sp.takes)
    sp.refill()
    left = sp._spare
    sp.close()
    assert left.proc.poll() is not None and sp._spare is None
    w.close()



def test_spares_keep_depth_workers_started_and_hand_out_the_oldest():
    """With depth 2, refill starts two; take hands out the one started first and refill tops up again; close
    stops every one left."""
    from kernelgate.sandbox import Spares
    sp = Spares(depth=2)
    sp.refill()
    first, second = (w for w, _, _ in sp._ready)
    assert first is not second and all(w.proc is not None and w.proc.poll() is None for w in (first, second))
    assert sp.take() is first and sp._spare is second
    sp.refill()
    third = sp._ready[1][0]
    assert len(sp._ready) == 2 and sp._spare is second and third not in (first, second)
    sp.close()
    assert not sp._ready and all(w.proc.poll() is not None for w in (second, third))
    first.close()


@pytest.mark.slow
def test_a_spare_is_primed_ahead_and_the_timer_holds_primes_in_flight():
    """With `prime`, a spare's prime runs while the caller works; `quiet` returns only once no prime is running;
    `held` (the timer's block) stops a spare whose prime is in flight and lets it go on after; the spare taken is
    primed (its second prime is a no-op's cost); a spare whose prime fails is never handed out."""
    import time
    from kernelgate import native
    from kernelgate.sandbox import Spares
    sp = Spares(prime={"op": "prime", "device": "cpu", "jax": False, "native": native.ensure()})
    sp.refill()
    assert Spares._priming                              # running in the background
    Spares.quiet()
    assert not Spares._priming and sp.primed_ahead == 1
    w = sp.take()
    assert sp.takes[-1]["primed_ahead"] and sp.takes[-1]["prime_done"] and sp.takes[-1]["alive"]
    try:
        t = time.monotonic()
        reply = w.request({"op": "prime", "device": "cpu", "jax": False, "native": native.ensure()}, 60)
        assert reply["ok"] and time.monotonic() - t < 5
    finally:
        w.close()
    # the timer's block: a spare with its prime in flight is stopped throughout (every process of its tree) and
    # goes on afterwards; its prime then finishes
    sp.refill()
    spare = sp._spare
    with Spares.held():
        states = set(spare.processes().values())
        assert states and states <= set("TtZX") and spare.frozen
        time.sleep(0.3)
        assert Spares._priming                          # held, not finished
    assert not spare.frozen
    Spares.quiet()
    assert sp.primed_ahead == 2 and spare.alive()
    bad = Spares(prime={"op": "prime", "device": "nonsense-device", "jax": False, "native": native.ensure()})
    bad.refill()
    failed = bad._spare
    Spares.quiet()
    assert bad.primed_ahead == 0 and not failed.alive()
    fresh = bad.take()
    assert fresh is not failed and fresh.proc is None   # a new, unstarted worker instead
    fresh.close()
    bad.close()
    sp.close()


SPINNER = '''
import ctypes, os, threading, time
import torch
def spin(name, ghost=False):
    """A busy child; a ghost's main thread exits (its /proc state reads Z) while another thread spins."""
    pid = os.fork()
    if pid == 0:
        if ghost:
            threading.Thread(target=lambda: [None for _ in iter(int, 1)]).start()
            time.sleep(0.05)
            ctypes.CDLL(None).syscall({"aarch64": 93}.get(os.uname().machine, 60), 0)   # exit: this thread only
        while True:
            pass
    with open(os.path.join(os.environ["TMPDIR"], name), "w") as f:
        f.write(str(pid))
spin("child.pid")
spin("ghost.pid", ghost=True)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''

FORK_CHAIN = '''
import os, time
import torch
def chain():
    """Each generation forks the next and exits: the live process keeps changing pid and parent."""
    if os.fork() == 0:
        n = 0
        while True:
            if os.fork() != 0:
                os._exit(0)
            n += 1
            if n % 100 == 0:
                with open(os.path.join(os.environ["TMPDIR"], "chain"), "w") as f:
                    f.write(str(n))
chain()

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


def _stat(pid):
    from pathlib import Path
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return {"state": fields[0], "sid": int(fields[3]), "cpu": int(fields[11]) + int(fields[12])}


def _eventually(cond, seconds=10):
    import time
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _cpu(pid):
    """CPU ticks of every thread of `pid`."""
    import os
    from pathlib import Path
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            f = Path(f"/proc/{pid}/task/{t}/stat").read_text().rpartition(")")[2].split()
            total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total


def _in_session(sid):
    import os
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and (_stat(p) or {}).get("sid") == sid]


def _wait_file(path, seconds=20):
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.mark.slow
@linux_only
def test_freeze_stops_the_worker_and_its_descendants_and_thaw_resumes_them(write):
    """Frozen: every process of the worker's tree is stopped and gets no CPU; a request is refused (the judge's
    mistake, not the candidate's); after thaw requests work; a frozen worker is killed by close, promptly."""
    import time
    from kernelgate.errors import KernelgateError
    w = Worker("frozen")
    try:
        w.request({"op": "build", "path": write("spin.py", SPINNER), "cls": "ModelNew", "init_inputs": [],
                   "state": {}, "device": "cpu"}, 120)
        child = int(_wait_file(w.workdir / "tmpdir" / "child.pid"))
        ghost = int(_wait_file(w.workdir / "tmpdir" / "ghost.pid"))
        assert _eventually(lambda: _stat(ghost)["state"] == "Z" and _cpu(ghost) > 0)    # looks dead, is not
        assert set(w.processes()) == {w.pid, child, ghost} and w.descendants() == sorted([child, ghost])
        w.freeze()
        assert all(st == "T" for st in w.processes().values())
        cpu, ghost_cpu = _stat(child)["cpu"], _cpu(ghost)
        time.sleep(0.3)
        assert _stat(child)["cpu"] == cpu and _stat(child)["state"] == "T" and _cpu(ghost) == ghost_cpu
        with pytest.raises(KernelgateError, match="frozen"):
            w.request({"op": "hello"}, 5)
        w.thaw()
        assert w.request({"op": "hello"}, 30)["pid"] == w.pid
        assert _eventually(lambda: _stat(child)["state"] == "R" and _stat(child)["cpu"] > cpu)
        w.freeze()
        t0 = time.monotonic()
    finally:
        w.close()
    assert time.monotonic() - t0 < 4                    # no polite-exit wait on a stopped worker
    assert _stat(child) is None and _stat(ghost) is None and _stat(w.pid) is None


@pytest.mark.slow
@linux_only
def test_a_process_that_keeps_forking_is_killed_with_the_worker(write):
    """A chain in which each generation forks the next and exits (new pid, new parent every time) is caught:
    stopped first, then killed, until none of the worker's session is left."""
    w = Worker("chain")
    try:
        w.request({"op": "build", "path": write("chain.py", FORK_CHAIN), "cls": "ModelNew", "init_inputs": [],
                   "state": {}, "device": "cpu"}, 120)
        _wait_file(w.workdir / "tmpdir" / "chain")
        assert len(_in_session(w.pid)) >= 2
    finally:
        w.close()
    assert _in_session(w.pid) == []


@pytest.mark.slow          # starts workers
def test_a_worker_imports_the_judges_own_kernelgate(tmp_path):
    """The worker's PYTHONPATH starts with the directory that holds the judge's kernelgate package (not the package
    itself): another copy on the path (an install, a checkout of another version) cannot answer for the worker."""
    from pathlib import Path

    import kernelgate
    first = scrubbed_env(tmp_path)["PYTHONPATH"].split(":")[0]
    assert Path(first) / "kernelgate" == Path(kernelgate.__file__).resolve().parent
    with Worker() as w:
        got = w.request({"op": "hello"}, 60)
    assert got["pid"] > 0


def test_a_build_failure_says_its_first_compiler_error_in_one_line():
    from kernelgate.records import Reason
    from kernelgate.sandbox.host import WorkerFailure, compiler_error
    gcc = ("RuntimeError: Error building extension 'kg_x': [1/2] c++ -MMD -c /somewhere/kg_x/main.cpp -o main.o\n"
           "FAILED: main.o\n/somewhere/kg_x/main.cpp: In function 'int f()':\n"
           "/somewhere/kg_x/main.cpp:2:17: error: 'nope' was not declared in this scope\n    2 | int f(){ return nope; }\n")
    nvcc = 'FAILED: cuda.cuda.o\n/somewhere/kg_x/cuda.cu(12): error: identifier "blockIdxx" is undefined\n'
    triton = ("triton.compiler.errors.CompilationError: at 35:8:\n    y = tl.tanh(acc)\n        ^\n"
              "AttributeError(\"module 'triton.language' has no attribute 'tanh'\")\n")
    assert compiler_error(gcc) == "main.cpp:2:17: 'nope' was not declared in this scope"
    assert compiler_error(nvcc) == 'cuda.cu(12): identifier "blockIdxx" is undefined'
    assert compiler_error(triton) == "Triton, at 35:8: AttributeError(\"module 'triton.language' has no attribute 'tanh'\")"
    assert compiler_error("ValueError: no compiler here") is None
    e = WorkerFailure(Reason.BUILD_ERROR, "importing cand.py failed: RuntimeError: Error building extension", gcc)
    assert e.message.startswith("compiler error: main.cpp:2:17: 'nope' was not declared") and "\n" not in e.message
    assert WorkerFailure(Reason.CRASH, "forward: ValueError: x", "tb").message == "forward: ValueError: x"
