"""The drop-in module constructs and matches the reference whatever style the reference's class is in."""
import importlib.util

import pytest
import torch

from kernelgate import emit
from kernelgate.graph import analyse
from kernelgate.proposers import Context
from kernelgate.proposers.library import library
from kernelgate.records import Contract
from kernelgate.workload import Spec, load_reference

INITS = {
    "super_named": "super(Model, self).__init__()",       # nearly every KernelBench problem
    "super_plain": "super().__init__()",
    "explicit": "nn.Module.__init__(self)",
}

REF = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_mid, d_out):
        INIT
        self.a = nn.Linear(d_in, d_mid)
        self.b = nn.Linear(d_mid, d_out)

    def forward(self, x):
        return self.b(self.a(x))


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32, 48, 16]
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("style", sorted(INITS))
@pytest.mark.parametrize("what", ["merge-linear", "baseline-compile", "baseline-eager"])
def test_emitted_module_constructs_and_matches(tmp_path, style, what):
    path = tmp_path / "ref.py"
    path.write_text(REF.replace("INIT", INITS[style]))
    ref = load_reference(Spec.parse(str(path), "Model"))
    if what == "merge-linear":
        ctx = Context(path.read_text(), "Model", "cpu", "t", Contract(), analyse(ref.build(), None, library.REWRITE_FNS),
                      (), {})
        s = next(x for x in library.STRATEGIES if x.name == "rewrite:merge-linear")
        src = path.read_text() + "\n\n" + library.render(ctx, [(s, s.variants(ctx)[0])])
    else:
        src = emit.baseline_source(path.read_text(), "Model", what.split("-")[1])
    out = emit.emit(tmp_path / "optimized.py", src, "Model", "cpu", [ref.inputs(seed=0, device="cpu")], what)
    mod = _load(out, f"kg_emit_{style}_{what.replace('-', '_')}")
    model = mod.Model(*mod.get_init_inputs())                 # the class a user imports, as KernelBench builds it
    model.load_state_dict(ref.build().state_dict())
    again = mod.Model(*mod.get_init_inputs())                 # a second instance (the name is restored)
    assert isinstance(again, mod.Model) and mod.Model is mod.ModelNew
    x = torch.randn(64, 32)
    with torch.no_grad():
        want = ref.build()(x)
        assert torch.allclose(model(x), want, rtol=1e-5, atol=1e-5)


CONVBN = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.a = nn.Linear(8, 32)
        self.b = nn.Linear(32, 8)

    def forward(self, x):
        return self.b(self.a(self.bn(self.conv(x)).mean(dim=(2, 3))))


def get_inputs():
    return [torch.randn(4, 3, 10, 10)]


def get_init_inputs():
    return []
'''


def _emitted(tmp_path, strategies, name):
    """The drop-in module for a library candidate of CONVBN, its reference (same, non-trivial state), inputs."""
    path = tmp_path / "ref.py"
    path.write_text(CONVBN)
    ref = load_reference(Spec.parse(str(path), "Model"))
    model = ref.build().eval()
    ctx = Context(CONVBN, "Model", "cpu", "t", Contract(), analyse(model, None, library.REWRITE_FNS), (), {})
    by = {s.name: s for s in library.STRATEGIES}
    src = CONVBN + "\n\n" + library.render(ctx, [(by[s], by[s].variants(ctx)[0]) for s in strategies])
    xs = ref.inputs(seed=0, device="cpu")
    out = emit.emit(tmp_path / "optimized.py", src, "Model", "cpu", [xs], " + ".join(strategies))
    mod = _load(out, name)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
        model.bn.running_mean.normal_()
        model.bn.running_var.uniform_(0.5, 2.0)
    m = mod.Model().eval()
    m.load_state_dict(model.state_dict())
    return mod, model, m, xs


def _fast(m):
    """Whether the drop-in has built its rewritten graph (the fast path ran)."""
    return any(k.startswith("_kg_gm_") for k in m.__dict__)


def test_emitted_fast_path_only_in_the_verified_mode(tmp_path):
    """The gate verifies eval mode with autograd off: training mode and calls autograd records take the
    reference path (a fold-bn drop-in was 1.95 off in training mode and froze the running statistics)."""
    mod, model, m, xs = _emitted(tmp_path, ["rewrite:fold-bn", "rewrite:merge-linear"], "kg_emit_modes")
    model.train()
    m.train()
    for k in range(3):
        x = xs[0] + k
        want, got = model(x), m(x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        want.square().sum().backward()
        got.square().sum().backward()
    assert not _fast(m)
    for name, t in model.named_buffers():
        torch.testing.assert_close(m.get_buffer(name), t, msg=name)
    for (name, p), q in zip(model.named_parameters(), m.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4, msg=name)
    model.eval()
    m.eval()
    m.bn.train()                                            # one submodule in training mode: not verified either
    model.bn.train()
    with torch.no_grad():
        torch.testing.assert_close(m(xs[0]), model(xs[0]), atol=1e-5, rtol=1e-5)
    assert not _fast(m)
    m.bn.eval()
    model.bn.eval()
    with torch.no_grad():                                   # the verified mode: the fast path
        torch.testing.assert_close(m(xs[0]), model(xs[0]), atol=1e-5, rtol=1e-5)
    assert _fast(m)
    with torch.inference_mode():
        torch.testing.assert_close(m(xs[0]), model(xs[0]), atol=1e-5, rtol=1e-5)
    assert mod._KG_VERIFIED["modes"] == {"training": False, "grad": False}
    assert "eval mode" in mod.__doc__ and "reference path" in mod.__doc__


def test_emitted_module_accumulates_gradients_in_eval_mode(tmp_path):
    """Autograd on in eval mode (parameters requiring grad): the reference path, so a second backward works
    and the gradients are the reference's, also after the fast path cached derived weights."""
    mod, model, m, xs = _emitted(tmp_path, ["rewrite:fold-bn", "rewrite:merge-linear"], "kg_emit_grad")
    with torch.no_grad():
        m(*xs)
    assert _fast(m)
    for k in range(3):
        x = xs[0] * (k + 1)
        model(x).sum().backward()
        m(x).sum().backward()
    for (name, p), q in zip(model.named_parameters(), m.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4, msg=name)
    for p in m.parameters():                               # nothing requires grad: the verified computation
        p.requires_grad_(False)
    torch.testing.assert_close(m(xs[0]), model(xs[0]).detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("edit", ["mul", "copy"])
def test_emitted_module_follows_weight_edits_through_data(tmp_path, edit):
    """EMA, weight averaging and clipping write through `.data` (no version bump): the drop-in's derived
    weights (folded batch norm, merged linears) must follow (1.77 and 2.50 off before)."""
    mod, model, m, xs = _emitted(tmp_path, ["rewrite:fold-bn", "rewrite:merge-linear"], f"kg_emit_data_{edit}")
    with torch.no_grad():
        torch.testing.assert_close(m(*xs), model(*xs), atol=1e-5, rtol=1e-5)
        for step in range(2):
            for mm in (model, m):
                for name, t in (*mm.named_parameters(), *mm.named_buffers()):
                    if not t.is_floating_point():
                        continue
                    if edit == "mul":
                        t.data.mul_(2.0)
                    else:
                        g = torch.Generator().manual_seed(hash((name, step)) % 2 ** 31)
                        t.data.copy_(torch.rand(t.shape, generator=g) + 0.5)
            want = model(*xs)
            torch.testing.assert_close(m(*xs), want, atol=1e-5 * want.abs().max().item(), rtol=1e-4)
    assert _fast(m)


def test_emitted_modes_follow_what_was_verified(tmp_path):
    """The guard reads the verified modes: a module verified in training mode too runs its fast path there."""
    mod, _, m, xs = _emitted(tmp_path, ["rewrite:merge-linear"], "kg_emit_default_modes")
    assert mod._KG_VERIFIED["modes"] == emit.GATE_MODES
    with torch.no_grad():
        assert not mod._kg_fast_path_ok(xs, m.train()) and mod._kg_fast_path_ok(xs, m.eval())
    assert not mod._kg_fast_path_ok(xs, m)                 # autograd on, parameters requiring grad
    src = (tmp_path / "optimized.py").read_text().split("\n# ---- kernelgate: drop-in module")[0]
    out = emit.emit(tmp_path / "optimized2.py", src, "Model", "cpu", [xs], "x", modes={"training": True, "grad": True})
    mod2 = _load(out, "kg_emit_all_modes")
    m2 = mod2.Model().train()
    assert mod2._kg_fast_path_ok(xs, m2) and "eval and training mode" in mod2.__doc__


def test_the_fast_path_needs_the_verified_layout(tmp_path):
    """Red team 21: the guard checked shapes and dtypes only, so a channels_last input of the verified shape
    took a fast path verified on contiguous inputs. Strides are part of the signature now."""
    mod, model, m, xs = _emitted(tmp_path, ["rewrite:merge-linear"], "kg_emit_layout")
    other = [x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x.t().contiguous().t()
             for x in xs]
    assert any(o.stride() != x.stride() for o, x in zip(other, xs))
    with torch.no_grad():
        assert mod._kg_fast_path_ok(xs, m) and not mod._kg_fast_path_ok(other, m)
        torch.testing.assert_close(m(*other), model(*xs), atol=1e-5, rtol=1e-5)


def test_the_fast_path_needs_the_verified_autograd_mode_and_offset(tmp_path):
    """Red team 28: the gate calls candidates under torch.no_grad() only, so a candidate that branched on the
    autograd mode (wrong with autograd on and nothing requiring grad, or in inference mode) took the fast path
    there; and a contiguous input at a storage offset (a row slice) matched the signature of offset-0 inputs
    the candidate was verified on. Both take the reference path now."""
    mod, model, m, xs = _emitted(tmp_path, ["rewrite:merge-linear"], "kg_emit_rt28")
    for p in m.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        assert mod._kg_fast_path_ok(xs, m)
    assert not mod._kg_fast_path_ok(xs, m)                 # autograd on, nothing requiring grad
    with torch.inference_mode():
        assert not mod._kg_fast_path_ok(xs, m)
    shifted = []
    for x in xs:
        buf = torch.empty(x.numel() + 7, dtype=x.dtype)
        y = buf[7:].view(x.shape)
        y.copy_(x)
        shifted.append(y)
    assert all(y.is_contiguous() and y.storage_offset() == 7 for y in shifted)
    with torch.no_grad():
        assert not mod._kg_fast_path_ok(shifted, m)
        torch.testing.assert_close(m(*shifted), model(*xs), atol=1e-5, rtol=1e-5)
