"""The guard's seal on torch's dispatcher (kernelgate/sandbox/guard.py, `seal_dispatcher`): no kernel in front of
an operator the harness runs. Red team 16 registered a C-callable kernel for aten::detach that rewrote outputs
whenever the harness detached them. Run in a fresh interpreter (the seal changes torch for the whole process)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r'''
import json, torch
from kernelgate.sandbox.guard import seal_dispatcher, Denied
denied = []
seal_dispatcher(denied, True)
got = {}
def attempt(name, fn):
    try:
        fn()
        got[name] = "done"
    except Denied:
        got[name] = "denied"
    except Exception as e:
        got[name] = type(e).__name__
keep = []
def aten_impl():
    lib = torch.library.Library("aten", "IMPL")
    keep.append(lib)
    lib.impl("detach", lambda x: torch.ops.aten.alias.default(x), "CPU")
def wildcard_impl():
    lib = torch.library.Library("_", "IMPL")
    keep.append(lib)
    lib.impl("aten::sum", lambda x: x, "CPU")
def fallback():
    lib = torch.library.Library("_", "IMPL", "CPU")
    keep.append(lib)
    lib.fallback(lambda *a: None)
def own_op():
    lib = torch.library.Library("kg_seal_test", "DEF")
    keep.append(lib)
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    assert torch.equal(torch.ops.kg_seal_test.twice(torch.ones(2)), torch.full((2,), 2.0))
def custom_op():
    @torch.library.custom_op("kg_seal_test2::thrice", mutates_args=())
    def thrice(x: torch.Tensor) -> torch.Tensor:
        return x * 3
    assert torch.equal(thrice(torch.ones(2)), torch.full((2,), 3.0))
attempt("aten_impl", aten_impl)
attempt("wildcard_impl", wildcard_impl)
attempt("fallback", fallback)
attempt("own_op", own_op)
attempt("custom_op", custom_op)
x = torch.randn(3)
got["detach_intact"] = bool(torch.equal(x.detach(), x))
got["denied"] = len(denied)
print(json.dumps(got))
'''


@pytest.mark.slow
def test_kernels_for_the_harness_operators_are_refused_and_other_namespaces_work(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["aten_impl"] == "denied" and got["wildcard_impl"] == "denied" and got["fallback"] == "denied", got
    assert got["own_op"] == "done" and got["custom_op"] == "done", got
    assert got["detach_intact"] is True and got["denied"] == 3, got
