"""Signal handlers never see the harness (docs/GATE.md, "Signal handlers").

CPython hands a Python-level signal handler the frame it interrupted, and `signal.signal` raises no audit
event: a handler installed by candidate code and run while the harness is on the stack could walk `f_back`
to it (tests/corpus/exploits_redteam3/sigframe_harness_swap.py). The worker runs the harness, and with it every
line of candidate code, in a thread of its own: Python runs handlers only in the main thread, and
`signal.signal` works only there, so candidate code can install none. After the build the lockdown's
seccomp filter also refuses every rt_sigaction that sets an action (queries stay allowed).

Each candidate records what it saw in a file in its private directory ($TMPDIR), which the test reads."""
import errno
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelgate.records import Reason
from kernelgate.sandbox import Worker, WorkerFailure, isolation

LINUX = sys.platform.startswith("linux")
needs_linux = pytest.mark.skipif(not LINUX, reason="process isolation is Linux-only")
needs_seccomp = pytest.mark.skipif(not (LINUX and isolation.seccomp_supported() and not isolation.disabled()),
                                   reason="no seccomp filters here: the lockdown installs none")

RECORD = '''
import json, os
def record(**kv):
    path = os.path.join(os.environ["TMPDIR"], "result.json")
    got = json.load(open(path)) if os.path.exists(path) else {}
    got.update(kv)
    with open(path, "w") as f:
        json.dump(got, f)
def attempt(fn):
    """'done', or the name of the exception (with the errno name for an OSError)"""
    import errno
    try:
        fn()
        return "done"
    except OSError as e:
        return f"{type(e).__name__}:{errno.errorcode.get(e.errno, e.errno)}"
    except Exception as e:
        return type(e).__name__
'''

SIGNALS = RECORD + '''
import _signal, _thread, importlib, signal, threading
import torch

def handler(signum, frame):
    record(handler_ran=True)

def probe(tag):
    record(**{
        f"{tag}_main_thread": threading.current_thread() is threading.main_thread(),
        f"{tag}_signal": attempt(lambda: signal.signal(signal.SIGUSR1, handler)),
        f"{tag}_builtin": attempt(lambda: _signal.signal(signal.SIGUSR2, handler)),
        f"{tag}_reloaded": attempt(lambda: importlib.reload(signal).signal(signal.SIGALRM, handler)),
        f"{tag}_wakeup_fd": attempt(lambda: signal.set_wakeup_fd(os.open(os.devnull, os.O_WRONLY))),
        f"{tag}_siginterrupt": attempt(lambda: signal.siginterrupt(signal.SIGINT, True)),
        # a query works from any thread
        f"{tag}_getsignal": [signal.getsignal(s) is signal.SIG_DFL for s in (signal.SIGUSR1, signal.SIGUSR2,
                                                                             signal.SIGALRM)]
                            + [signal.getsignal(signal.SIGINT) is signal.default_int_handler],
        # SIGINT has Python's own handler: raised here and at the main thread, it must not stop the harness
        f"{tag}_raise_sigint": attempt(lambda: signal.raise_signal(signal.SIGINT)),
        f"{tag}_interrupt_main": attempt(_thread.interrupt_main),
        f"{tag}_kill_main": attempt(lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)),
    })

probe("import")

class ModelNew(torch.nn.Module):
    def forward(self, x):
        probe("forward")
        return x + 1
'''


def _result(w: Worker) -> dict:
    p = w.workdir / "tmpdir" / "result.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _build(w: Worker, path, timeout: float = 300) -> None:
    w.request({"op": "build", "path": str(path), "cls": "ModelNew", "init_inputs": [], "state": {},
               "device": "cpu", "guard": "enforce"}, timeout)


def _call(w: Worker, x: torch.Tensor, timeout: float = 300) -> torch.Tensor:
    return w.request({"op": "call", "inputs": [x], "poison_bytes": 0}, timeout)["output"]["tensors"][0]


@pytest.mark.slow
@needs_linux
def test_candidate_code_can_install_no_signal_handler(tmp_path):
    """At import and in forward (before and after the lockdown) candidate code runs off the main thread:
    every way of installing a handler is refused, a query still works, and SIGINT raised at itself or at
    the main thread neither runs a handler nor stops the worker."""
    cand = tmp_path / "signals.py"
    cand.write_text(SIGNALS)
    x = torch.randn(8)
    with Worker("signals") as w:
        _build(w, cand)
        assert torch.equal(_call(w, x), x + 1)
        locked = isolation.seccomp_supported() and not isolation.disabled()
        if locked:
            w.lockdown(120)
            assert w.locked and any(p.startswith("no new processes after build, no signal handler changes")
                                    for p in w.protections)
        assert torch.equal(_call(w, x), x + 1)
        assert torch.equal(_call(w, x), x + 1)          # the SIGINTs of the last call left it serving
        main = isolation.proc_status(w.pid, w.pid)          # the main thread, read from outside
        got = _result(w)
    if main.get("SigBlk"):
        blocked = int(main["SigBlk"], 16)
        assert all(blocked >> (int(sig) - 1) & 1 for sig in (signal.SIGINT, signal.SIGALRM, signal.SIGUSR1)), main
    assert "handler_ran" not in got, got
    for tag in ("import", "forward"):
        assert got[f"{tag}_main_thread"] is False, got
        for how in ("signal", "builtin", "reloaded", "wakeup_fd"):
            assert got[f"{tag}_{how}"] == "ValueError", (tag, how, got)       # "only works in main thread"
        assert got[f"{tag}_getsignal"] == [True, True, True, True], got
        for how in ("raise_sigint", "interrupt_main", "kill_main"):
            assert got[f"{tag}_{how}"] == "done", (tag, how, got)
    # siginterrupt has no thread check: it reaches sigaction, which the lockdown refuses
    assert got["import_siginterrupt"] == "done", got
    if locked:
        assert got["forward_siginterrupt"] == "PermissionError:EPERM", got


@pytest.mark.slow
@needs_linux
def test_a_base_exception_out_of_forward_is_a_crash_never_a_hang(tmp_path):
    """A BaseException out of forward (not an Exception) ends the job on the runner thread, where it is described:
    the call fails with a crash naming it, and the worker goes on serving."""
    cand = tmp_path / "interrupt.py"
    cand.write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                    "    def forward(self, x):\n        raise KeyboardInterrupt\n")
    with Worker("interrupt") as w:
        _build(w, cand)
        with pytest.raises(WorkerFailure) as e:
            _call(w, torch.randn(4), timeout=60)
        assert e.value.reason is Reason.CRASH and "KeyboardInterrupt" in e.value.message, e.value.message
        assert w.request({"op": "hello"}, timeout=30)["pid"] > 0


LOCKED = '''
import errno, faulthandler, json, signal, sys, threading
from kernelgate.sandbox import isolation

def handler(signum, frame):
    pass

def attempt(fn):
    try:
        fn()
        return "done"
    except OSError as e:
        return f"{type(e).__name__}:{errno.errorcode.get(e.errno, e.errno)}"
    except Exception as e:
        return type(e).__name__

got = {"before": attempt(lambda: signal.signal(signal.SIGUSR2, handler))}
isolation.lockdown_self()
box = []
t = threading.Thread(target=lambda: box.append(1))
got["thread_start"] = attempt(t.start)
got.update(
    signal=attempt(lambda: signal.signal(signal.SIGUSR1, handler)),
    recorded=signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL,
    reset=attempt(lambda: signal.signal(signal.SIGUSR2, signal.SIG_DFL)),
    kept=signal.getsignal(signal.SIGUSR2) is handler,
    ignore=attempt(lambda: signal.signal(signal.SIGUSR1, signal.SIG_IGN)),
    siginterrupt=attempt(lambda: signal.siginterrupt(signal.SIGINT, True)),
    faulthandler=attempt(faulthandler.enable),
    mask=attempt(lambda: signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])),
    thread=bool(box),
)
print(json.dumps(got))
'''


@pytest.mark.slow          # starts workers
@needs_seccomp
def test_the_lockdown_filter_refuses_setting_a_signal_action(tmp_path):
    """The lockdown's filter, installed on the main thread of a plain interpreter: signal.signal fails with
    EPERM and records no handler (sigaction comes first), resetting one fails too, faulthandler cannot install
    its handlers, no thread starts; queries and signal masks still work."""
    script = tmp_path / "locked.py"
    script.write_text(LOCKED)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}     # this repository's kernelgate
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["before"] == "done", got
    assert got["signal"] == "PermissionError:EPERM" and got["recorded"] is True, got
    assert got["reset"] == "PermissionError:EPERM" and got["kept"] is True, got
    assert got["ignore"] == "PermissionError:EPERM", got
    assert got["siginterrupt"] == "PermissionError:EPERM", got
    assert got["faulthandler"] == "RuntimeError", got
    assert got["mask"] == "done", got
    assert got["thread_start"] == "RuntimeError" and got["thread"] is False, got     # no new thread either


def test_the_lockdown_program_refuses_only_a_set_action():
    """The rule itself: rt_sigaction refused when act (either 32-bit half) is non-NULL, allowed for a query."""
    if not isolation._NR:
        pytest.skip("no seccomp program for this architecture")
    prog = isolation._lockdown_program()
    nr = isolation._NR["rt_sigaction"]
    eperm = isolation._err(errno.EPERM)
    for act, want in ((0, isolation._RET_ALLOW), (0x7FFD12345678, eperm), (0x7F0000000000, eperm),
                      (0x1000, eperm)):
        assert _run_bpf(prog, nr, [2, act, 0x7FFD00000000, 8]) == want, hex(act)
    assert _run_bpf(prog, isolation._NR["clone"], [0x00010000 | 0x100, 0, 0, 0]) == isolation._err(errno.EAGAIN)
    assert _run_bpf(prog, isolation._NR["clone"], [0x11, 0, 0, 0]) == isolation._err(errno.EPERM)


def _run_bpf(prog: bytes, nr: int, args: list[int]) -> int:
    """A small classic-BPF interpreter for the instructions these programs use, over seccomp_data
    (nr, arch, instruction pointer, six 64-bit arguments; little-endian)."""
    data = struct.pack("<iIQ6Q", nr, isolation._NR["audit"], 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == isolation._LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == isolation._JEQ_K:
            pc += 1 + (jt if acc == k else jf)
        elif code == isolation._JGE_K:
            pc += 1 + (jt if acc >= k else jf)
        elif code == isolation._JSET_K:
            pc += 1 + (jt if acc & k else jf)
        elif code == isolation._RET_K:
            return k
        else:
            raise AssertionError(f"unexpected BPF instruction {code:#x}")


# ------------------------------------------------------------------ compilers under the rule

INDUCTOR = '''
import torch
_f = torch.compile(lambda x: torch.softmax(x * 2, dim=-1))
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _f(x)
'''

TRITON = '''
import torch, triton
import triton.language as tl

@triton.jit
def _twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) * 2, mask=m)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _twice[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y
'''

INLINE = '''
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="kg_signals_twice", cpp_sources="""
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) { return x * 2; }
""", functions=["twice"], verbose=False)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.twice(x)
'''

INLINE_CUDA = '''
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="kg_signals_twice_cuda", cpp_sources="torch::Tensor twice(torch::Tensor x);",
                   cuda_sources="""
#include <torch/extension.h>
__global__ void twice_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * 256L + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
    auto c = x.contiguous();
    auto y = torch::empty_like(c);
    long n = c.numel();
    twice_kernel<<<(n + 255) / 256, 256>>>(c.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
""", functions=["twice"], verbose=False)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.twice(x)
'''


@pytest.mark.slow
@needs_seccomp
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("which", ["inductor", "triton", "load_inline"])
def test_compiled_code_runs_after_the_lockdown(which, device, tmp_path, monkeypatch):
    """torch.compile (inductor: C++ on the CPU, Triton on CUDA), a Triton kernel (the interpreter on the CPU) and a
    load_inline extension (C++, or CUDA), built in the harness's thread (compilers started then), keep working
    after the lockdown's filter (no new processes, no signal handler changes), and so does the profiler."""
    from kernelgate.profiling import launches
    if which == "triton":
        pytest.importorskip("triton")
        if device == "cpu":
            monkeypatch.setenv("TRITON_INTERPRET", "1")
        else:
            monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    source = {"inductor": INDUCTOR, "triton": TRITON,
              "load_inline": INLINE if device == "cpu" else INLINE_CUDA}[which]
    cand = tmp_path / f"{which}.py"
    cand.write_text(source)
    want = (lambda x: torch.softmax(x * 2, dim=-1)) if which == "inductor" else (lambda x: x * 2)
    x = torch.randn(4, 32)
    with Worker(which) as w:
        w.request({"op": "build", "path": str(cand), "cls": "ModelNew", "init_inputs": [], "state": {},
                   "device": device, "guard": "enforce"}, 600)
        torch.testing.assert_close(_call(w, x, timeout=600), want(x))     # compiles here (inductor: first call)
        w.lockdown(120)
        assert w.locked
        for _ in range(2):
            y = torch.randn(4, 32)
            torch.testing.assert_close(_call(w, y), want(y))
        reply = w.request(launches.request(device, [x], 1, 2, device != "cpu"), 300)
        assert reply["events"], "the profiler recorded nothing after the lockdown"


def test_available_names_the_signal_handler_protection():
    got = isolation.available()["signal handlers"]
    assert got.startswith("candidate code runs off the main thread")
    assert ("no handler changes after build (seccomp)" in got) == isolation.seccomp_supported()
