"""The generated-Triton strategies (triton_fusion.py over kernels/triton_*.py): they apply only on matching
graphs, a rendered candidate is self-contained (its own bundled copy of the kernels generates them), and it
passes the gate while a candidate with a wrong generator does not.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (tests/conftest.py sets
TRITON_INTERPRET=1 before triton is first imported). The kernels themselves: tests/kernels/test_triton.py.
"""
import os
import sys
from pathlib import Path

import pytest
import torch

if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from kernelgate.kernels import triton_render as R  # noqa: E402
from kernelgate.proposers.library import triton_fusion as T  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


@pytest.fixture
def dev():
    if R._KG_TF_INTERPRETED:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set, and there is no GPU")


def _randomize(m, scale=1.0):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * scale)
    return m


CHAIN_SRC = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(cols))
    def forward(self, x):
        y = x * torch.sigmoid(x)
        y = y * self.scale + self.bias
        y = y * torch.tanh(y)
        return y + x
def get_inputs():
    return [torch.randn(16, 32)]
def get_init_inputs():
    return [32]
'''

MLP_SRC = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.act = nn.GELU()
    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) + x
def get_inputs():
    return [torch.randn(16, 24)]
def get_init_inputs():
    return [24]
'''

BARE_MLP_SRC = MLP_SRC.replace("self.fc2(self.act(self.fc1(x))) + x", "self.fc2(self.fc1(x))")

SOFTMAX_SRC = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)
def get_inputs():
    return [torch.randn(4, 8)]
def get_init_inputs():
    return []
'''


def _context(path, target="cuda", precision=()):
    from kernelgate.graph import analyse
    from kernelgate.proposers import Context
    from kernelgate.proposers.library.library import REWRITE_FNS
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference
    ref = load_reference(Spec.parse(path, "Model"))
    graph = analyse(ref.build(), None, REWRITE_FNS)
    return ref, Context(Path(path).read_text(), "Model", target, "test", Contract(precision=precision), graph, (), {})


def _names(ctx):
    from kernelgate.proposers.library import Library
    return {levels[0][0].name for levels in Library().singles(ctx)}


def test_strategies_apply_on_matching_graphs(write):
    _, chain = _context(write("chain.py", CHAIN_SRC))
    _, mlp = _context(write("mlp.py", MLP_SRC))
    _, soft = _context(write("soft.py", SOFTMAX_SRC))
    _, chain_cpu = _context(write("chain2.py", CHAIN_SRC), target="cpu")
    _, mlp_tf32 = _context(write("mlp2.py", MLP_SRC), precision=("tf32",))
    assert chain.graph.patterns["triton-pointwise"] == 1 and chain.graph.patterns["triton-epilogue"] == 0
    assert "triton:pointwise" in _names(chain) and "triton:gemm-epilogue" not in _names(chain)
    assert mlp.graph.patterns["triton-epilogue"] == 2 and mlp.graph.patterns["triton-gemm"] == 0   # fp32 weights
    assert "triton:gemm-epilogue" in _names(mlp) and "triton:gemm" not in _names(mlp)
    assert not {"triton:pointwise", "triton:gemm-epilogue", "triton:gemm"} & (_names(soft) | _names(chain_cpu))
    assert "triton:gemm" in _names(mlp_tf32)
    from kernelgate.proposers.library import Library
    gemm = [lv[0][1] for lv in Library().singles(mlp_tf32) if lv[0][0].name == "triton:gemm"]
    assert len(gemm) == len(T.GEMM_CONFIGS) and all(v["fp32_precision"] == "tf32" for v in gemm)
    # 3xTF32: fp32 GEMMs under the reference's own precision (no contract needed), never on the CPU
    assert mlp.graph.patterns["triton-gemm-3xtf32"] == 2 and "triton:gemm-3xtf32" in _names(mlp)
    _, bare = _context(write("bare.py", BARE_MLP_SRC))
    assert bare.graph.patterns["triton-gemm-3xtf32"] == 2       # GEMMs without an epilogue: identity epilogue
    assert "triton:gemm-3xtf32" not in _names(chain) | _names(soft) | _names(chain_cpu)


def _render(ctx, name, params):
    from kernelgate.proposers.library import library
    strategy = next(s for s in library.STRATEGIES if s.name == name)
    return library.render(ctx, [(strategy, params)])


def _exec_candidate(src, ref_source, ref_model, xs, **overrides):
    ns = {"__name__": "kg_candidate"}
    exec(compile(ref_source + "\n" + src, "cand.py", "exec"), ns)
    ns.update(overrides)                       # module constants of the embedded copy (thresholds)
    m = ns["ModelNew"](*ns["get_init_inputs"]()).eval()
    m.load_state_dict(ref_model.state_dict(), strict=True)
    with torch.no_grad():
        return m(*xs), ns


@pytest.mark.parametrize("name, params, source, kernels", [
    ("triton:pointwise", {"block": 256, "num_warps": 4}, CHAIN_SRC, 1),
    ("triton:gemm-epilogue", {"block": 256, "num_warps": 4}, MLP_SRC, 2),      # bias+GELU, bias+residual
    ("triton:gemm-3xtf32", T.gemm_3xtf32_variants()[0], MLP_SRC, 2),          # GEMM with the epilogue in-kernel
    ("triton:gemm-3xtf32", T.gemm_3xtf32_variants()[1], BARE_MLP_SRC, 1),     # no epilogue: bias only, one kernel
])
def test_rendered_candidates_are_self_contained(dev, write, name, params, source, kernels):
    ref, ctx = _context(write("w.py", source))
    body = _render(ctx, name, params)
    assert "def kg_tf_pointwise(" in body and "_kg_softmax_kernel" not in body and "TRITON_FUSION_REWRITES" not in body
    model = _randomize(ref.build(), 0.3).to(dev).eval()
    xs = [x.to(dev) for x in ref.inputs(0)]
    out, ns = _exec_candidate(body, source, model, xs, _KG_TF_3X_MIN=0)   # tiny test GEMMs take the Triton path
    with torch.no_grad():
        torch.testing.assert_close(out, model(*xs), atol=1e-5, rtol=1e-5)
    assert len(ns["_KG_TF_KERNELS"]) == kernels                    # its own embedded copy generated them


@pytest.mark.parametrize("source, kernels", [(BARE_MLP_SRC, 0), (MLP_SRC, 2)])
def test_small_gemms_stay_on_the_library_under_3xtf32(dev, write, source, kernels):
    """Below _KG_TF_3X_MIN multiply-adds a GEMM stays on torch's own (cuBLAS) path: alone, as the reference
    wrote it; with an epilogue, followed by the one fused epilogue kernel."""
    ref, ctx = _context(write("small.py", source))
    body = _render(ctx, "triton:gemm-3xtf32", T.gemm_3xtf32_variants()[0])
    model = _randomize(ref.build(), 0.3).to(dev).eval()
    xs = [x.to(dev) for x in ref.inputs(0)]
    out, ns = _exec_candidate(body, source, model, xs)
    with torch.no_grad():
        torch.testing.assert_close(out, model(*xs), atol=1e-5, rtol=1e-5)
    assert len(ns["_KG_TF_KERNELS"]) == kernels and all(k[2] is None for k in ns["_KG_TF_KERNELS"])


@pytest.mark.slow
def test_rendered_candidate_passes_the_gate(dev, write, tmp_path):
    if dev != "cpu":
        pytest.skip("the CPU gate with interpreted kernels; on a GPU see benchmarks/gpu_triton_fusion.py")
    from kernelgate import api
    ref_path = write("chain.py", CHAIN_SRC)
    _, ctx = _context(ref_path)
    cand = tmp_path / "cand.py"
    cand.write_text(CHAIN_SRC + "\n\n" + _render(ctx, "triton:pointwise", {"block": 512, "num_warps": 4}))
    verdict = api.verify(ref_path, str(cand), target="cpu", store=str(tmp_path / "s.sqlite"))
    assert verdict.status.value == "accepted", verdict.message
    # the worker really ran the generated kernel: a generator off by a little in sigmoid is rejected
    body = _render(ctx, "triton:pointwise", {"block": 512, "num_warps": 4})
    wrong = body.replace('"tl.div_rn(1.0, 1.0 + {exp}(-{0}))"', '"tl.div_rn(1.0, 1.0001 + {exp}(-{0}))"')
    assert wrong != body
    cand.write_text(CHAIN_SRC + "\n\n" + wrong)
    verdict = api.verify(ref_path, str(cand), target="cpu", store=str(tmp_path / "s.sqlite"))
    assert verdict.status.value != "accepted"


NORM_SRC = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gamma = nn.Parameter(torch.rand(d) + 0.5)
        self.norm = nn.LayerNorm(d)
    def forward(self, x, r):
        return self.norm(x + self.gamma * r)
def get_inputs():
    return [torch.randn(64, 256), torch.randn(64, 256)]
def get_init_inputs():
    return [256]
"""


@pytest.mark.slow
def test_rendered_row_candidate_passes_the_gate_and_a_wrong_one_does_not(dev, write, tmp_path):
    if dev != "cpu":
        pytest.skip("the CPU gate with interpreted kernels")
    from kernelgate import api
    ref_path = write("norm.py", NORM_SRC)
    _, ctx = _context(ref_path)
    body = _render(ctx, "triton:row", {})
    cand = tmp_path / "cand.py"
    cand.write_text(NORM_SRC + "\n\n" + body)
    verdict = api.verify(ref_path, str(cand), target="cpu", store=str(tmp_path / "s.sqlite"))
    assert verdict.status.value == "accepted", verdict.message
    wrong = body.replace('"    mean = tl.sum(x, axis=0) / n_cols"', '"    mean = tl.sum(x, axis=0) / (n_cols + 1)"')
    assert wrong != body
    cand.write_text(NORM_SRC + "\n\n" + wrong)
    assert api.verify(ref_path, str(cand), target="cpu", store=str(tmp_path / "s.sqlite")).status.value != "accepted"


RMS_SRC = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d))
    def forward(self, x):
        ms = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + 1e-6) * self.weight
def get_inputs():
    return [torch.randn(64, 512)]
def get_init_inputs():
    return [512]
"""


@pytest.mark.slow
def test_rendered_rowreduce_candidate_passes_the_gate(dev, write, tmp_path):
    if dev != "cpu":
        pytest.skip("the CPU gate with interpreted kernels")
    from kernelgate import api
    from kernelgate.proposers.library import Library
    ref_path = write("rms.py", RMS_SRC)
    _, ctx = _context(ref_path)
    assert "triton:rowreduce" in {lv[0][0].name for lv in Library().singles(ctx)}
    cand = tmp_path / "cand.py"
    cand.write_text(RMS_SRC + "\n\n" + _render(ctx, "triton:rowreduce", {}))
    verdict = api.verify(ref_path, str(cand), target="cpu", store=str(tmp_path / "s.sqlite"))
    assert verdict.status.value == "accepted", verdict.message
