"""C++ kernels for the CPU (kernels/cpp_*.py): fused pointwise programs, row softmax, LayerNorm, as fx rewrites,
compiled by the system C++ compiler and checked against torch; every op of the IR's C++ column, the ones
torch evaluates exactly (sqrt, rsqrt, abs, clamp, pow) bit for bit.

Every kernel of the module-scoped rewrites is built once (the rewrites record all kernels first; the first
call builds them into one extension). The strategies and their candidates: tests/proposers/test_cpp_kernels.py.
"""
import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelgate.kernels import cpp_launch as C, cpp_rewrite as CR
from kernelgate.kernels.ir import _KG_OPS, _KG_POW, _kg_ir_eval

pytestmark = pytest.mark.skipif(C.kg_cpp_compiler() is None, reason="needs a C++ compiler")

REWRITES = {"cpp-layernorm": CR.kg_rewrite_cpp_layernorm, "cpp-softmax": CR.kg_rewrite_cpp_softmax,
            "cpp-pointwise": CR.kg_rewrite_cpp_pointwise}


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
        b = self.silu(a).exp().neg() + 2 / (torch.sin(x).abs() + 1)     # sin: not an op of the IR, an input;
        # 2/t is reciprocal*2
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
        counts = {k: REWRITES[k](gm) for k in ("cpp-layernorm", "cpp-softmax", "cpp-pointwise")}
        out[name] = (m, gm, counts)
    assert C._KG_CPP_PENDING                                  # recorded, nothing built yet
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
    real = C._kg_cpp_fn

    def fn(name, source):
        kernel = real(name, source)
        return lambda *args: calls.append((name, args)) or kernel(*args)
    monkeypatch.setattr(C, "_kg_cpp_fn", fn)
    return calls


def test_rewrites_fuse_what_they_should(rewritten):
    _, gm, counts = rewritten["chain"]
    assert counts == {"cpp-layernorm": 0, "cpp-softmax": 0, "cpp-pointwise": 2}
    fused = [n for n in gm.graph.nodes if n.target is C.kg_cpp_pointwise]
    assert len(fused) == 2 and sorted(len(n.args[0]) for n in fused) == [8, 12]
    left = {getattr(n.target, "__name__", n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    assert left == {"kg_cpp_pointwise", "sin", "relu"}     # sin: an input; relu(x) alone
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
    assert not C._KG_CPP_PENDING


def test_flat_and_large_inputs_use_chunked_rows(rewritten, ran):
    m, gm, _ = rewritten["chain"]
    x, y = torch.randn(3, 5000, 48), torch.randn(3, 5000, 48)    # > the OpenMP threshold; rows of 48
    with torch.no_grad():
        for got, want in zip(gm(x, y), m(x, y)):
            _close(got, want)
    # pointwise arguments: out, rows, row length, total, then (pointer, stride) per input
    # rows of 48 where a last-dim parameter vector is an input, else flat chunks
    assert [a[1:4] for n, a in ran] == [(15000, 48, 720000), (-(-720000 // C._KG_CPP_CHUNK), C._KG_CPP_CHUNK, 720000)]
    assert all(n.startswith("kg_pw_") for n, _ in ran)
    t = torch.randn(10007)                                           # no vector input: flat, ragged last chunk
    prog = (("mul", ("i0", 0.1), ()), ("sigmoid", ("t0",), ()), ("sub", (1.0, "t1"), ()))
    _close(C.kg_cpp_pointwise(prog, t), 1.0 - torch.sigmoid(t * 0.1))
    assert ran[2][1][1:4] == (3, C._KG_CPP_CHUNK, 10007) and len(ran) == 3


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
    monkeypatch.setattr(C, "_kg_cpp_fn", lambda *a: pytest.fail("a C++ kernel ran where it does not apply"))
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
    assert torch.equal(C.kg_cpp_softmax(s, 0), torch.softmax(s, 0))              # not the last dim
    assert torch.equal(C.kg_cpp_softmax(s.t(), -1), torch.softmax(s.t(), -1))    # non-contiguous
    assert torch.equal(C.kg_cpp_layernorm(s.t(), (6,)), F.layer_norm(s.t(), (6,)))
    assert torch.equal(C.kg_cpp_layernorm(s, (6, 48)), F.layer_norm(s, (6, 48)))   # 2-D normalized shape




# ---------------------------------------------------------------- the ops the C++ column gained

def _specials(n=40000):
    """Values over the whole float32 range and the edges every op has: signed zeros, subnormals, the
    smallest normal, values next to 1, huge ones, infinities and NaN; n > the OpenMP threshold, and a ragged
    chunk at the end (40000 = 9 * 4096 + 3136)."""
    g = torch.Generator().manual_seed(1)
    mags = torch.pow(10.0, torch.empty(n // 2, dtype=torch.float64).uniform_(-45, 38.5, generator=g))
    signs = torch.where(torch.rand(n // 2, generator=g) < 0.5, -1.0, 1.0).double()
    x = torch.cat([(mags * signs).float(), torch.randn(n // 2, generator=g) * 3])
    edges = [0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.1754944e-38, 1.1754942e-38, 1.0, 1.0000001, 0.99999994,
             0.70710677, 0.7071068, 2.0, 0.5, 3.4e38, float("inf"), -float("inf"), float("nan"), -1.0, 0.25]
    x[:len(edges)] = torch.tensor(edges)
    return x


def _ulps(got, want):
    """Distance in float32 steps, 0 where both are NaN or the same infinity."""
    a, b = got.view(torch.int32).long(), want.view(torch.int32).long()
    a = torch.where(a < 0, -(a & 0x7FFFFFFF), a)                 # monotone integer line through -0 / +0
    b = torch.where(b < 0, -(b & 0x7FFFFFFF), b)
    d = (a - b).abs()
    return torch.where(torch.isnan(got) & torch.isnan(want), 0, d)


# op, params, what torch computes (written out here, not read from the op table), ulps allowed from torch's.
# torch's own sqrt is not always correctly rounded (1 ulp off at times on this CPU build); the kernel's is.
NEW_OPS = [("log", (), torch.log, 2), ("sqrt", (), torch.sqrt, 1), ("rsqrt", (), torch.rsqrt, 0),
           ("abs", (), torch.abs, 0), ("square", (), torch.square, 0),
           ("clamp", (-0.5, 0.75), lambda x: torch.clamp(x, -0.5, 0.75), 0),
           ("clamp", (0.1, None), lambda x: torch.clamp(x, min=0.1), 0),
           ("clamp", (None, 0.3), lambda x: torch.clamp(x, max=0.3), 0),
           ("clamp", (0.5, 0.2), lambda x: torch.clamp(x, 0.5, 0.2), 0)]          # min > max: max, as torch
NEW_OPS += [("pow", (e,), lambda x, e=e: torch.pow(x, e), int(e == 0.5)) for e in _KG_POW]


@pytest.mark.parametrize("op, params, torch_op, ulps", NEW_OPS, ids=[f"{o[0]}{o[1]}" for o in NEW_OPS])
def test_new_ops_compile_run_and_match_torch(ran, op, params, torch_op, ulps):
    x = _specials()
    program = ((op, ("i0",), params),)
    got = C.kg_cpp_pointwise(program, x)
    assert [name for name, _ in ran] == [C._kg_cpp_program(program, 1)[0]]      # the generated loop ran
    want = torch_op(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    err = _ulps(got, want)
    assert int(err.max()) <= ulps, (op, params, x[err.argmax()].item(), got[err.argmax()].item(),
                                    want[err.argmax()].item())


def test_log_and_sqrt_against_fp64():
    """The polynomial log within 1 ulp of the correctly rounded value over the float32 range (torch's own
    may differ from it by 1 ulp the other way: the 2 allowed above); sqrt correctly rounded."""
    x = _specials().abs()
    for op, ulps in (("log", 1), ("sqrt", 0)):
        got = C.kg_cpp_pointwise(((op, ("i0",), ()),), x)
        exact = getattr(torch, op)(x.double()).float()
        assert int(_ulps(got, exact).max()) <= ulps, op


class NewOps(nn.Module):
    def forward(self, x, w):
        a = torch.log(x.abs() + 0.1) + torch.sqrt(x * x + 1) + torch.rsqrt(x.abs() + 2) * w
        b = torch.clamp(x, -0.5, 0.75) + x.clamp(min=0.1) + torch.clip(x, max=0.3) + x.clip(0.5, 0.2)
        c = x ** 2 + torch.pow(x, 3) + (x.abs() + 1).pow(-1) + (x.abs() + 1) ** 0.5 + torch.square(x) + x.pow(-2)
        return (a + b) * 0.5 - c / 3 + (x.abs() + 1).pow(-0.5) + x.pow(1)


def test_new_ops_are_fused_from_the_graph(ran):
    m = NewOps()
    gm = torch.fx.symbolic_trace(m)
    assert CR.kg_rewrite_cpp_pointwise(gm) == 1
    (node,) = [n for n in gm.graph.nodes if n.target is C.kg_cpp_pointwise]
    ops = {op for op, _, _ in node.args[0]}
    assert {"log", "sqrt", "rsqrt", "abs", "clamp", "pow", "square"} <= ops
    assert {p for op, _, p in node.args[0] if op == "pow"} == {(2,), (3,), (-1,), (0.5,), (-2,), (-0.5,), (1,)}
    x, w = torch.randn(64, 48) * 2, torch.randn(48)
    x[0, :3] = torch.tensor([0.0, -0.0, 1e-3])
    with torch.no_grad():
        torch.testing.assert_close(gm(x, w), m(x, w), rtol=2e-6, atol=2e-6)
    assert len(ran) == 1 and ran[0][0].startswith("kg_pw_") and ran[0][1][1:4] == (64, 48, 64 * 48)


def test_numbers_a_float32_kernel_cannot_hold_stay_torch():
    class Wide(nn.Module):
        def forward(self, x):
            return (x * 1e300).clamp(max=1e39).exp(), torch.sigmoid(x * 2) + 1, (x * True).exp()
    gm = torch.fx.symbolic_trace(Wide())
    assert CR.kg_rewrite_cpp_pointwise(gm) == 1                    # sigmoid(x * 2) + 1 only
    (node,) = [n for n in gm.graph.nodes if n.target is C.kg_cpp_pointwise]
    assert [op for op, _, _ in node.args[0]] == ["mul", "sigmoid", "add"]


@pytest.mark.slow          # one C++ build per op (8 s): the parametrized op tests below stay in the fast loop
def test_every_op_has_a_cpp_expression():
    assert {op for op in _KG_OPS if _KG_OPS[op][2] is None} == set()
    program = tuple((op, ("i0",) if op not in ("add", "sub", "mul", "div") else ("i0", 1.5),
                     {"clamp": (-1.0, 1.0), "pow": (2,), "leaky_relu": (0.2,), "softplus": (2.0, 3.0)}.get(op, ()))
                    for op in _KG_OPS)
    x = torch.rand(5000) + 0.5
    for k in range(len(program)):
        one = program[k:k + 1]
        torch.testing.assert_close(C.kg_cpp_pointwise(one, x), _kg_ir_eval(one, (x,)), rtol=2e-6, atol=2e-6)
