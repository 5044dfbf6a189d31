import pytest
import torch

from kernelgate import workload
from kernelgate.errors import KernelgateError
from kernelgate.records import Contract, Domain, Reason

REF = """
import torch
class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.emb = torch.nn.Embedding(n, 8)
    def forward(self, idx, mask, x):
        return self.emb(idx) * mask.unsqueeze(-1) + x
def get_inputs():
    return [torch.randint(0, 10, (4, 5)), torch.rand(4, 5) > 0.5, torch.rand(4, 5, 8)]
def get_init_inputs():
    return [10]
"""


def test_spec_parse_class_suffix(write):
    p = write("m.py", REF)
    assert workload.Spec.parse(p, "Model").cls == "Model"
    assert workload.Spec.parse(p + ":Other", "Model").cls == "Other"


def test_integer_and_bool_inputs_keep_dtype_and_values(write):
    ref = workload.load_reference(workload.Spec.parse(write("m.py", REF), "Model"))
    xs = ref.inputs(seed=3)
    g = torch.Generator().manual_seed(0)
    for kind in workload.TRIAL_KINDS:
        ys = workload.widen(xs, kind, g, Contract())
        assert ys[0].dtype == torch.int64 and torch.equal(ys[0], xs[0])
        assert ys[1].dtype == torch.bool and torch.equal(ys[1], xs[1])
        assert ys[2].dtype == torch.float32 and ys[2].shape == xs[2].shape


def test_widening_crosses_clamp_boundaries_unless_a_domain_is_declared():
    x = [torch.rand(1000) - 0.5]                    # all inside [-0.5, 0.5]
    g = torch.Generator().manual_seed(0)
    assert workload.widen(x, "wide", g, Contract())[0].abs().max() > 1.0
    assert workload.widen(x, "heavy", g, Contract())[0].abs().max() > 1.0
    dom = Contract(domain=((0, Domain(-0.5, 0.5)),))
    for kind in workload.TRIAL_KINDS:
        y = workload.widen(x, kind, g, dom)[0]
        assert y.min() >= -0.5 and y.max() <= 0.5


def test_perturb_keeps_nonnegative_tensors_nonnegative():
    ln = torch.nn.LayerNorm(16)
    bn = torch.nn.BatchNorm1d(16)
    state = {**ln.state_dict(), **{f"bn.{k}": v for k, v in bn.state_dict().items()}}
    out = workload.perturb(state, torch.Generator().manual_seed(0))
    assert not torch.equal(out["weight"], state["weight"]) and not torch.equal(out["bias"], state["bias"])
    assert (out["bn.running_var"] > 0).all()
    assert torch.equal(out["bn.num_batches_tracked"], state["bn.num_batches_tracked"])


def test_resize_changes_only_the_listed_dimension(write):
    ref = workload.load_reference(workload.Spec.parse(write("m.py", REF), "Model"))
    xs = ref.inputs(seed=0)
    ys = workload.resize(xs, (0, 1, 2), 0, 7, torch.Generator().manual_seed(0))
    assert [tuple(y.shape) for y in ys] == [(7, 5), (7, 5), (7, 5, 8)]
    assert ys[0].dtype == torch.int64 and ys[0].min() >= 0 and ys[0].max() < 10


@pytest.mark.parametrize("text, msg", [
    ("import torch\n", "defines no nn.Module class 'Model'"),
    ("def broken(:\n", "syntax error"),
    ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "no get_inputs"),
    ("raise RuntimeError('boom')\n", "importing"),
])
def test_load_errors_name_the_problem(write, text, msg):
    with pytest.raises(KernelgateError, match=msg) as e:
        workload.load_reference(workload.Spec.parse(write("bad.py", text), "Model"))
    assert e.value.reason is Reason.TASK_LOAD


def test_missing_file():
    with pytest.raises(KernelgateError, match="no such file"):
        workload.load_reference(workload.Spec.parse("does_not_exist.py", "Model"))


def test_inputs_function_from_another_file(write):
    body = REF.replace("def get_inputs", "def _unused")
    p = write("m.py", body)
    write("gen.py", "import torch\ndef make():\n    return [torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3) > 0, torch.rand(2, 3, 8)]\n")
    ref = workload.load_reference(workload.Spec.parse(p, "Model", inputs="gen.py:make"))
    assert [tuple(x.shape) for x in ref.inputs(0)] == [(2, 3), (2, 3), (2, 3, 8)]


def _plant_pyc(source_path, text):
    """Bytecode of `text` where CPython looks for `source_path`'s cache, stamped with the source's mtime and
    size (all a timestamp .pyc is checked against)."""
    import importlib._bootstrap_external as ext
    import importlib.util
    import os
    from pathlib import Path
    st = os.stat(source_path)
    data = ext._code_to_timestamp_pyc(compile(text, source_path, "exec"), st.st_mtime, st.st_size)
    cache = Path(importlib.util.cache_from_source(source_path))
    cache.parent.mkdir(exist_ok=True)
    cache.write_bytes(data)
    return cache


PLANTED = "import torch\nclass Model(torch.nn.Module):\n    planted = True\n" \
          "def get_inputs():\n    return [torch.zeros(1)]\n"


def test_import_file_runs_the_source_never_planted_bytecode(write, tmp_path):
    import importlib.util
    p = write("m.py", REF)
    cache = _plant_pyc(p, PLANTED)
    # the planted file is valid: a plain import would execute it
    spec = importlib.util.spec_from_file_location("_kg_test_planted", p)
    plain = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plain)
    assert getattr(plain.Model, "planted", False)
    before = cache.read_bytes()
    ref = workload.load_reference(workload.Spec.parse(p, "Model"))
    assert not hasattr(ref.cls, "planted") and ref.cls.__module__ in __import__("sys").modules
    assert ref.init_inputs == [10] and cache.read_bytes() == before


def test_sibling_modules_are_loaded_from_source_too(write, tmp_path, monkeypatch):
    write("helper_kg.py", "SCALE = 2.0\n")
    _plant_pyc(str(tmp_path / "helper_kg.py"), "SCALE = 1000.0\n")
    p = write("m.py", REF.replace("import torch\n", "import torch\nfrom helper_kg import SCALE\n", 1))
    import sys
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        ref = workload.load_reference(workload.Spec.parse(p, "Model"))
        assert ref.module.SCALE == 2.0
    finally:
        sys.modules.pop("helper_kg", None)


def test_import_file_writes_no_bytecode(write, tmp_path):
    p = write("fresh.py", REF)
    workload.import_file(p)
    assert not (tmp_path / "__pycache__").exists()


def test_trial_transforms_keep_layout_and_touch_only_what_they_say():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 10, (40, 6)).t()                         # non-contiguous
    y = workload.IntDomain(-10, 9, (-100,)).draw(idx, g)
    assert y.stride() == idx.stride() and y.dtype == idx.dtype
    assert {-100, -10, 9} <= set(y.reshape(-1).tolist()) and int(y.min()) >= -100 and int(y.max()) <= 9
    x = torch.randn(30, 20).t()
    e = workload.edit([x, idx], g, Contract(), {1: workload.IntDomain(0, 9)}, {0: 4, 1: 3})
    assert e[0].stride() == x.stride() and int((e[0] != x).sum()) == 4 and int((e[1] != idx).sum()) == 3
    n = workload.with_nonfinite([x, idx], g, Contract())
    assert int(n[0].isnan().sum()) == 1 and int(n[0].isinf().sum()) == 2 and n[1] is idx
    assert workload.with_nonfinite([x], g, Contract(domain=((0, Domain(-1.0, 1.0)),))) is None
    state = {"perm": torch.randperm(16), "count": torch.tensor(0), "mask": torch.ones(8, dtype=torch.bool),
             "w": torch.randn(3)}
    new, keys = workload.perturb_ints(state, g)
    assert sorted(keys) == ["count", "mask", "perm"] and new["w"] is state["w"]
    assert torch.equal(new["perm"].sort().values, torch.arange(16)) and int(new["count"]) in (1, 2)
    assert not bool(new["mask"].all())


def test_moments_match_fp64_statistics_across_chunks(monkeypatch):
    """Chunked mean/std/RMS (Chan's merge) equal the fp64 whole-tensor figures, with an offset that would
    cancel catastrophically in a sum-of-squares formula."""
    monkeypatch.setattr(workload, "CHUNK", 1000)
    x = (torch.randn(10_007, generator=torch.Generator().manual_seed(1)) * 1e-3 + 1e4).float()
    mean, std, rms = workload.moments(x)
    w = x.double()
    assert mean == pytest.approx(float(w.mean()), rel=1e-12)
    assert std == pytest.approx(float(w.std()), rel=1e-6)
    assert rms == pytest.approx(float(w.pow(2).mean().sqrt()), rel=1e-12)
    assert workload.moments(torch.tensor([-3.0]))[:2] == (-3.0, 3.0)      # one element: |mean| as the deviation


def test_widen_keeps_the_statistics_and_layout_in_chunks(monkeypatch):
    """Noise drawn a chunk at a time has the given values' statistics; a transposed input stays transposed;
    the same generator state gives the same trial."""
    monkeypatch.setattr(workload, "CHUNK", 4096)
    x = (torch.randn(300, 200, generator=torch.Generator().manual_seed(2)) * 3 + 5).t()
    assert not x.is_contiguous()
    for kind in ("normal", "heavy", "wide", "narrow", "signs"):
        y = workload.widen([x], kind, torch.Generator().manual_seed(7), Contract())[0]
        again = workload.widen([x], kind, torch.Generator().manual_seed(7), Contract())[0]
        assert y.shape == x.shape and y.stride() == x.stride() and y.dtype == x.dtype
        assert torch.equal(y, again)
    y = workload.widen([x], "normal", torch.Generator().manual_seed(3), Contract())[0]
    assert float(y.mean()) == pytest.approx(5.0, abs=0.1) and float(y.std()) == pytest.approx(3.0, rel=0.05)
    s = workload.widen([x], "signs", torch.Generator().manual_seed(3), Contract())[0]
    assert torch.equal(s.abs(), x.abs()) and 0.4 < float((s < 0).float().mean()) < 0.6


def test_widen_of_narrow_formats_and_nonfinite_inputs():
    """fp16 inputs are drawn in fp32 and returned in fp16; a NaN in the given values does not make the whole
    trial NaN (its statistics fall back to 0 and 1)."""
    h = torch.rand(64, dtype=torch.float16)
    assert workload.widen([h], "normal", torch.Generator().manual_seed(0), Contract())[0].dtype == torch.float16
    x = torch.rand(64)
    x[3] = float("nan")
    y = workload.widen([x], "normal", torch.Generator().manual_seed(0), Contract())[0]
    assert torch.isfinite(y).all()


def test_magnitudes_are_one_signed_and_complex_ones_real_valued():
    """Red team 39: a candidate wrong only on inputs >= 0 (after a ReLU), or on real-valued complex inputs."""
    from kernelgate import workload
    from kernelgate.records import Contract
    g = torch.Generator().manual_seed(0)
    x, z, n = torch.randn(5, 7), torch.randn(5, 7, dtype=torch.complex64), torch.arange(4)
    y, w, m = workload.widen([x, z, n], "magnitudes", g, Contract())
    assert torch.equal(y, x.abs()) and bool((y >= 0).all())
    assert w.dtype == torch.complex64 and bool((w.imag == 0).all()) and torch.allclose(w.real, z.abs())
    assert torch.equal(m, n)
    assert "magnitudes" in workload.TRIAL_KINDS


def test_moments_and_perturb_leave_fp64_tensors_as_they_were():
    """moments squared an fp64 tensor in place (its float64 chunk is the tensor itself), and perturb's chunks
    would add to it: both read their inputs only."""
    x = torch.randn(1000, dtype=torch.float64)
    kept = x.clone()
    _, std, _ = workload.moments(x)
    assert torch.equal(x, kept) and abs(std - float(kept.std())) < 1e-12
    state = {"w": x, "scale": kept.abs() + 0.5}
    before = {k: v.clone() for k, v in state.items()}
    out = workload.perturb(state, torch.Generator().manual_seed(0))
    assert all(torch.equal(state[k], before[k]) for k in state)
    assert not torch.equal(out["w"], x) and bool((out["scale"] > 0).all())


def test_perturb_works_a_chunk_at_a_time_over_large_tensors(monkeypatch):
    monkeypatch.setattr(workload, "CHUNK", 64)
    w = torch.randn(10, 33)
    out = workload.perturb({"w": w, "v": torch.rand(100) + 1}, torch.Generator().manual_seed(1))["w"]
    assert out.shape == w.shape and out.dtype == w.dtype
    d = (out - w).flatten()
    assert bool((d != 0).all()) and abs(float(d.std()) / (0.2 * float(w.std())) - 1) < 0.25
