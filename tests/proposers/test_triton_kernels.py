"""The Triton row kernels match torch, the rewrites replace the right nodes and keep the math, and
unsupported cases fall back to torch.

Without a GPU the kernels run in Triton's interpreter on CPU tensors. Triton reads TRITON_INTERPRET
when a function is decorated with @triton.jit, and its own tl.max / tl.sum are @triton.jit functions
decorated when triton is first imported: so the variable is set here, before the first import of
triton, and only on machines without CUDA (it stays set for the session there). With a GPU the same
tests run compiled kernels on CUDA tensors.
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

from kernelgate.proposers.library import triton_kernels as T  # noqa: E402


@pytest.fixture
def dev():
    """Where the kernels run in this session: cpu (interpreter) or cuda."""
    if T._KG_TR_INTERPRETED:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set, and there is no GPU")


class _Spy:
    """Counts launches of a kernel (kernel[grid](...))."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.fixture
def spy(dev, monkeypatch):
    def _spy(name):
        s = _Spy(getattr(T, name))
        monkeypatch.setattr(T, name, s)
        return s
    return _spy


def _softmax64(x, dim=-1):
    return torch.softmax(x.double(), dim).to(x.dtype)


# ---------------------------------------------------------------- kernels (interpreter on CPU, or CUDA)

@pytest.mark.parametrize("shape", [(3, 1), (2, 7), (4, 128), (2, 1000), (2, 3, 7), (5,)])
def test_softmax_kernel_matches_torch(dev, spy, shape):
    s = spy("_kg_softmax_kernel")
    torch.manual_seed(0)
    x = torch.randn(*shape) * 30            # values beyond +-50: max subtraction must keep exp finite
    x.view(-1)[0] = 80.0
    x.view(-1)[-1] = -90.0
    x = x.to(dev)
    y = T.kg_triton_softmax(x, -1, 4)
    assert s.launches == 1
    assert y.shape == x.shape and y.dtype == x.dtype and y.is_contiguous() and y.device == x.device
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, _softmax64(x), atol=1e-6, rtol=1e-5)


def test_softmax_kernel_non_contiguous_and_half(dev, spy):
    s = spy("_kg_softmax_kernel")
    x = torch.randn(7, 6, device=dev).t()    # last-dim stride 7: copied to contiguous rows
    torch.testing.assert_close(T.kg_triton_softmax(x, 1, 8), _softmax64(x), atol=1e-6, rtol=1e-5)
    h = torch.randn(3, 33, device=dev).half()
    y = T.kg_triton_softmax(h, -1, 4)
    assert y.dtype == torch.float16
    torch.testing.assert_close(y, _softmax64(h), atol=1e-3, rtol=1e-3)
    assert s.launches == 2


@pytest.mark.parametrize("n", [1, 7, 128, 1000])
@pytest.mark.parametrize("affine", [True, False])
def test_layernorm_kernel_matches_torch(dev, spy, n, affine):
    s = spy("_kg_layernorm_kernel")
    torch.manual_seed(1)
    x = torch.randn(2, 3, n, device=dev) * 4 + 3
    w = torch.randn(n, device=dev) if affine else None
    b = torch.randn(n, device=dev) if affine else None
    y = T.kg_triton_layernorm(x, (n,), w, b, 1e-5, 4)
    assert s.launches == 1
    ref = F.layer_norm(x.double(), (n,), None if w is None else w.double(), None if b is None else b.double(), 1e-5)
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y, ref.float(), atol=1e-5, rtol=1e-5)


def test_layernorm_weight_only(dev, spy):
    s = spy("_kg_layernorm_kernel")
    x, w = torch.randn(4, 10, device=dev), torch.randn(10, device=dev)
    torch.testing.assert_close(T.kg_triton_layernorm(x, [10], w, None, 1e-3, 8), F.layer_norm(x, [10], w, None, 1e-3),
                               atol=1e-5, rtol=1e-5)
    assert s.launches == 1


# ---------------------------------------------------------------- fallbacks

def test_fallbacks(dev, spy):
    s, ln = spy("_kg_softmax_kernel"), spy("_kg_layernorm_kernel")
    x = torch.randn(4, 5, device=dev)
    torch.testing.assert_close(T.kg_triton_softmax(x, 0, 4), torch.softmax(x, 0))     # not the last dim
    torch.testing.assert_close(T.kg_triton_softmax(x.double(), -1, 4), torch.softmax(x.double(), -1))
    big = torch.randn(2, 70000, device=dev)                                      # row too long
    torch.testing.assert_close(T.kg_triton_softmax(big, -1, 4), torch.softmax(big, -1))
    assert T.kg_triton_softmax(torch.randn(0, 5, device=dev), -1, 4).shape == (0, 5)
    g = torch.randn(3, 5, device=dev, requires_grad=True)                        # autograd: torch
    T.kg_triton_softmax(g, -1, 4).sum().backward()
    assert g.grad is not None
    x3 = torch.randn(2, 3, 4, device=dev)
    torch.testing.assert_close(T.kg_triton_layernorm(x3, (3, 4), None, None, 1e-5, 4), F.layer_norm(x3, (3, 4)))
    w = nn.Parameter(torch.randn(4, device=dev))                                 # needs grad: torch
    torch.testing.assert_close(T.kg_triton_layernorm(x3, (4,), w, None, 1e-5, 4), F.layer_norm(x3, (4,), w))
    with torch.no_grad():                                                        # weight of another dtype
        wd = w.double()
        torch.testing.assert_close(T.kg_triton_layernorm(x3.double(), (4,), wd, None, 1e-5, 4),
                                   F.layer_norm(x3.double(), (4,), wd))
    assert s.launches == 0 and ln.launches == 0


def test_no_kernel_on_cpu_without_interpreter():
    if T._KG_TR_INTERPRETED:
        pytest.skip("kernels built by the interpreter in this session")
    assert not T._kg_tr_usable(torch.randn(2, 3), -1)
    torch.testing.assert_close(T.kg_triton_softmax(torch.zeros(2, 3), -1, 4), torch.full((2, 3), 1 / 3))


# ---------------------------------------------------------------- rewrites

class Softmaxes(nn.Module):
    def __init__(self):
        super().__init__()
        self.sm = nn.Softmax(dim=-1)
        self.sm0 = nn.Softmax(dim=0)

    def forward(self, x):
        a = torch.softmax(x, -1) + F.softmax(x, dim=-1) + x.softmax(-1) + self.sm(x)
        b = torch.softmax(x, 0) + self.sm0(x) + F.softmax(x, -1, dtype=torch.float64).float()
        return a * 2 + b


class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.plain = nn.LayerNorm(16, elementwise_affine=False)
        self.ln2d = nn.LayerNorm((4, 16))
        self.w = nn.Parameter(torch.randn(16))

    def forward(self, x):
        y = self.ln(x) + self.plain(x) + F.layer_norm(x, (16,), self.w, None, 1e-3)
        return y + self.ln2d(x)


def _randomize(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p))
    return m


def _targets(gm, fn):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is fn]


def test_rewrite_softmax(dev, spy):
    s = spy("_kg_softmax_kernel")
    m = Softmaxes().eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert T.kg_rewrite_triton_softmax(gm, num_warps=8) == 4
    assert len(_targets(gm, T.kg_triton_softmax)) == 4
    assert all(n.args[1:] == (-1, 8) for n in _targets(gm, T.kg_triton_softmax))
    left = [n for n in gm.graph.nodes if n.op == "call_module" or getattr(n.target, "__name__", n.target) == "softmax"]
    assert len(left) == 3                                                        # dim 0 twice, dtype once
    x = torch.randn(6, 9, device=dev) * 20
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)
    assert s.launches == 4
    assert T.kg_rewrite_triton_softmax(gm) == 0


def test_rewrite_softmax_positive_last_dim_with_shape_metadata(dev):
    class M(nn.Module):
        def forward(self, x):
            return torch.softmax(x, 1) + torch.softmax(x, 0)
    gm = fx.symbolic_trace(M())
    assert T.kg_rewrite_triton_softmax(copy.deepcopy(gm)) == 0                   # rank unknown: left alone
    from torch.fx.passes.shape_prop import ShapeProp
    x = torch.randn(3, 5, device=dev)
    ShapeProp(gm).propagate(x)
    assert T.kg_rewrite_triton_softmax(gm) == 1
    torch.testing.assert_close(gm(x), M()(x), atol=1e-6, rtol=1e-5)


def test_rewrite_layernorm_and_load_state_dict(dev, spy):
    s = spy("_kg_layernorm_kernel")
    m = _randomize(Norms()).to(dev).eval()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    keys = list(gm.state_dict())
    assert T.kg_rewrite_triton_layernorm(gm) == 3                                 # not the 2-D LayerNorm
    assert len(_targets(gm, T.kg_triton_layernorm)) == 3
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["ln2d"]
    assert all(n.op == "get_attr" for n in _targets(gm, T.kg_triton_layernorm)[0].args[2:4])
    assert list(gm.state_dict()) == keys
    x = torch.randn(3, 4, 16, device=dev)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)
        assert s.launches == 3
        new = _randomize(Norms()).state_dict()
        gm.load_state_dict(new)
        m.load_state_dict(new)
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)
        assert s.launches == 6


def test_rewritten_layernorm_uses_torch_when_grad_is_needed(dev, spy):
    s = spy("_kg_layernorm_kernel")
    m = _randomize(nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))).to(dev)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert T.kg_rewrite_triton_layernorm(gm, num_warps=4) == 1
    x = torch.randn(5, 8, device=dev)
    torch.testing.assert_close(gm(x), m(x))                                       # grad enabled: torch
    assert s.launches == 0
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)
    assert s.launches == 1


# ---------------------------------------------------------------- attention in one kernel

def _attention64(q, k, v, scale, divide=False):
    s = q.double() @ k.double().transpose(-2, -1)
    s = s / scale if divide else s * scale
    return (torch.softmax(s, -1) @ v.double()).to(q.dtype)


@pytest.mark.parametrize("shape_q, shape_kv, divide", [
    ((2, 3, 37, 16), (2, 3, 70, 16), False),     # ragged: neither length a multiple of a block
    ((2, 64, 32), (2, 64, 32), True),            # 3-D, a divisor scale
    ((1, 1, 5, 64), (1, 1, 129, 64), False),
])
def test_attention_kernel_matches_float64(dev, spy, shape_q, shape_kv, divide):
    s = spy("_kg_attn_kernel")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(shape_q, generator=g).to(dev)
    k, v = (torch.randn(shape_kv, generator=g).to(dev) for _ in range(2))
    scale = 8.0 if divide else 0.125
    out = T.kg_triton_attention(q, k, v, scale, divide, block_m=16, block_n=32)
    assert s.launches == 1 and out.shape == q.shape and out.is_contiguous()
    torch.testing.assert_close(out, _attention64(q, k, v, scale, divide), atol=2e-5, rtol=2e-5)


def test_attention_kernel_reads_strided_heads(dev, spy):
    """Heads split by view + transpose (non-contiguous [B, H, S, D]) are read through their strides."""
    s = spy("_kg_attn_kernel")
    x = torch.randn(2, 40, 3 * 4 * 32).to(dev)
    q, k, v = (t.view(2, 40, 4, 32).transpose(1, 2) for t in x.split(128, dim=-1))
    assert not q.is_contiguous()
    out = T.kg_triton_attention(q, k, v, 32 ** -0.5, False, block_m=16, block_n=16)
    assert s.launches == 1
    torch.testing.assert_close(out, _attention64(q, k, v, 32 ** -0.5), atol=2e-5, rtol=2e-5)


def test_attention_falls_back_where_it_does_not_apply(dev, spy):
    s = spy("_kg_attn_kernel")
    q = torch.randn(2, 3, 8, 48).to(dev)                            # head dim 48: not a supported tile
    out = T.kg_triton_attention(q, q, q, 0.1)
    b = torch.randn(1, 3, 8, 16).to(dev)                             # broadcast batch dims
    k = torch.randn(2, 3, 8, 16).to(dev)
    out2 = T.kg_triton_attention(b, k, k, 0.1)
    assert s.launches == 0
    torch.testing.assert_close(out, _attention64(q, q, q, 0.1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out2, _attention64(b.expand(2, 3, 8, 16), k, k, 0.1), atol=1e-5, rtol=1e-5)


class _Attn(nn.Module):
    def forward(self, q, k, v):
        return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.25, dim=-1), v)


def test_rewrite_attention(dev, spy):
    s = spy("_kg_attn_kernel")
    gm = fx.symbolic_trace(_Attn())
    assert T.kg_rewrite_triton_attention(gm, 16, 16, 4, 2) == 1
    assert not any(n.target is torch.softmax for n in gm.graph.nodes)
    q, k, v = (torch.randn(2, 2, 24, 16).to(dev) for _ in range(3))
    with torch.no_grad():
        torch.testing.assert_close(gm(q, k, v), _attention64(q, k, v, 0.25), atol=2e-5, rtol=2e-5)
    assert s.launches == 1


def test_registry():
    assert set(T.TRITON_REWRITES) == set(T.VARIANTS) == {"triton-softmax", "triton-layernorm", "triton-attention"}
    assert [v["num_warps"] for v in T.VARIANTS["triton-softmax"]] == [4, 8, 16]
    assert [v["num_warps"] for v in T.VARIANTS["triton-layernorm"]] == [4, 8]


# ---------------------------------------------------------------- real GPU, wider shapes and dtypes

@pytest.mark.gpu
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float16, 2e-3), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("n", [1, 7, 128, 1000, 4096, 65536])
def test_gpu_kernels_match_torch(dtype, tol, n, monkeypatch):
    if T._KG_TR_INTERPRETED:
        pytest.skip("TRITON_INTERPRET=1 in this session")
    spies = [_Spy(getattr(T, name)) for name in ("_kg_softmax_kernel", "_kg_layernorm_kernel")]
    monkeypatch.setattr(T, "_kg_softmax_kernel", spies[0])
    monkeypatch.setattr(T, "_kg_layernorm_kernel", spies[1])
    x = (torch.randn(3, 5, n, device="cuda") * 30).to(dtype)
    for w in (4, 8, 16):
        torch.testing.assert_close(T.kg_triton_softmax(x, -1, w), torch.softmax(x, -1), atol=tol, rtol=tol)
    weight = torch.randn(n, device="cuda", dtype=dtype)
    bias = torch.randn(n, device="cuda", dtype=dtype)
    lt = max(tol, 1e-5) * 10
    for wb in ((weight, bias), (None, None)):
        torch.testing.assert_close(T.kg_triton_layernorm(x, (n,), *wb, 1e-5, 8),
                                   F.layer_norm(x, (n,), *wb, 1e-5), atol=lt, rtol=lt)
    assert spies[0].launches == 3 and spies[1].launches == 2


ATTN_SRC = '''
import math
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return torch.matmul(torch.softmax(s, dim=-1), v)
def get_inputs():
    return [torch.randn(2, 2, 40, 16) for _ in range(3)]
def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_rendered_attention_candidate_passes_the_gate(dev, tmp_path):
    """The strategy as a search renders it (file embedding fx_rewrites and this module) goes through the CPU
    gate with interpreted kernels; a kernel that forgets the running-max rescale is rejected."""
    if dev != "cpu":
        pytest.skip("the CPU gate with interpreted kernels")
    from kernelgate import api
    from kernelgate.graph import analyse
    from kernelgate.proposers import Context
    from kernelgate.proposers.library import library
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference
    ref_path = tmp_path / "attn.py"
    ref_path.write_text(ATTN_SRC)
    ref = load_reference(Spec.parse(str(ref_path), "Model"))
    ctx = Context(ATTN_SRC, "Model", "cuda", "test", Contract(), analyse(ref.build(), None, library.REWRITE_FNS), (), {})
    strategy = next(x for x in library.STRATEGIES if x.name == "triton:attention")
    assert strategy.applies(ctx)
    body = library.render(ctx, [(strategy, {"block_m": 16, "block_n": 16, "num_warps": 4, "num_stages": 2})])
    assert "from .fx_rewrites import" in body and "def kg_sdpa(" in body       # guarded import, helpers above it
    cand = tmp_path / "cand.py"
    cand.write_text(ATTN_SRC + "\n\n" + body)
    verdict = api.verify(str(ref_path), str(cand), target="cpu", store=str(tmp_path / "s.sqlite"))
    assert verdict.status.value == "accepted", verdict.message
    wrong = body.replace("acc * alpha[:, None]", "acc")
    assert wrong != body
    cand.write_text(ATTN_SRC + "\n\n" + wrong)
    verdict = api.verify(str(ref_path), str(cand), target="cpu", store=str(tmp_path / "s.sqlite"))
    assert verdict.status.value != "accepted"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", T.VARIANTS["triton-attention"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_attention_within_the_reference_error(variant, dtype):
    """At a suite-like size, the one-kernel attention's error against fp64 stays within twice the written-out
    reference's own (fp32 via 3xTF32; bf16 with fp32 softmax and accumulation)."""
    if T._KG_TR_INTERPRETED or not torch.cuda.is_available():
        pytest.skip("needs compiled kernels on a GPU")
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(2, 8, 1000, 64, device="cuda", generator=g).to(dtype) for _ in range(3))
        exact = torch.softmax(q.double() @ k.double().transpose(-2, -1) * 0.125, -1) @ v.double()
        ref = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.125, -1), v)
        out = T.kg_triton_attention(q, k, v, 0.125, False, **variant)
        err, ref_err = (out.double() - exact).abs().max(), (ref.double() - exact).abs().max()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    assert err <= 2 * ref_err, (float(err), float(ref_err))
