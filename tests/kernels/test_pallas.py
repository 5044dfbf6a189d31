"""JAX Pallas kernels (kernels/pallas_*.py): pointwise programs, row softmax, LayerNorm / RMSNorm, GEMM + epilogue,
as fx rewrites, run in JAX's Pallas interpreter on CPU tensors and checked against torch; the launchers' fallbacks,
the DLPack hand-over without copies, the runtime files' rules. The strategies: tests/proposers/test_pallas_kernels.py.

Shapes are small and not multiples of the blocks (masked tails); each distinct (template, shape) is one JAX
compile (about a second on a loaded 2-core machine), so the tests share shapes where they can.
"""
import ast
import inspect
import os
import subprocess
import sys

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

pytest.importorskip("jax")

from kernelgate.kernels import manifest  # noqa: E402
from kernelgate.kernels import pallas_launch as L  # noqa: E402
from kernelgate.kernels import pallas_rewrite as R  # noqa: E402
from kernelgate.kernels.ir import _KG_OPS, _KG_POW, _kg_ir_eval  # noqa: E402

PALLAS_FILES = manifest.MANIFEST["pallas"]


def _close(a, b, tol=2e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol, equal_nan=True)


@pytest.fixture
def ran(monkeypatch):
    """The templates a launcher ran as Pallas kernels (a fallback to torch adds nothing)."""
    calls = []
    real = L._kg_pl_run

    def spy(key, *a):
        calls.append(key[0])
        return real(key, *a)
    monkeypatch.setattr(L, "_kg_pl_run", spy)
    return calls


# ---------------------------------------------------------------- templates against torch

def test_every_ir_op_matches_torch_in_one_pointwise_kernel(ran):
    """One program holding every op of the IR (each pow exponent, clamp with one and both bounds), on a
    vector operand along the last dim and a one-element tensor, rows x 37 columns (no multiple of a block)."""
    x = torch.randn(5, 37) * 2
    v = torch.rand(37) + 0.5
    s = torch.tensor([1.5])
    prog, k = [], 0

    def add(op, refs, params=()):
        nonlocal k
        prog.append((op, refs, params))
        k += 1
        return f"t{k - 1}"
    h = add("mul", ("i0", "i1"))
    h = add("add", (h, "i2"))
    for op in _KG_OPS:
        if op in ("add", "sub", "mul", "div"):
            h = add(op, (h, 0.75))
        elif op == "clamp":
            h = add("clamp", (h,), (-3.0, None))
            h = add("clamp", (h,), (-2.0, 4.0))
        elif op == "pow":
            for e in _KG_POW:
                y = add("pow", (add("abs", (h,)),), (e,))
                h = add("add", (add("mul", (y, 1e-3)), h))
        elif op in ("log", "sqrt", "rsqrt"):
            y = add(op, (add("add", (add("abs", (h,)), 1.0)),))
            h = add("add", (h, y))
        elif op == "exp":
            h = add("exp", (add("clamp", (h,), (None, 4.0)),))
        elif op in ("leaky_relu", "softplus"):
            h = add(op, (h,), (0.2,) if op == "leaky_relu" else (2.0, 3.0))
        else:
            h = add(op, (h,))
    prog = tuple(prog)
    with torch.no_grad():
        _close(L.kg_pl_pointwise(prog, (64,), x, v, s), _kg_ir_eval(prog, (x, v, s)))
    assert ran == ["pointwise"]


class Chain(nn.Module):
    def __init__(self, d=37):
        super().__init__()
        self.scale = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.ln = nn.LayerNorm(d)
        self.rms = nn.RMSNorm(d, eps=1e-6)
        self.lin = nn.Linear(29, d)

    def forward(self, x, y):
        h = F.gelu(self.lin(y))                                   # GEMM + bias + gelu: one kernel
        a = torch.sigmoid(x) * self.scale - torch.tanh(h) / 3.0   # pointwise with a parameter vector
        return (torch.softmax(a, dim=-1), self.ln(a), self.rms(h), F.layer_norm(x, (37,)),
                torch.matmul(y, self.lin.weight[:, :29].t().contiguous()).relu() * 2.0)


@pytest.mark.slow
def test_rewritten_graph_matches_torch_with_every_template(ran):
    torch.manual_seed(0)
    m = Chain().eval()
    x, y = torch.randn(3, 11, 37), torch.randn(3, 11, 29)
    gm = torch.fx.symbolic_trace(m)
    counts = (R.kg_rewrite_pallas_gemm(gm, 16, 16, 8), R.kg_rewrite_pallas_layernorm(gm),
              R.kg_rewrite_pallas_softmax(gm), R.kg_rewrite_pallas_pointwise(gm, 128))
    assert counts == (2, 3, 1, 1), counts
    with torch.no_grad():
        want, got = m(x, y), gm(x, y)
    for a, b in zip(got, want):
        _close(a, b)
    assert sorted(ran) == ["gemm", "gemm", "pointwise", "row", "row", "row", "row"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_inputs_compute_in_fp32_and_store_their_dtype(dtype, ran):
    x = torch.randn(9, 37).to(dtype)
    w, b = torch.randn(37).to(dtype), torch.randn(37).to(dtype)
    with torch.no_grad():
        y = L.kg_pl_layernorm(x, (37,), w, b, 1e-5)
    assert y.dtype == dtype and ran == ["row"]
    _close(y.float(), F.layer_norm(x.float(), (37,), w.float(), b.float(), 1e-5), tol=2e-2)


@pytest.mark.slow
def test_gemm_blocks_with_tails_on_every_side_and_a_matmul_weight(ran):
    """M, N, K none a multiple of its block (masked K tail: the padding must not reach the accumulator)."""
    x, w, bias, res = torch.randn(21, 13), torch.randn(19, 13), torch.randn(19), torch.randn(21, 19)
    prog = (("add", ("i0", "i1"), ()), ("silu", ("t0",), ()))
    with torch.no_grad():
        _close(L.kg_pl_gemm(prog, (8, 8, 4), "linear", x, w, bias, res), F.silu(F.linear(x, w, bias) + res))
        _close(L.kg_pl_gemm(prog, (8, 8, 4), "matmul", x, w.t().contiguous(), None, 2.5),
               F.silu(x @ w.t() + 2.5))
    assert ran == ["gemm", "gemm"]


# ---------------------------------------------------------------- fallbacks

def test_launchers_fall_back_to_torch_where_a_kernel_does_not_apply(ran):
    prog = (("mul", ("i0", "i1"), ()), ("relu", ("t0",), ()))
    x, col, w3 = torch.randn(6, 8), torch.randn(6, 1), torch.randn(2, 8, 3)
    w16 = torch.randn(5, 8).half()
    with torch.no_grad():
        _close(L.kg_pl_pointwise(prog, (64,), x.double(), x.double()), torch.relu(x.double() * x.double()))  # dtype
        _close(L.kg_pl_pointwise(prog, (64,), x.t(), x.t()), torch.relu(x.t() * x.t()))          # strides
        _close(L.kg_pl_pointwise(prog, (64,), x, col), torch.relu(x * col))                      # a column broadcast
        _close(L.kg_pl_pointwise(prog, (64,), x, x.half()), torch.relu(x * x.half()))            # mixed dtypes
        _close(L.kg_pl_softmax(x, 0), torch.softmax(x, 0))                                       # not the last dim
        _close(L.kg_pl_layernorm(x, (6, 8)), F.layer_norm(x, (6, 8)))                            # two dims
        _close(L.kg_pl_rmsnorm(x.double(), (8,)), F.rms_norm(x.double(), (8,)))                  # fp64
        _close(L.kg_pl_gemm(prog, (8, 8, 8), "matmul", x, w3, None, 1.0), torch.relu(torch.matmul(x, w3) * 1.0))
        with pytest.raises(RuntimeError):                                                        # torch's own error
            L.kg_pl_gemm(prog, (8, 8, 8), "linear", x, w16, None, 1.0)
    xg = torch.randn(6, 8, requires_grad=True)
    y = L.kg_pl_softmax(xg, -1)                                                                  # autograd: torch
    y[:, 0].sum().backward()
    assert y.grad_fn is not None and xg.grad is not None
    assert ran == []


def test_rewrites_count_nothing_without_jax(monkeypatch):
    monkeypatch.setattr(R, "kg_pallas_available", lambda: False)
    gm = torch.fx.symbolic_trace(Chain().eval())
    assert (R.kg_rewrite_pallas_gemm(gm), R.kg_rewrite_pallas_layernorm(gm), R.kg_rewrite_pallas_softmax(gm),
            R.kg_rewrite_pallas_pointwise(gm)) == (0, 0, 0, 0)
    assert "needs JAX" in L.KG_PALLAS_NO_JAX and "kernelgate[pallas]" in L.KG_PALLAS_NO_JAX


# ---------------------------------------------------------------- DLPack, the cache

def test_tensors_cross_to_jax_and_back_without_copies():
    x = torch.randn(16, 8)
    a = L.kg_pl_to_jax(x)
    assert a.unsafe_buffer_pointer() == x.data_ptr()
    back = L.kg_pl_to_torch(a)
    assert back.data_ptr() == x.data_ptr() and torch.equal(back, x)
    p = nn.Parameter(torch.randn(4))                                     # requires grad: exported detached
    assert L.kg_pl_to_jax(p).unsafe_buffer_pointer() == p.data_ptr()


def test_a_view_at_an_address_xla_refuses_crosses_as_a_copy():
    """The gate's layout trial hands a contiguous view 4 bytes into its storage; XLA on the GPU refused it
    ("Address of buffer 1 must be a multiple of 10") and the port crashed. Such a view crosses as an aligned copy;
    an aligned one still without a copy."""
    import numpy as np
    base = torch.randn(8 * 64 + 16)
    odd = base[1:513].view(8, 64)
    a = L.kg_pl_to_jax(odd)
    assert a.unsafe_buffer_pointer() % L._KG_PL_ALIGN == 0 and a.unsafe_buffer_pointer() != odd.data_ptr()
    assert np.array_equal(np.asarray(a), odd.numpy())
    even = base[16:].view(8, 64)                                         # 64 bytes in: taken as it is
    assert L.kg_pl_to_jax(even).unsafe_buffer_pointer() == even.data_ptr()


def test_the_kernel_output_is_the_jax_buffer_and_calls_are_cached(monkeypatch):
    seen = []
    real = L.kg_pl_to_torch

    def spy(a):
        seen.append(a.unsafe_buffer_pointer())
        return real(a)
    monkeypatch.setattr(L, "kg_pl_to_torch", spy)
    x = torch.randn(9, 37)
    with torch.no_grad():
        y = L.kg_pl_softmax(x)
        n = len(L._KG_PL_CALLS)
        y2 = L.kg_pl_softmax(torch.randn(9, 37))
    assert seen == [y.data_ptr(), y2.data_ptr()]                         # no copy on the way out
    assert len(L._KG_PL_CALLS) == n                                      # same (template, shape, dtype): one call
    _close(y, torch.softmax(x, -1))


def test_interpret_mode_grows_blocks_to_a_short_grid():
    assert L._kg_pl_fit((8, 8), (21, 1000), interpret=False) == (8, 8)
    bm, bn = L._kg_pl_fit((8, 8), (21, 1000), interpret=True)
    assert bm == 8 and bn == 128 and -(-1000 // bn) <= L._KG_PL_INTERPRET_STEPS


# ---------------------------------------------------------------- the runtime files' rules

def _tree(name):
    return ast.parse((manifest.HERE / name).read_text(), name)


@pytest.mark.parametrize("name", PALLAS_FILES)
def test_pallas_runtime_files_follow_the_manifest_rules(name):
    """Imports: stdlib, torch, jax (only inside functions: the file imports without JAX), earlier runtime files
    relatively at the top level; top-level names prefixed; no __future__."""
    tree = _tree(name)
    before = manifest.RUNTIME_FILES[:manifest.RUNTIME_FILES.index(name)]
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 1 and id(node) in top and f"{node.module}.py" in before, (name, node.module)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for m in [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]:
                root = m.split(".")[0]
                assert root in set(sys.stdlib_module_names) | {"torch", "jax"} and m != "__future__", (name, m)
                assert root != "jax" or id(node) not in top, f"{name}: jax imported at the top level"
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert all(d.startswith(("kg_", "_kg_", "KG_", "_KG_")) for d in defined), defined


_STANDALONE = r'''
import sys

class _NoKernelgate:
    def find_spec(self, name, path=None, target=None):
        if name == "kernelgate" or name.startswith("kernelgate."):
            raise ImportError("kernelgate is not importable here")

sys.meta_path.insert(0, _NoKernelgate())
import torch, torch.fx
ns = {"__name__": "kg_candidate"}
exec(compile(open(sys.argv[1]).read(), "bundle.py", "exec"), ns)
print("jax before a call:", "jax" in sys.modules)

class M(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * 2.0 + torch.log(x.abs() + 1)

m, x = M(), torch.randn(64, 32)
gm = torch.fx.symbolic_trace(m)
assert ns["kg_rewrite_pallas_pointwise"](gm) == 1
with torch.no_grad():
    assert torch.allclose(gm(x), m(x), atol=1e-5, rtol=1e-5)
assert len(ns["_KG_PL_CALLS"]) == 1
import os
print("prealloc", os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
print("kernelgate modules:", len([k for k in sys.modules if k.startswith("kernelgate")]))
'''


@pytest.mark.slow
def test_a_pallas_bundle_runs_where_kernelgate_cannot_be_imported(tmp_path):
    text = manifest.bundle(["pallas"])
    assert not [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.level]
    (tmp_path / "bundle.py").write_text(text)
    (tmp_path / "run.py").write_text(_STANDALONE)
    env = {k: v for k, v in os.environ.items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    done = subprocess.run([sys.executable, "-I", "run.py", "bundle.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "jax before a call: False" in out and "prealloc false" in out and "kernelgate modules: 0" in out, out


# ---------------------------------------------------------------- on the GPU (JAX's GPU lowering, no interpreter)

def _jax_gpu() -> bool:
    import jax
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


@pytest.mark.gpu
def test_every_template_compiles_for_the_gpu_and_matches_torch(ran):
    if not torch.cuda.is_available() or not _jax_gpu():
        pytest.skip("needs a CUDA GPU and a JAX with its GPU backend")
    d = "cuda"
    x, w, b = torch.randn(300, 1000, device=d), torch.randn(1000, device=d), torch.randn(1000, device=d)
    lw, lb = torch.randn(384, 1000, device=d), torch.randn(384, device=d)
    with torch.no_grad():
        _close(L.kg_pl_softmax(x, -1), torch.softmax(x, -1))
        _close(L.kg_pl_layernorm(x, (1000,), w, b, 1e-5), F.layer_norm(x, (1000,), w, b, 1e-5), 1e-4)
        _close(L.kg_pl_rmsnorm(x, (1000,), w, 1e-6), F.rms_norm(x, (1000,), w, 1e-6), 1e-4)
        _close(L.kg_pl_pointwise((("gelu", ("i0",), ()),), (1024,), x), F.gelu(x))
        _close(L.kg_pl_gemm((("relu", ("i0",), ()),), (64, 64, 32), "linear", x, lw, lb),
               torch.relu(F.linear(x, lw, lb)), 1e-3)
    assert ran == ["row", "row", "row", "pointwise", "gemm"], ran


def test_gelu_needs_no_erf_and_is_as_accurate_as_torch(ran):
    """JAX's Triton lowering has no erf (the H200 run's NotImplementedError): GELU goes through exp, and errs no
    more than torch's fp32 GELU against fp64, from deep negatives (relative) to large positives."""
    from kernelgate.kernels import pallas_render
    assert "lax.erf" not in inspect.getsource(pallas_render)
    x = torch.cat([torch.linspace(-12, 12, 4096), torch.randn(4096) * 3])
    prog = (("gelu", ("i0",), ()),)
    exact = 0.5 * x.double() * torch.special.erfc(-x.double() * 0.5 ** 0.5)      # no cancellation below 0
    with torch.no_grad():
        ours = L.kg_pl_pointwise(prog, (1024,), x).double()
    assert (ours - exact).abs().max() <= max(4e-7, (F.gelu(x).double() - exact).abs().max())
    # where GELU is tiny, through erfc, not 1 + erf (cancellation); below -12 it leaves fp32's normal range (a draw
    # of randn * 3 under -13 made an fp32 zero of a 1e-40 and failed about one run in 50)
    neg = (x < -2) & (x >= -12)
    assert ((ours - exact)[neg].abs() / exact[neg].abs()).max() < 1e-4     # torch fp32 loses all digits by -12
