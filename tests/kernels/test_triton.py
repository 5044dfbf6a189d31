"""Generated Triton kernels (kernels/triton_*.py) for pointwise groups, GEMM epilogues, row ops with a
prologue and row reductions: the rewrites find the right groups, the kernels keep the math (fp64 reference),
parameters are read live, unsupported cases fall back to torch.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (tests/conftest.py sets
TRITON_INTERPRET=1 before triton is first imported); with a GPU the same tests run compiled kernels.
The strategies built on them and their candidates: tests/proposers/test_triton_fusion.py.
"""
import copy
import os
import sys

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from kernelgate.kernels import triton_launch as L, triton_render as R, triton_rewrite as W  # noqa: E402
from kernelgate.proposers.library.triton_fusion import GEMM_CONFIGS, GEMM_CONFIGS_F32  # noqa: E402

# the interpreter evaluates masked-off lanes too (loaded as 0): numpy warns about their 1/0
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


@pytest.fixture
def dev():
    if R._KG_TF_INTERPRETED:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set, and there is no GPU")


@pytest.fixture
def launches(dev, monkeypatch):
    """Kernels launched, as (kind: 'pointwise' | 'gemm', operand kinds) per launch."""
    seen = []
    real = L._kg_tf_kernel

    def kernel(program, kinds, precision=None, row_op=None):
        seen.append((row_op[0] if row_op else "pointwise" if precision is None else "gemm", kinds))
        return real(program, kinds, precision, row_op)
    monkeypatch.setattr(L, "_kg_tf_kernel", kernel)
    return seen


def _calls(gm, fn):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is fn]


def _randomize(m, scale=1.0):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * scale)
    return m


def _check(gm, m, *xs, tol=1e-5):
    """gm's output against m's in fp64, with the same tolerance as m's own fp32 output against fp64."""
    with torch.no_grad():
        got = gm(*xs)
        ref = copy.deepcopy(m).double()(*(x.double() for x in xs))
        own = m(*xs)
    assert got.shape == own.shape and got.dtype == own.dtype and got.stride() == own.stride()
    torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol)
    return got


# ---------------------------------------------------------------- pointwise groups

class Chain(nn.Module):
    """The suite's elementwise chain: SiLU written out, per-column scale and bias, tanh gate, residual."""

    def __init__(self, cols=48):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(cols))

    def forward(self, x):
        y = x * torch.sigmoid(x)
        y = y * self.scale + self.bias
        y = y * torch.tanh(y)
        return y + x


def test_chain_is_one_kernel_and_reads_parameters_live(dev, launches):
    m = Chain().to(dev).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    keys = list(gm.state_dict())
    assert W.kg_rewrite_triton_pointwise(gm, block=256, num_warps=4) == 1
    (node,) = _calls(gm, L.kg_tf_pointwise)
    assert [op for op, _, _ in node.args[0]] == ["sigmoid", "mul", "mul", "add", "tanh", "mul", "add"]
    assert node.args[1] == (256, 4)
    assert [a.op for a in node.args[2:]] == ["placeholder", "get_attr", "get_attr"]
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "get_attr", "get_attr", "call_function", "output"]
    assert list(gm.state_dict()) == keys
    x = torch.randn(3, 5, 48, device=dev) * 3
    _check(gm, m, x)
    assert launches == [("pointwise", (0, 1, 1))]
    new = _randomize(Chain()).state_dict()
    gm.load_state_dict(new)
    m.load_state_dict(new)
    _check(gm, m, x)
    assert len(launches) == 2
    assert W.kg_rewrite_triton_pointwise(gm) == 0


class Ops(nn.Module):
    """Every supported op, through functions, methods, operators and modules, with scalars on both sides."""

    def __init__(self):
        super().__init__()
        self.relu, self.silu, self.gelu = nn.ReLU(), nn.SiLU(), nn.GELU(approximate="tanh")
        self.sig, self.tanh = nn.Sigmoid(), nn.Tanh()
        self.acts = nn.ModuleList([nn.Hardswish(), nn.Hardsigmoid(), nn.LeakyReLU(0.1), nn.Softplus(2.0, 3.0),
                                   nn.Mish(), nn.Hardtanh(-0.5, 0.8), nn.ReLU6()])
        self.w = nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        a = F.relu(x) + x.relu() + self.relu(-x) + torch.relu(x - 0.25)
        b = F.silu(x) * self.silu(x * 2) - 1.5 / (x.abs() + 1)
        c = F.gelu(x) + self.gelu(x) + F.gelu(x, approximate="tanh") * self.w
        d = torch.exp(x * 0.5) + torch.log(torch.abs(x) + 0.1) + torch.sqrt(x * x + 1) + torch.rsqrt(x.abs() + 2)
        e = torch.clamp(x, -0.5, 0.75) + x.clamp(min=0.1) + torch.clip(x, max=0.3) + x.clamp(0.5, 0.2)
        f = x ** 2 + torch.pow(x, 3) + (x.abs() + 1).pow(-1) + (x.abs() + 1) ** 0.5 + torch.square(x) + x.pow(-2)
        g = torch.sigmoid(x) + self.sig(x) + x.sigmoid() + torch.tanh(x * 3) + self.tanh(x) + x.tanh() + x.exp()
        h = torch.add(x, 1) - torch.sub(x, 2) + torch.mul(x, self.w) + torch.div(x, 4) + x.div(self.w) + (-x) + 2 - x
        k = F.hardswish(x) + F.hardsigmoid(x) + F.leaky_relu(x, 0.3) + F.softplus(x) + F.softplus(x, 0.5, 2.0) \
            + F.mish(x) + F.hardtanh(x) + F.relu6(x * 4) + F.leaky_relu(x)
        for act in self.acts:
            k = k + act(x)
        return (a + b + c + d) * 0.25 + (e + f + g + h).neg() / 3 + k


def test_every_op_matches_torch(dev, launches):
    m = Ops().to(dev).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_pointwise(gm) == 1               # one group: only the output leaves it
    assert not [n for n in gm.graph.nodes if n.op == "call_module"]
    x = torch.randn(4, 16, device=dev) * 2
    x[0, :4] = torch.tensor([0.0, 1e-4, -1e-4, 30.0])            # tanh near 0 and saturated
    _check(gm, m, x, tol=2e-5)
    assert len(launches) == 1


def test_groups_stop_at_shared_values_and_other_ops(dev):
    class M(nn.Module):
        def forward(self, x, y):
            a = torch.sigmoid(x) * 2          # group 1 (root a: used twice below)
            s = torch.softmax(a, -1)          # not pointwise
            b = torch.tanh(s) + a             # group 2: tanh, add
            c = torch.exp(y)                  # one op alone: left as it is
            d = F.relu(x, inplace=True)       # in place on an input: left as it is
            return b, c.sum(-1), d
    gm = fx.symbolic_trace(M())
    assert W.kg_rewrite_triton_pointwise(gm) == 2
    fused = _calls(gm, L.kg_tf_pointwise)
    assert [[op for op, _, _ in n.args[0]] for n in fused] == [["sigmoid", "mul"], ["tanh", "add"]]
    softmax = next(n for n in gm.graph.nodes if n.name == "softmax")
    assert fused[1].args[2:] == (softmax, fused[0])                 # reads the first group's new node
    left = [getattr(n.target, "__name__", n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert "exp" in left and "relu" in left and "softmax" in left
    x, y = torch.randn(3, 8, device=dev), torch.randn(3, 8, device=dev)
    with torch.no_grad():
        for got, want in zip(gm(x.clone(), y), M()(x.clone(), y)):
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_in_place_on_an_intermediate_is_fused(dev, launches):
    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(inplace=True)).to(dev)
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = m

        def forward(self, x):
            return F.relu(self.body(x) * 2, inplace=True)       # x*2 has one user: writing into it is invisible
    gm = fx.symbolic_trace(M())
    assert W.kg_rewrite_triton_pointwise(gm) == 1
    _check(gm, M().eval(), torch.randn(5, 8, device=dev))
    assert launches == [("pointwise", (0,))]


def test_broadcast_operand_kinds(dev, launches):
    class M(nn.Module):
        def forward(self, x, col, row1n, scalar_t, k: float):
            return torch.tanh(x * col + row1n) * scalar_t + k
    gm = fx.symbolic_trace(M())
    assert W.kg_rewrite_triton_pointwise(gm) == 1
    x = torch.randn(2, 3, 20, device=dev)
    args = (x, torch.randn(20, device=dev), torch.randn(1, 20, device=dev), torch.tensor(1.5, device=dev), 0.25)
    with torch.no_grad():
        torch.testing.assert_close(gm(*args), M()(*args), atol=1e-6, rtol=1e-5)
    assert launches == [("pointwise", (0, 1, 1, 2, 3))]


def test_half_precision_computes_in_fp32(dev, launches):
    m = Chain(32).to(dev).half().eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_pointwise(gm) == 1
    x = (torch.randn(7, 32, device=dev) * 2).half()
    with torch.no_grad():
        got = gm(x)
        ref = copy.deepcopy(m).double()(x.double())
    assert got.dtype == torch.float16
    # one rounding at the end: at least as close to fp64 as eager fp16, which rounds after every op
    assert (got.double() - ref).abs().max() <= (m(x).double() - ref).abs().max() + 1e-3
    assert launches == [("pointwise", (0, 1, 1))]


def test_pointwise_fallbacks(dev, launches):
    m = Chain(6).to(dev).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    W.kg_rewrite_triton_pointwise(gm)
    x = torch.randn(6, 6, device=dev)
    with torch.no_grad():
        torch.testing.assert_close(gm(x.t()), m(x.t()))                             # not contiguous
        torch.testing.assert_close(gm(x.double()), m(x.double()))                   # fp64: dtype mismatch
        col = torch.randn(4, 1, device=dev)                                         # (4, 1) with (6,): both broadcast
        torch.testing.assert_close(gm(col), m(col))
        assert gm(torch.randn(0, 6, device=dev)).shape == (0, 6)                  # empty
    g = torch.randn(3, 6, device=dev, requires_grad=True)                          # autograd: torch
    gm(g).sum().backward()
    assert g.grad is not None and launches == []

    class Ints(nn.Module):
        def forward(self, x):
            return (x * 2 + 1).abs()
    gi = fx.symbolic_trace(Ints())
    assert W.kg_rewrite_triton_pointwise(gi) == 1
    xi = torch.arange(-5, 5, device=dev)
    assert torch.equal(gi(xi), Ints()(xi)) and gi(xi).dtype == torch.int64 and launches == []


def test_no_kernel_on_cpu_without_interpreter():
    if R._KG_TF_INTERPRETED:
        pytest.skip("kernels are interpreted in this session")
    m = Chain(4)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_pointwise(gm) == 1
    x = torch.randn(3, 4)
    assert not L._kg_tf_device_ok(x)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x))


def test_generated_source_is_specialised_and_cached(dev):
    program = (("sigmoid", ("i0",), ()), ("mul", ("t0", 2), ()), ("add", ("t1", "i1"), ()))
    src = R.kg_tf_source(program, (0, 1))
    assert "tl.load(a1 + offs % n_cols" in src and "(2.0)" in src
    assert ("libdevice" in src) != R._KG_TF_INTERPRETED
    k = L._kg_tf_kernel(program, (0, 1))
    assert L._kg_tf_kernel(program, (0, 1)) is k and L._kg_tf_kernel(program, (0, 2)) is not k


# ---------------------------------------------------------------- GEMM + epilogue

class LinearAct(nn.Module):
    """Linear with its own bias, a separate bias, tanh-GELU, a scale and a residual."""

    def __init__(self, d_in=40, d_out=48, bias=True):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out, bias=bias)
        self.extra = nn.Parameter(0.1 * torch.randn(d_out))
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x, r):
        return self.act(self.proj(x) + self.extra) * 0.5 + r


class Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(24, 40) * 0.2)
        self.b = nn.Parameter(torch.randn(24))
        self.wt = nn.Parameter(torch.randn(40, 24) * 0.2)

    def forward(self, x):
        h = F.linear(x, self.w, self.b)
        a = F.silu(h) * h                                 # the GEMM result used twice inside the epilogue
        return a + torch.relu(torch.matmul(x, self.wt) * 2.0) + (x @ self.wt).sigmoid()


def test_library_gemm_epilogue(dev, launches):
    m = _randomize(LinearAct(), 0.2).to(dev).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_epilogue(gm, block=128, num_warps=4) == 1
    (node,) = _calls(gm, L.kg_tf_gemm)
    assert node.args[1] == ("library", 128, 4) and node.args[2] == "linear"
    assert [a.target for a in node.args[4:7]] == ["proj.weight", "proj.bias", "extra"]
    assert not [n for n in gm.graph.nodes if n.op == "call_module"]
    x, r = torch.randn(2, 9, 40, device=dev), torch.randn(2, 9, 48, device=dev)
    _check(gm, m, x, r)
    assert launches == [("pointwise", (0, 1, 1, 0))]       # acc, proj.bias, extra, residual
    new = _randomize(LinearAct(), 0.2).state_dict()
    gm.load_state_dict(new)
    m.load_state_dict(new)
    _check(gm, m, x, r)


def test_functional_and_matmul_gemms(dev, launches):
    m = Functional().to(dev).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    # every pointwise op is in one group (only the output leaves it): one kernel around the first GEMM,
    # whose bias it adds; the two matmuls stay torch and are read as output-shaped operands
    assert W.kg_rewrite_triton_epilogue(gm) == 1
    (node,) = _calls(gm, L.kg_tf_gemm)
    assert node.args[2] == "linear" and [a.target for a in node.args[4:6]] == ["w", "b"]
    assert sum(1 for n in gm.graph.nodes if getattr(n.target, "__name__", "") == "matmul") == 2
    _check(gm, m, torch.randn(6, 40, device=dev))
    assert launches == [("pointwise", (0, 1, 0, 0))]


def test_library_epilogue_needs_two_ops():
    class One(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4, bias=False)

        def forward(self, x):
            return torch.relu(self.fc(x))                 # mm + relu: nothing to save
    assert W.kg_rewrite_triton_epilogue(fx.symbolic_trace(One())) == 0
    assert W.kg_rewrite_triton_epilogue(fx.symbolic_trace(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))) == 1
    assert W.kg_rewrite_triton_epilogue(fx.symbolic_trace(nn.Sequential(nn.Linear(4, 4)))) == 0


def test_triton_gemm_fp16(dev, launches):
    m = _randomize(LinearAct(40, 48), 0.2).to(dev).half().eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_gemm(gm, block_m=16, block_n=16, block_k=16, num_warps=4, num_stages=2) == 1
    x, r = torch.randn(2, 9, 40, device=dev).half(), torch.randn(2, 9, 48, device=dev).half()
    with torch.no_grad():
        got = gm(x, r)
        ref = copy.deepcopy(m).double()(x.double(), r.double())
        eager = m(x, r)
    assert got.dtype == torch.float16 and got.shape == eager.shape
    assert (got.double() - ref).abs().max() <= (eager.double() - ref).abs().max() * 1.5 + 1e-3
    assert launches == [("gemm", (4, 1, 1, 0))]


def test_triton_gemm_fp32_only_with_a_declared_format(dev, launches):
    m = _randomize(LinearAct(), 0.2).to(dev).eval()
    assert W.kg_rewrite_triton_gemm(fx.symbolic_trace(copy.deepcopy(m))) == 0      # fp32 weight: left alone
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_gemm(gm, 16, 16, 16, 4, 2, fp32_precision="ieee") == 1
    x, r = torch.randn(2, 9, 40, device=dev), torch.randn(2, 9, 48, device=dev)
    _check(gm, m, x, r)
    assert launches == [("gemm", (4, 1, 1, 0))]
    # an fp32 GEMM reached without a declared format (a matmul of activations) takes the library path
    program = (("relu", ("i0",), ()), ("mul", ("t0", 3), ()))
    a, b = torch.randn(5, 8, device=dev), torch.randn(8, 6, device=dev)
    out = L.kg_tf_gemm(program, ("triton", 16, 16, 16, 4, 2, ""), "matmul", a, b, None)
    torch.testing.assert_close(out, torch.relu(a @ b) * 3)
    assert launches[-1] == ("pointwise", (0,))


def test_gemm_fallbacks(dev, launches):
    program = (("gelu", ("i0",), ()), ("add", ("t0", "i1"), ()))
    x, w, b = torch.randn(3, 8, device=dev), torch.randn(5, 8, device=dev), torch.randn(5, device=dev)
    r = torch.randn(3, 5, device=dev)
    want = F.gelu(F.linear(x, w, b)) + r
    for cfg in (("library", 1024, 4), ("triton", 16, 16, 16, 4, 2, "ieee")):
        torch.testing.assert_close(L.kg_tf_gemm(program, cfg, "linear", x, w, b, r.t().contiguous().t()), want)
        torch.testing.assert_close(L.kg_tf_gemm(program, cfg, "linear", x.double(), w.double(), b.double(),
                                                r.double()), want.double(), atol=1e-6, rtol=1e-6)
        mixed = L.kg_tf_gemm(program, cfg, "linear", x, w, b, r.double())           # promotes to fp64, as torch
        assert mixed.dtype == torch.float64
        torch.testing.assert_close(mixed, F.gelu(F.linear(x, w, b)) + r.double())
    assert launches == []
    bm = torch.randn(4, 8, 5, device=dev)                                         # batched matmul: torch
    torch.testing.assert_close(L.kg_tf_gemm(program, ("library", 1024, 4), "matmul", torch.randn(4, 3, 8, device=dev)
                                            .zero_(), bm, None, 0.5), F.gelu(torch.zeros(4, 3, 5, device=dev)) + 0.5)


def test_rewrites_need_triton(monkeypatch):
    rewrites = [getattr(W, n) for n in dir(W) if n.startswith("kg_rewrite_")]
    assert len(rewrites) == 6 and W.kg_rewrite_triton_epilogue(fx.symbolic_trace(LinearAct())) == 1
    monkeypatch.setattr(W, "triton", None)
    monkeypatch.setattr(L, "triton", None)
    for rw in rewrites:
        assert rw(fx.symbolic_trace(LinearAct())) == 0
    x = torch.randn(2, 40)
    program = (("gelu", ("i0",), ()),)
    torch.testing.assert_close(L.kg_tf_pointwise(program, (1024, 4), x), F.gelu(x))


# ---------------------------------------------------------------- real GPU: wide shapes, bf16, Hopper configs

@pytest.mark.gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_gpu_chain_wide(dtype, tol):
    if R._KG_TF_INTERPRETED:
        pytest.skip("TRITON_INTERPRET=1 in this session")
    m = Chain(4096).cuda().to(dtype).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_pointwise(gm, block=2048, num_warps=8) == 1
    x = (torch.randn(1000, 4096, device="cuda") * 3).to(dtype)
    with torch.no_grad():
        ref = copy.deepcopy(m).double()(x.double())
        err, eager_err = (gm(x).double() - ref).abs().max(), (m(x).double() - ref).abs().max()
    assert err <= max(eager_err, tol * ref.abs().max())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("config", GEMM_CONFIGS)
def test_gpu_gemm_configs(dtype, config):
    if R._KG_TF_INTERPRETED:
        pytest.skip("TRITON_INTERPRET=1 in this session")
    m = _randomize(LinearAct(512, 768), 0.05).cuda().to(dtype).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_gemm(gm, *config) == 1
    x, r = torch.randn(3, 333, 512, device="cuda").to(dtype), torch.randn(3, 333, 768, device="cuda").to(dtype)
    with torch.no_grad():
        ref = copy.deepcopy(m).double()(x.double(), r.double())
        err, eager_err = (gm(x, r).double() - ref).abs().max(), (m(x, r).double() - ref).abs().max()
    assert err <= eager_err * 2


@pytest.mark.gpu
@pytest.mark.parametrize("precision, bound", [("ieee", 3.0), ("tf32", 2e3)])
def test_gpu_gemm_fp32_formats(precision, bound):
    if R._KG_TF_INTERPRETED:
        pytest.skip("TRITON_INTERPRET=1 in this session")
    m = _randomize(LinearAct(1024, 1024), 0.05).cuda().eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_gemm(gm, 128, 128, 32, 4, 4, fp32_precision=precision) == 1
    x, r = torch.randn(512, 1024, device="cuda"), torch.randn(512, 1024, device="cuda")
    with torch.no_grad():
        ref = copy.deepcopy(m).double()(x.double(), r.double())
        err, eager_err = (gm(x, r).double() - ref).abs().max(), (m(x, r).double() - ref).abs().max()
    assert err <= eager_err * bound                                 # ieee: fp32-accurate; tf32: ~1e3x worse


@pytest.mark.gpu
@pytest.mark.parametrize("config", GEMM_CONFIGS_F32)
def test_gpu_gemm_3xtf32(config):
    """3xTF32 products keep fp32-level error (within 2x of cuBLAS's fp32 GEMM against fp64), unlike tf32."""
    if R._KG_TF_INTERPRETED:
        pytest.skip("TRITON_INTERPRET=1 in this session")
    m = _randomize(LinearAct(2048, 1024), 0.05).cuda().eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_gemm_3xtf32(gm, *config) == 1
    x, r = torch.randn(1000, 2048, device="cuda"), torch.randn(1000, 1024, device="cuda")
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with torch.no_grad():
            ref = copy.deepcopy(m).double()(x.double(), r.double())
            err, eager_err = (gm(x, r).double() - ref).abs().max(), (m(x, r).double() - ref).abs().max()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    assert err <= eager_err * 2, (float(err), float(eager_err))


# ---------------------------------------------------------------- row ops with a fused prologue

class ScaledSoftmax(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how

    def forward(self, x):
        if self.how == "function":
            return torch.softmax(x * 0.125, dim=-1)
        if self.how == "method":
            return (x * 0.125 - 1.0).softmax(-1)
        return F.softmax(x * 0.125, dim=1)                 # not the last dim of a 2-D input: left alone


class ResidualNorm(nn.Module):
    def __init__(self, d, affine=True):
        super().__init__()
        self.gamma = nn.Parameter(torch.rand(d) + 0.5)
        self.norm = nn.LayerNorm(d, elementwise_affine=affine)

    def forward(self, x, r):
        return self.norm(x + self.gamma * r)


@pytest.mark.parametrize("how, n", [pytest.param("function", 1, marks=pytest.mark.slow),   # interpreted on a CPU
                                     pytest.param("method", 1, marks=pytest.mark.slow), ("dim1", 0)])
def test_row_softmax_with_its_prologue(dev, launches, how, n):
    m = ScaledSoftmax(how)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_row(gm) == n
    x = torch.randn(6, 300, 1000, device=dev) if how != "dim1" else torch.randn(6, 300, device=dev)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-6, rtol=1e-5)
    assert [k for k, _ in launches] == (["softmax"] if n else [])


@pytest.mark.parametrize("affine", [True, False])
def test_row_layernorm_with_a_residual_prologue_reads_parameters_live(dev, launches, affine):
    m = _randomize(ResidualNorm(384, affine)).to(dev)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_row(gm) == 1 and "layer_norm" not in gm.code
    x, r = torch.randn(64, 384, device=dev), torch.randn(64, 384, device=dev)
    with torch.no_grad():
        torch.testing.assert_close(gm(x, r), m(x, r), atol=2e-5, rtol=1e-5)
        new = _randomize(copy.deepcopy(m), 2.0)
        gm.load_state_dict(new.state_dict())
        torch.testing.assert_close(gm(x, r), new(x, r), atol=2e-5, rtol=1e-5)
    assert [k for k, _ in launches] == ["layernorm", "layernorm"]


def test_row_kernel_falls_back_where_it_does_not_apply(dev, launches):
    m = ScaledSoftmax("function")
    gm = fx.symbolic_trace(copy.deepcopy(m))
    W.kg_rewrite_triton_row(gm)
    wide = torch.randn(2, L._KG_TF_MAX_ROW * 2, device=dev)           # row longer than one program holds
    strided = torch.randn(40, 64, device=dev).t()                      # not contiguous
    with torch.no_grad():
        for x in (wide, strided, torch.randn(4, 8, dtype=torch.float64)):
            torch.testing.assert_close(gm(x), m(x))
    assert launches == []


def test_row_rewrite_leaves_a_plain_softmax_and_shared_prologues():
    class Shared(nn.Module):
        def forward(self, x):
            y = x * 2.0
            return torch.softmax(y, dim=-1) + y              # the prologue's value is used again
    class Plain(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)
    for m in (Shared(), Plain()):
        assert W.kg_rewrite_triton_row(fx.symbolic_trace(m)) == 0


class RMSNorm(nn.Module):
    def __init__(self, d, how="pow"):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.how = how

    def forward(self, x):
        if self.how == "pow":
            ms = x.pow(2).mean(dim=-1, keepdim=True)
            return x * torch.rsqrt(ms + 1e-6) * self.weight
        if self.how == "sum":
            return x / torch.sqrt(torch.sum(x * x, dim=[-1], keepdim=True) + 1e-5)
        return x - x.mean(-1)                              # keepdim missing: not a row reduction


@pytest.mark.parametrize("how, n", [("pow", 1), ("sum", 1), ("nokeep", 0)])
def test_rowreduce_fuses_a_written_out_rmsnorm(dev, launches, how, n):
    m = _randomize(RMSNorm(700, how)).to(dev)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert W.kg_rewrite_triton_rowreduce(gm) == n
    x = torch.randn(33, 700, device=dev) if how != "nokeep" else torch.randn(700, 700, device=dev)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=2e-5, rtol=1e-5)
        if how == "pow":                                   # the weight is read live
            new = _randomize(copy.deepcopy(m), 2.0)
            gm.load_state_dict(new.state_dict())
            torch.testing.assert_close(gm(x), new(x), atol=2e-5, rtol=1e-5)
    assert [k for k, _ in launches] == ["reduce"] * (2 if how == "pow" else n)


def test_rowreduce_falls_back_to_torch_where_it_does_not_apply(dev, launches):
    m = RMSNorm(64)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    W.kg_rewrite_triton_rowreduce(gm)
    with torch.no_grad():
        for x in (torch.randn(8, 64, device=dev).t().contiguous().t(), torch.randn(4, 64, dtype=torch.float64)):
            torch.testing.assert_close(gm(x), m.to(x.device)(x))
    assert launches == []
