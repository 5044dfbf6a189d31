"""The worker's interpreter guard (kernelgate/sandbox/guard.py). An audit hook cannot be removed, so each test runs
its scenario in a fresh interpreter."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow            # every test starts a fresh interpreter that imports torch

PRELUDE = """
import sys, torch
from kernelgate.sandbox.guard import Guard, Denied
g = Guard()
g.install()
"""


def _run(tmp_path: Path, candidate: str, driver: str) -> str:
    """Write `candidate` as a file outside every trusted root, import it, run `driver`; return stdout."""
    (tmp_path / "cand_mod.py").write_text(textwrap.dedent(candidate))
    code = PRELUDE + f"sys.path.insert(0, {str(tmp_path)!r})\nimport cand_mod\n" + textwrap.dedent(driver)
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.parametrize("expr", [
    "sys._getframe(0)",
    "__import__('inspect').currentframe()",          # through the standard library: still the candidate's
    "__import__('traceback').extract_stack()",
    "__import__('gc').get_objects()",
    "__import__('gc').get_referrers(sys)",
    "sys.settrace(None)",
    "sys.addaudithook(lambda *a: None)",
    "__import__('ctypes').pythonapi.PyFrame_LocalsToFast",
    "__import__('ctypes').c_int.from_address(id(1))",
    "__import__('ctypes').CDLL('libc.so.6').memcpy",
    "__import__('ctypes').CDLL('libm.so.6').syscall",      # the C library's, through libm's dependencies (rt 48)
    "__import__('ctypes').CDLL('libm.so.6').mallopt",      # the allocator's settings (red team 49)
    "setattr(getattr(torch.nn.functional.relu, '__wrapped__', torch.nn.functional.relu), '__code__', (lambda: 0).__code__)",
    "exec(compile('x = 1', torch.__file__, 'exec'), {})",
    "(lambda: 0).__code__.replace(co_filename=torch.__file__)",
    "compile('x = 1', __import__('os').path.dirname(torch.__file__) + '/../../../../tmp/x.py', 'exec')",
    "__import__('marshal').loads(__import__('marshal').dumps(compile('x = 1', 'x.py', 'exec')))",
    "__import__('types').FunctionType(torch.nn.functional.relu.__code__, {})",
])
def test_candidate_code_is_refused(tmp_path, expr):
    out = _run(tmp_path, f"""
        import sys, torch
        def attempt():
            try:
                {expr}
            except PermissionError as e:
                return "DENIED " + str(e)
            return "ALLOWED"
    """, "print(cand_mod.attempt()); print('RECORDED', len(g.denied), g.denied)")
    # sys.addaudithook swallows a hook's refusal (the new hook is simply not added): the record still holds it
    assert "DENIED kernelgate refused candidate code" in out or "addaudithook" in expr, out
    assert "RECORDED 1 " in out and "kernelgate refused candidate code" in out.split("RECORDED")[1] and "cand_mod.py" in out, out


def test_tracebacks_and_generators_frames(tmp_path):
    out = _run(tmp_path, """
        def tb():
            try:
                raise ValueError
            except ValueError as e:
                try:
                    return e.__traceback__.tb_frame
                except PermissionError:
                    return "DENIED"
        def gen():
            g = (i for i in range(3))
            try:
                return g.gi_frame
            except PermissionError:
                return "DENIED"
    """, "print(cand_mod.tb(), cand_mod.gen())")
    assert out.split() == ["DENIED", "DENIED"], out


def test_library_code_and_honest_candidate_code_pass(tmp_path):
    out = _run(tmp_path, """
        import torch, inspect, functools, ctypes, ctypes.util
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.relu(x) * 2
        def attempt():
            m = M()
            y = m(torch.randn(4))                       # torch's own frame machinery (nn.Module hooks)
            sig = inspect.signature(M.forward)          # no frames involved
            libm = ctypes.CDLL(ctypes.util.find_library("m"))   # a library of one's own: allowed
            libm.cos.restype = ctypes.c_double
            libm.cos.argtypes = [ctypes.c_double]
            setattr(M, "extra", 1)                       # the candidate's own class
            return f"OK {y.shape[0]} {len(sig.parameters)} {libm.cos(0.0)}"
    """, "print(cand_mod.attempt()); print('RECORDED', len(g.denied))\n"
         "import threading, kernelgate.sandbox.sensors as w\nt = threading.Thread(target=lambda: None)\nt.start()\n"
         "t.join()\nprint('TRUSTED', type(w._THREAD_ORIGIN.get(t)).__name__)")   # the thread sensor's own frame walk
    assert "OK 4 2 1.0" in out and "RECORDED 0" in out and "TRUSTED str" in out, out


def test_integrity_sees_replaced_names_and_active_modes(tmp_path):
    out = _run(tmp_path, """
        import sys, torch
        from torch.overrides import TorchFunctionMode
        def patch():
            sys.modules["kernelgate.digest"].digest = lambda t: 0
        def patch_class():
            import multiprocessing.connection as c
            c.Connection.send_bytes = lambda *a: None      # shadows _ConnectionBase's
        def enter():
            TorchFunctionMode().__enter__()
    """, """
        import kernelgate.digest, json, multiprocessing.connection as mpc
        import kernelgate.sandbox.worker
        g.watch([torch, kernelgate.digest, json, mpc.Connection], [kernelgate.digest, kernelgate.sandbox.worker, mpc],
                (torch._C._len_torch_function_stack,))
        print("A", g.integrity())
        torch._kg_added_lazily = 1                      # torch may gain names (lazy submodules)
        print("B", g.integrity())
        orig = kernelgate.digest.digest
        cand_mod.patch()
        print("C", g.integrity())
        kernelgate.digest.digest = orig
        print("D", g.integrity())
        cand_mod.enter()
        print("E", g.integrity())
        torch._C._pop_torch_function_stack()
        send = mpc.Connection.send_bytes
        cand_mod.patch_class()
        print("F", g.integrity())
    """)
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert lines["A"] == "None" and lines["B"] == "None" and lines["D"] == "None", out
    assert "kernelgate.digest" in lines["C"] and "mode" in lines["E"], out
    assert "multiprocessing.connection.Connection" in lines["F"], out


def test_window_names_candidate_code_run_by_the_harness(tmp_path):
    out = _run(tmp_path, """
        def shadow(t):
            real = t.stride
            t.stride = lambda *a: real(*a)
            return t
    """, """
        import torch, kernelgate.sandbox.sensors as w
        t = cand_mod.shadow(torch.ones(3))
        g.window_open(); w.describe_output(torch.ones(3), [], "cpu"); print("CLEAN", g.window_close())
        g.window_open(); w.describe_output(t, [], "cpu"); print("DIRTY", g.window_close())
    """)
    assert "CLEAN None" in out and "DIRTY candidate code ran" in out and "cand_mod.py" in out, out


def test_generated_code_is_recorded_only_before_the_candidate(tmp_path):
    """Code generated after the guard's install is never a library's, whoever asked (a thread whose target
    is exec, a finalizer, torch.fx called through a callback: stacks can look clean); functions made from,
    or given, the code recorded at install are refused (they would run in the window with the candidate's
    globals or defaults)."""
    out = _run(tmp_path, """
        import types, torch
        from kernelgate.records import Check
        def traced():
            return torch.fx.symbolic_trace(torch.nn.ReLU())
        def remake():
            try:
                types.FunctionType(Check.__hash__.__code__, {"hash": iter})
            except PermissionError as e:
                return "DENIED " + str(e)
            return "ALLOWED"
        def recode():
            def f(self):
                return 0
            try:
                f.__code__ = Check.__hash__.__code__
            except PermissionError as e:
                return "DENIED " + str(e)
            return "ALLOWED"
    """, """
        import concurrent.futures, torch
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            ours = pool.submit(torch.fx.symbolic_trace, torch.nn.ReLU()).result()
        x = torch.ones(3)
        g.window_open(); ours(x); print("AFTER", g.window_close())
        g.window_open(); cand_mod.traced()(x); print("CANDIDATE", g.window_close())
        print("REMAKE", cand_mod.remake())
        print("RECODE", cand_mod.recode())
    """)
    assert "AFTER candidate code ran" in out and "CANDIDATE candidate code ran" in out, out
    assert "REMAKE DENIED" in out and "RECODE DENIED" in out, out


def test_window_lets_functions_generated_before_the_guard_run(tmp_path):
    """The worker builds its digest kernel (and Triton its launch binder) before the guard is installed:
    generated code that existed before any candidate code may run in the harness's window."""
    code = textwrap.dedent("""
        import torch
        from kernelgate.sandbox.guard import Guard
        gm = torch.fx.symbolic_trace(torch.nn.ReLU())
        g = Guard()
        g.install()
        g.window_open(); gm(torch.ones(3)); print("BEFORE", g.window_close())
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "BEFORE None" in p.stdout, p.stdout


def test_window_names_a_candidate_imported_by_trusted_code(tmp_path):
    """The worker imports the candidate's file from trusted code: the module's code is the candidate's
    (its file says so), never a library's generated code, however clean the stack at its import."""
    (tmp_path / "cand_late.py").write_text("def shadow(t):\n    real = t.stride\n"
                                           "    t.stride = lambda *a: real(*a)\n    return t\n")
    out = _run(tmp_path, "x = 1\n", """
        import concurrent.futures, importlib, torch, kernelgate.sandbox.sensors as w
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            late = pool.submit(importlib.import_module, "cand_late").result()
        t = late.shadow(torch.ones(3))
        g.window_open(); w.describe_output(t, [], "cpu"); print("DIRTY", g.window_close())
    """)
    assert "DIRTY candidate code ran" in out and "cand_late.py" in out, out
