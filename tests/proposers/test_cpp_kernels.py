"""C++ (load_inline) kernels for the CPU: fused pointwise chains, row softmax, LayerNorm, as fx rewrites.

Every kernel is built once for the whole file (the rewrites record all kernels first; the first call
builds them into one extension)."""
import logging
from pathlib import Path

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelgate import api
from kernelgate.graph import analyse
from kernelgate.proposers import Context
from kernelgate.proposers.library import Library, cpp_kernels as ck
from kernelgate.proposers.library.library import REWRITE_FNS
from kernelgate.records import Contract

pytestmark = pytest.mark.skipif(ck.kg_cpp_compiler() is None, reason="needs a C++ compiler")


class Chain(nn.Module):
    def __init__(self, d=48):
        super().__init__()
        self.scale = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.bias = nn.Parameter(0.1 * torch.randn(d))
        self.act = nn.GELU(approximate="tanh")
        self.silu = nn.SiLU()

    def forward(self, x, y):
        h = x * self.scale + self.bias                       # last-dim parameter vectors
        a = F.gelu(h) * torch.sigmoid(y) - torch.tanh(h) / 3.0
        b = self.silu(a).exp().neg() + 2 / (x.abs() + 1)     # abs is not fused: an input; 2/t is reciprocal*2
        return a, self.act(b) * 0.5 + torch.relu(1 - y), F.relu(x)      # relu(x) alone: not a chain


class Norms(nn.Module):
    def __init__(self, d=48):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.sm = nn.Softmax(dim=-1)

    def forward(self, x):
        return self.sm(self.ln(x)), F.softmax(x * 2, dim=-1), x.softmax(-1), F.layer_norm(x, (x.shape[-1],))


@pytest.fixture(scope="module")
def rewritten():
    """Both modules rewritten with every cpp rewrite, then all kernels built in one extension."""
    torch.manual_seed(0)
    out = {}
    for name, m in (("chain", Chain().eval()), ("norms", Norms().eval())):
        gm = torch.fx.symbolic_trace(m)
        counts = {k: REWRITE_FNS[k](gm) for k in ("cpp-layernorm", "cpp-softmax", "cpp-pointwise")}
        out[name] = (m, gm, counts)
    assert ck._KG_CPP_PENDING                                  # recorded, nothing built yet
    return out


def _inputs(*shape):
    """Normal values and specials (not +inf: torch's vectorized fp32 gelu gives NaN there, the fp64 oracle
    and the kernel inf)."""
    x = torch.randn(*shape) * 3
    x.view(-1)[:6] = torch.tensor([float("nan"), 1e30, -float("inf"), 0.0, 88.8, -104.0])
    return x


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=2e-6, atol=2e-6, equal_nan=True)


@pytest.fixture
def ran(monkeypatch):
    """(kernel name, its arguments) for every call of a built C++ function: what ran in C++. A launcher that
    falls back to the torch ops (silently, by design, where a kernel does not apply) adds nothing here."""
    calls = []
    real = ck._kg_cpp_fn

    def fn(name, source):
        kernel = real(name, source)
        return lambda *args: calls.append((name, args)) or kernel(*args)
    monkeypatch.setattr(ck, "_kg_cpp_fn", fn)
    return calls


def test_rewrites_fuse_what_they_should(rewritten):
    _, gm, counts = rewritten["chain"]
    assert counts == {"cpp-layernorm": 0, "cpp-softmax": 0, "cpp-pointwise": 2}
    fused = [n for n in gm.graph.nodes if n.target is ck.kg_cpp_pointwise]
    assert len(fused) == 2 and sorted(len(n.args[0]) for n in fused) == [8, 11]
    left = {getattr(n.target, "__name__", n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    assert left == {"kg_cpp_pointwise", "abs", "relu"}     # abs: an input; relu(x) alone
    _, gm2, counts2 = rewritten["norms"]
    assert counts2 == {"cpp-layernorm": 2, "cpp-softmax": 3, "cpp-pointwise": 0}


def test_kernels_match_eager_and_run_in_cpp(rewritten, ran):
    x, y = _inputs(64, 48), _inputs(64, 48).flip(0).contiguous()
    with torch.no_grad():
        for name, args in (("chain", (x, y)), ("norms", (x[6:].clone(),)), ("norms", (torch.randn(3, 5, 48),))):
            m, gm, _ = rewritten[name]
            for got, want in zip(gm(*args), m(*args)):
                _close(got, want)
    names = [name for name, _ in ran]
    assert names.count("kg_softmax") == 6 and names.count("kg_layernorm") == 4     # 3 and 2 per norms call
    assert sum(n.startswith("kg_pw_") for n in names) == 2 and len(names) == 12
    assert not ck._KG_CPP_PENDING


def test_flat_and_large_inputs_use_chunked_rows(rewritten, ran):
    m, gm, _ = rewritten["chain"]
    x, y = torch.randn(3, 5000, 48), torch.randn(3, 5000, 48)    # > the OpenMP threshold; rows of 48
    with torch.no_grad():
        for got, want in zip(gm(x, y), m(x, y)):
            _close(got, want)
    # pointwise arguments: out, rows, row length, total, then (pointer, stride) per input
    # rows of 48 where a last-dim parameter vector is an input, else flat chunks
    assert [a[1:4] for n, a in ran] == [(15000, 48, 720000), (-(-720000 // ck._KG_CPP_CHUNK), ck._KG_CPP_CHUNK, 720000)]
    assert all(n.startswith("kg_pw_") for n, _ in ran)
    t = torch.randn(10007)                                           # no vector input: flat, ragged last chunk
    prog = (("mul", ("x", 0), ("c", 0.1)), ("sigmoid", ("v", 0)), ("sub", ("c", 1.0), ("v", 1)))
    _close(ck.kg_cpp_pointwise(prog, t), ck._kg_cpp_eval(prog, (t,)))
    assert ran[2][1][1:4] == (3, ck._KG_CPP_CHUNK, 10007) and len(ran) == 3


def test_state_dict_reload_is_honoured(rewritten, ran):
    m, gm, _ = rewritten["chain"]
    x, y = torch.randn(8, 48), torch.randn(8, 48)
    with torch.no_grad():
        before = gm(x, y)[1].clone()
        sd = {k: v + 0.5 for k, v in m.state_dict().items()}
        m.load_state_dict(sd)                                  # gm shares m's parameters
        after = gm(x, y)
        assert not torch.allclose(before, after[1])
        for got, want in zip(after, m(x, y)):
            _close(got, want)
    mn, gn, _ = rewritten["norms"]
    with torch.no_grad():
        mn.ln.weight.mul_(-2.0)
        mn.ln.bias.add_(1.0)
        _close(gn(x)[0], mn(x)[0])
    assert {n for n, _ in ran} >= {"kg_softmax", "kg_layernorm"} and sum(n.startswith("kg_pw_") for n, _ in ran) == 4


def test_fallbacks_are_the_reference_ops(rewritten, monkeypatch):
    monkeypatch.setattr(ck, "_kg_cpp_fn", lambda *a: pytest.fail("a C++ kernel ran where it does not apply"))
    m, gm, _ = rewritten["chain"]
    mn, gn, _ = rewritten["norms"]
    x = torch.randn(48, 48)
    cases = [(m, gm, (x.double(), x.double())),                     # dtype
             (m, gm, (x.t(), x)),                                   # non-contiguous
             (m, gm, (x, x[:1].clone())),                           # a broadcast other than a last-dim vector
             ("double", gn, (x.double(),))]
    with torch.no_grad():
        for ref, fast, args in cases:
            ref = mn.double() if ref == "double" else ref           # gn shares mn's parameters
            for got, want in zip(fast(*args), ref(*args)):
                torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    mn.float()
    xg = torch.randn(4, 48, requires_grad=True)                     # autograd: torch, with a graph
    out = gm(xg, torch.randn(4, 48))[1]
    out.sum().backward()
    assert xg.grad is not None and torch.isfinite(xg.grad).all()
    s = torch.randn(6, 48)
    assert torch.equal(ck.kg_cpp_softmax(s, 0), torch.softmax(s, 0))              # not the last dim
    assert torch.equal(ck.kg_cpp_softmax(s.t(), -1), torch.softmax(s.t(), -1))    # non-contiguous
    assert torch.equal(ck.kg_cpp_layernorm(s.t(), (6,)), F.layer_norm(s.t(), (6,)))
    assert torch.equal(ck.kg_cpp_layernorm(s, (6, 48)), F.layer_norm(s, (6, 48)))   # 2-D normalized shape


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
    monkeypatch.setattr(ck, "_KG_CPP_WARNED", [])
    with caplog.at_level(logging.WARNING):
        ctx = _ctx(write("chain.py", CHAIN_WL))
    assert not any(n.startswith("cpp:") for n in _names(ctx))
    assert ck.KG_CPP_NO_COMPILER in caplog.text


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
    # in the gate's worker: a launcher falling back to the torch ops (inputs the kernels do not take) raises,
    # so an accepted verdict is the C++ kernels' own, not eager PyTorch's
    path = tmp_path / "cand.py"
    path.write_text(cand.source + _NO_FALLBACK)
    v = api.verify(ref, str(path), store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    assert not any("ctypes" in n or "files" in n for n in v.notes)


_NO_FALLBACK = """

_kg_test_cpp_ok = _kg_cpp_ok


def _kg_cpp_ok(t):
    if not _kg_test_cpp_ok(t):
        raise RuntimeError("a C++ launcher fell back to torch")
    return True


def _kg_cpp_eval(prog, xs):
    raise RuntimeError("kg_cpp_pointwise fell back to torch")
"""
