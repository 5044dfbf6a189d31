"""Low-precision strategies (precision.py): matched on the traced graph, exact or gate-accepted, with fallbacks."""
import os
import random
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():          # on a GPU the kernels are compiled
    os.environ.setdefault("TRITON_INTERPRET", "1")

from kernelgate.graph import analyse  # noqa: E402
from kernelgate.proposers import Context  # noqa: E402
from kernelgate.proposers.library import Library  # noqa: E402
from kernelgate.proposers.library import precision as P  # noqa: E402
from kernelgate.proposers.library import precision_int8 as I8  # noqa: E402
from kernelgate.proposers.library.library import REWRITE_FNS  # noqa: E402
from kernelgate.records import Contract  # noqa: E402
from kernelgate.workload import Spec, load_reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus_lowprec"
BENCH = ROOT / "benchmarks" / "lowprec"


def _load(path, monkeypatch=None):
    ref = load_reference(Spec.parse(str(path), "Model"))
    return ref, ref.build(), ref.inputs(seed=0)


def _ctx(path, target="cpu", contract=Contract()):
    _, model, _ = _load(path)
    return Context(Path(path).read_text(), "Model", target, "test", contract, analyse(model, None, REWRITE_FNS), (), {})


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setenv("KG_SUITE_SCALE", "0.0002")


def _calls(monkeypatch, name):
    seen = []
    real = getattr(torch, name)
    monkeypatch.setattr(torch, name, lambda *a, **k: seen.append(1) or real(*a, **k))
    return seen


# ---------------------------------------------------------------- int8 linear + requantization

@pytest.mark.parametrize("triton_epilogue", [False, True])
@pytest.mark.parametrize("path", [CORPUS / "int8_linear_requant.py", BENCH / "int8_linear_requant.py"])
def test_int8_requant_is_bit_exact(path, triton_epilogue, small, monkeypatch):
    if triton_epilogue and not I8._KG_LP_INTERPRETED:
        pytest.skip("Triton kernels not built by the interpreter in this session")
    _, model, xs = _load(path)
    gm = P.kg_lp_trace(model)
    assert P.kg_rewrite_int8_requant(gm, triton_epilogue=triton_epilogue) == 1
    assert "kg_lp_int8_requant" in gm.code and "matmul" not in gm.code
    int_mm = _calls(monkeypatch, "_int_mm")
    launched = []
    real = I8._kg_lp_triton_epilogue
    monkeypatch.setattr(I8, "_kg_lp_triton_epilogue", lambda *a, **k: launched.append(1) or real(*a, **k))
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        x = torch.randint(-128, 128, xs[0].shape, generator=g, dtype=torch.int8)
        with torch.no_grad():
            assert torch.equal(gm(x), model(x))
    assert int_mm and (bool(launched) == triton_epilogue)
    # new buffers (load_state_dict) are seen: nothing was folded into constants
    state = {k: (v * 1.5 if v.is_floating_point() else v) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    with torch.no_grad():
        assert torch.equal(gm(x), model(x))


def test_int8_triton_epilogue_rounds_half_to_even_and_clamps():
    if not I8._KG_LP_INTERPRETED:
        pytest.skip("Triton kernels not built by the interpreter in this session")
    acc = torch.tensor([[5, 7, -5, 10_000], [1, -3, 255, -10_000]], dtype=torch.int32)   # /2: ties 2.5, 3.5, -2.5
    half = torch.tensor(2.0)
    steps = (("to", True, (I8._KG_LP_ACC, torch.float32), {}),
             (torch.div, False, (I8._KG_LP_ACC, I8._KgLpSide(0)), {}),
             (torch.round, False, (I8._KG_LP_ACC,), {}),
             (torch.clamp, False, (I8._KG_LP_ACC, -128, 127), {}),
             ("to", True, (I8._KG_LP_ACC, torch.int8), {}))
    plan = I8._kg_lp_plan(torch.int32, acc.shape, acc.device, steps, [half])
    assert plan is not None
    out = I8._kg_lp_triton_epilogue(acc, torch.int32, plan)
    want = torch.clamp(torch.round(acc.float() / half), -128, 127).to(torch.int8)
    assert torch.equal(out, want) and out.tolist()[0][:3] == [2, 4, -2]
    assert torch.equal(I8._kg_lp_replay(acc, steps, [half]), want)


def test_int8_plan_leaves_python_scalars_to_torch():
    steps = [("to", True, (I8._KG_LP_ACC, torch.float32), {}),
             (torch.div, False, (I8._KG_LP_ACC, I8._KgLpSide(0)), {}),
             (torch.round, False, (I8._KG_LP_ACC,), {}),
             (torch.clamp, False, (I8._KG_LP_ACC, -128, 127), {}),
             ("to", True, (I8._KG_LP_ACC, torch.int8), {})]
    assert I8._kg_lp_plan(torch.int32, (4, 8), torch.device("cpu"), steps, [0.16]) is None
    assert I8._kg_lp_plan(torch.int32, (4, 8), torch.device("cpu"), steps, [torch.tensor(0.16)]) is not None
    assert I8._kg_lp_plan(torch.int32, (4, 8), torch.device("cpu"), steps[:2] + steps[3:], [torch.tensor(1.0)]) is None


def test_int8_falls_back_when_operands_do_not_fit():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randint(-127, 128, (24, 40), dtype=torch.int8))
            self.register_buffer("s", torch.tensor(0.01))

        def forward(self, x):
            y = (x.to(torch.int32) @ self.w.to(torch.int32).t()).to(torch.float32) * self.s
            return torch.clamp(torch.round(y), -128, 127).to(torch.int8)
    m = M()
    gm = P.kg_lp_trace(m)
    assert P.kg_rewrite_int8_requant(gm, triton_epilogue=False) == 1
    for x in (torch.randint(-128, 128, (5, 40), dtype=torch.int8), torch.randint(-128, 128, (5, 40)).to(torch.int16)):
        assert torch.equal(gm(x), m(x))                    # int16 input: the reference's own ops


def test_int8_does_not_match_float_or_unrounded_workloads():
    class NoRound(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randint(-127, 128, (8, 16), dtype=torch.int8))

        def forward(self, x):
            return (x.to(torch.int32) @ self.w.to(torch.int32).t()).to(torch.int8)

    class FloatW(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randn(8, 16))

        def forward(self, x):
            return torch.clamp(torch.round(x.to(torch.float32) @ self.w.to(torch.float32).t()), -128, 127).to(torch.int8)
    assert P.kg_rewrite_int8_requant(P.kg_lp_trace(NoRound())) == 0
    assert P.kg_rewrite_int8_requant(P.kg_lp_trace(FloatW())) == 0


# ---------------------------------------------------------------- fp8 scaled matmul

def test_fp8_scaled_mm_matches_reference(small, monkeypatch):
    _, model, (x, xs) = _load(BENCH / "fp8_scaled_matmul.py")
    gm = P.kg_lp_trace(model)
    assert P.kg_rewrite_fp8_scaled_mm(gm) == 1
    seen = _calls(monkeypatch, "_scaled_mm")
    with torch.no_grad():
        got, want = gm(x, xs), model(x, xs)
        exact = model.double()(x.double(), xs.double())
    assert seen and got.dtype == want.dtype == torch.bfloat16 and got.shape == want.shape
    err_c, err_r = (got.double() - exact).abs().max(), (want.double() - exact).abs().max()
    assert err_c <= 2 * err_r + 8 * 2.0 ** -8 * exact.abs().max() * 0.01


def test_fp8_needs_fp8_evidence_and_keeps_fp32_results_unless_declared(monkeypatch):
    class F32(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randn(32, 64).to(torch.float8_e4m3fn))
            self.register_buffer("sw", torch.tensor(0.5))

        def forward(self, x, sx):
            return (x.float() * sx) @ (self.w.float() * self.sw).t()

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randn(32, 64))

        def forward(self, x):
            return (x.float() * 2.0) @ self.w.float().t()
    m = F32()
    x, sx = torch.randn(16, 64).mul(8).to(torch.float8_e4m3fn), torch.tensor(0.7)   # per tensor: fp32 out allowed
    plain = P.kg_lp_trace(m)
    assert P.kg_rewrite_fp8_scaled_mm(plain) == 1               # matched; an fp32 result keeps the reference ops
    seen = _calls(monkeypatch, "_scaled_mm")
    assert torch.equal(plain(x, sx), m(x, sx)) and not seen
    declared = P.kg_lp_trace(m)
    assert P.kg_rewrite_fp8_scaled_mm_f32(declared) == 1
    exact = (x.double() * sx.double()) @ (m.w.double() * 0.5).t()
    assert declared(x, sx).dtype == torch.float32 and seen
    assert (declared(x, sx).double() - exact).abs().max() <= 1e-5 * exact.abs().max()
    assert P.kg_rewrite_fp8_scaled_mm(P.kg_lp_trace(Plain())) == 0


@pytest.mark.slow
def test_fp8_strategy_applies_and_renders(small):
    ctx = _ctx(BENCH / "fp8_scaled_matmul.py")
    lib = Library()
    names = {lv[0][0].name for lv in lib.singles(ctx)}
    assert "precision:fp8-scaled-mm" in names and "precision:fp8-scaled-mm-f32" not in names
    cands = [c for c in lib.propose(ctx, random.Random(0), 30) if "fp8-scaled-mm" in c.strategy]
    assert cands and "kg_trace(shadow)" in cands[0].source and "def kg_lp_fp8_mm" in cands[0].source


# ---------------------------------------------------------------- bf16 linear + activation

@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_linear_act_rewrite(act):
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(64, 96)
            self.act = torch.nn.ReLU() if act == "relu" else torch.nn.GELU(approximate="tanh")
            self.to(torch.bfloat16)

        def forward(self, x):
            return self.act(self.fc(x))
    m = M()
    gm = P.kg_lp_trace(m)
    assert P.kg_rewrite_linear_act(gm) == 1 and "kg_lp_linear_act" in gm.code
    x = torch.randn(4, 8, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        got, want = gm(x), m(x)
        exact = torch.nn.functional.linear(x.double(), m.fc.weight.double(), m.fc.bias.double())
        exact = torch.relu(exact) if act == "relu" else torch.nn.functional.gelu(exact, approximate="tanh")
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    assert (got.double() - exact).abs().max() <= 2 * (want.double() - exact).abs().max() + 1e-2


def test_linear_act_leaves_erf_gelu_and_fp32_alone():
    erf = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).to(torch.bfloat16)
    f32 = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    assert P.kg_rewrite_linear_act(P.kg_lp_trace(erf)) == 0
    assert P.kg_rewrite_linear_act(P.kg_lp_trace(f32)) == 0


def test_strategies_apply_by_target(small):
    lib = Library()
    mlp_cpu, mlp_gpu = _ctx(BENCH / "bf16_mlp.py"), _ctx(BENCH / "bf16_mlp.py", "cuda")
    assert "precision:bf16-linear-act" not in {lv[0][0].name for lv in lib.singles(mlp_cpu)}
    assert "precision:bf16-linear-act" in {lv[0][0].name for lv in lib.singles(mlp_gpu)}
    i8 = _ctx(CORPUS / "int8_linear_requant.py", "cuda")
    got = [lv[0][1] for lv in lib.singles(i8) if lv[0][0].name == "precision:int8-requant"]
    assert got == [{"triton_epilogue": True}, {"triton_epilogue": False}]
    att = _ctx(BENCH / "bf16_attention.py")
    assert not any(lv[0][0].name.startswith("precision:") for lv in lib.singles(att))


# ---------------------------------------------------------------- the embedded source

def test_the_embedded_source_stands_alone_with_prefixed_names():
    """precision.source() (graph helpers, int8 rewrite, the rest) runs after fx_rewrites' functions with no
    kernelgate import, and defines only prefixed names (a candidate holds other strategies' code too)."""
    import ast
    import inspect
    from kernelgate.proposers.library import fx_rewrites
    src = P.source()
    names = []
    for node in ast.parse(src).body:
        for n in ([node] + (node.body + node.orelse if isinstance(node, ast.If) else [])):
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                names.append(n.name)
            elif isinstance(n, ast.Assign):
                names += [t.id for t in n.targets if isinstance(t, ast.Name)]
    prefixes = ("kg_lp_", "_kg_lp_", "_KG_LP_", "_KgLp", "kg_rewrite_")
    assert names and all(n.startswith(prefixes) for n in names), names
    ns: dict = {"__name__": "kg_candidate"}
    code = inspect.getsource(fx_rewrites).split("REWRITES = {")[0] + "\n" + src
    exec(compile(code, "cand.py", "exec"), ns)           # noqa: S102 - the test's own candidate code
    assert all(callable(ns[k]) for k in ("kg_rewrite_fp8_scaled_mm", "kg_rewrite_int8_requant", "kg_rewrite_linear_act"))


# ---------------------------------------------------------------- through the gate (CPU)

@pytest.mark.slow
@pytest.mark.parametrize("name", ["int8_linear_requant", "bf16_mlp"])
def test_candidates_pass_the_gate_on_cpu(name, small, tmp_path):
    from kernelgate import api
    ref = BENCH / f"{name}.py"
    strategy = {"int8_linear_requant": "precision:int8-requant", "bf16_mlp": "precision:bf16-linear-act"}[name]
    ctx = _ctx(ref)
    lib = Library()
    s = next(s for s in lib.strategies if s.name == strategy)
    params = {"triton_epilogue": False} if "int8" in name else {}
    source = lib._make(ctx, [(s, params)], None, 0).source
    # the candidate's graph calls the low-precision kernel (else the gate would be judging the reference itself)
    r, model, xs = _load(ref)
    ns: dict = {"__name__": "kg_candidate"}
    exec(compile(source, "cand.py", "exec"), ns)                    # noqa: S102 - the test's own candidate
    m = ns["ModelNew"](*r.init_inputs).eval()
    m.load_state_dict(model.state_dict())
    with torch.no_grad():
        m(*xs)
    (gm,) = [v for k, v in vars(m).items() if k.startswith("_kg_gm_")]
    kernel = {"int8_linear_requant": "kg_lp_int8_requant", "bf16_mlp": "kg_lp_linear_act"}[name]
    assert any(getattr(n.target, "__name__", "") == kernel for n in gm.graph.nodes), gm.code
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    v = api.verify(str(ref), str(cand), target="cpu", store=str(tmp_path / "kg.db"))
    assert v.status.value == "accepted", v.message


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp8_scaled_matmul", "int8_linear_requant", "bf16_mlp"])
def test_gpu_paths_match(name, small):
    _, model, xs = _load(BENCH / f"{name}.py")
    model, xs = model.cuda(), [x.cuda() for x in xs]
    gm = P.kg_lp_trace(model)
    n = {"fp8_scaled_matmul": P.kg_rewrite_fp8_scaled_mm, "int8_linear_requant": P.kg_rewrite_int8_requant,
         "bf16_mlp": P.kg_rewrite_linear_act}[name](gm)
    assert n >= 1
    with torch.no_grad():
        got, want = gm(*xs), model(*xs)
    if got.dtype == torch.int8:
        assert torch.equal(got, want)
    else:
        exact = model.double()(*[x.double() for x in xs])
        assert (got.double() - exact).abs().max() <= 2 * (want.double() - exact).abs().max() + 0.05 * exact.abs().max()
