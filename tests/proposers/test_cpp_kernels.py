"""The C++ (CPU) strategies (cpp_kernels.py over kernels/cpp_*.py): they apply on the CPU only and only to
matching graphs, not at all without a compiler (with a note), and a rendered candidate passes the gate with
its kernels running in C++. The kernels themselves: tests/kernels/test_cpp.py."""
import logging
from pathlib import Path

import pytest
import torch

from kernelgate import api
from kernelgate.graph import analyse
from kernelgate.kernels import cpp_launch as C
from kernelgate.proposers import Context
from kernelgate.proposers.library import Library
from kernelgate.proposers.library.library import REWRITE_FNS
from kernelgate.records import Contract

pytestmark = pytest.mark.skipif(C.kg_cpp_compiler() is None, reason="needs a C++ compiler")


CHAIN_WL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.bias = nn.Parameter(torch.zeros(d))
    def forward(self, x):
        h = F.silu(self.norm(x) * 2.0 + self.bias)
        return torch.softmax(h, dim=-1), torch.tanh(h) * torch.sigmoid(x)
def get_inputs():
    return [torch.randn(64, 96)]
def get_init_inputs():
    return [96]
'''

SINGLE_WL = CHAIN_WL.replace("torch.tanh(h) * torch.sigmoid(x)", "x").replace(" * 2.0 + self.bias", "")


def _ctx(path: str, target: str = "cpu") -> Context:
    from kernelgate.workload import Spec, load_reference
    ref = load_reference(Spec.parse(path, "Model"))
    return Context(Path(path).read_text(), "Model", target, "test", Contract(), analyse(ref.build(), None, REWRITE_FNS),
                   (), {})


def _names(ctx):
    return {lv[0][0].name for lv in Library().singles(ctx)}


def test_strategies_apply_on_cpu_only_and_only_to_matching_graphs(write):
    cpu = _ctx(write("chain.py", CHAIN_WL))
    assert {"cpp:pointwise", "cpp:softmax", "cpp:layernorm"} <= _names(cpu)
    assert not any(n.startswith("cpp:") for n in _names(_ctx(write("chain2.py", CHAIN_WL), "cuda")))
    single = _names(_ctx(write("single.py", SINGLE_WL)))
    assert "cpp:pointwise" not in single and "cpp:layernorm" in single   # a lone silu is no chain


def test_no_compiler_means_no_pattern_and_a_note(write, monkeypatch, caplog):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(C, "_KG_CPP_WARNED", [])
    with caplog.at_level(logging.WARNING):
        ctx = _ctx(write("chain.py", CHAIN_WL))
    assert not any(n.startswith("cpp:") for n in _names(ctx))
    assert C.KG_CPP_NO_COMPILER in caplog.text


@pytest.mark.slow
def test_rendered_candidate_passes_the_gate(write, tmp_path):
    ref = write("chain.py", CHAIN_WL)
    ctx = _ctx(ref)
    lib = Library()
    by_name = {lv[0][0].name: lv[0] for lv in lib.singles(ctx)}
    cand = lib._make(ctx, [by_name["cpp:pointwise"], by_name["cpp:softmax"], by_name["cpp:layernorm"]], None, 0)
    assert cand.source.count("def kg_cpp_pointwise(") == 1 and "#include <Python.h>" in cand.source
    # here, on the reference's inputs: every kernel the graph calls runs in C++ (no structural fallback)
    ns: dict = {"__name__": "kg_candidate"}
    exec(compile(cand.source, "cand.py", "exec"), ns)                # noqa: S102 - the test's own candidate
    calls = []
    real = ns["_kg_cpp_fn"]
    ns["_kg_cpp_fn"] = lambda name, src: calls.append(name) or real(name, src)
    with torch.no_grad():
        ns["ModelNew"](96).eval()(torch.randn(64, 96))
    assert {"kg_softmax", "kg_layernorm"} <= set(calls) and any(c.startswith("kg_pw_") for c in calls), calls
    # in the gate's worker: a launcher falling back to the torch ops on contiguous inputs raises, so an
    # accepted verdict is the C++ kernels' own, not eager PyTorch's (the layout trial's column-major inputs
    # are the one place the launchers' documented fallback serves)
    path = tmp_path / "cand.py"
    path.write_text(cand.source + _NO_FALLBACK)
    v = api.verify(ref, str(path), store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    assert not any("ctypes" in n or "files" in n for n in v.notes)


_NO_FALLBACK = """

_kg_test_cpp_ok = _kg_cpp_ok


def _kg_cpp_ok(t):
    ok = _kg_test_cpp_ok(t)
    if not ok and t.is_contiguous():
        raise RuntimeError("a C++ launcher fell back to torch")
    return ok


_kg_test_ir_eval = _kg_ir_eval


def _kg_ir_eval(program, vals):
    if all(v.is_contiguous() for v in vals if torch.is_tensor(v)):
        raise RuntimeError("kg_cpp_pointwise fell back to torch")
    return _kg_test_ir_eval(program, vals)
"""
