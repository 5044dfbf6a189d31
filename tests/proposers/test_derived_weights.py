"""Weights that rewrites derive from a module's tensors (folded batch norm, a folded scale, merged linears,
re-laid-out low-precision copies) are never stale, whatever changed the source tensors (`p.data` edits bump
no version counter), carry no autograd history from one call into the next (a second backward works), and
are not used in training mode (batch norm then uses and updates batch statistics, as the reference does)."""
import pytest
import torch

from kernelgate.graph import analyse
from kernelgate.proposers import Context
from kernelgate.proposers.library import fx_rewrites as R
from kernelgate.proposers.library import precision as P
from kernelgate.proposers.library.library import REWRITE_FNS, STRATEGIES, Library
from kernelgate.records import Contract
from kernelgate.workload import Spec, load_reference

REF = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.a = nn.Linear(8, 32)
        self.b = nn.Linear(32, 8)
        self.c = nn.Linear(8, 4)

    def forward(self, x):
        y = self.bn(self.conv(x)).mean(dim=(2, 3))
        return self.c(self.b(self.a(y))) * 0.5


def get_inputs():
    return [torch.randn(4, 3, 10, 10)]


def get_init_inputs():
    return []
"""

REWRITES = ["rewrite:fold-bn", "rewrite:merge-linear", "rewrite:fold-scale"]


def _pair(write, strategy):
    """(reference, candidate) with the same non-trivial state, the candidate's class rendered by the library."""
    path = write("ref.py", REF)
    ref = load_reference(Spec.parse(path, "Model"))
    model = ref.build().eval()
    ctx = Context(REF, "Model", "cpu", "test", Contract(), analyse(model, None, REWRITE_FNS), (), {})
    by = {s.name: s for s in STRATEGIES}
    assert by[strategy].applies(ctx)
    cand = Library()._make(ctx, [(by[strategy], {})], None, 0)
    ns: dict = {"__name__": "kg_candidate"}
    exec(compile(cand.source, "cand.py", "exec"), ns)       # noqa: S102 - the test's own candidate
    m = ns["ModelNew"]().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
        model.bn.running_mean.normal_()
        model.bn.running_var.uniform_(0.5, 2.0)
    m.load_state_dict(model.state_dict())
    with torch.no_grad():
        m(torch.randn(4, 3, 10, 10))                         # builds the rewritten graph (eval mode)
    (gm,) = [v for k, v in vars(m).items() if k.startswith("_kg_gm_")]
    assert gm.code != R.kg_trace(model).code, f"{strategy} left the graph as it was: nothing is derived"
    return model, m


def _edits():
    w = {}

    def data_mul(mod):
        for t in (*mod.parameters(), *mod.buffers()):
            if t.is_floating_point():
                t.data.mul_(2.0)

    def data_copy(mod):                      # EMA / weight averaging write through .data
        for name, t in (*mod.named_parameters(), *mod.named_buffers()):
            if t.is_floating_point():
                w.setdefault(name, torch.randn_like(t).abs() + 0.1)
                t.data.copy_(w[name])

    def data_clamp(mod):                     # clipping through .data, after a step that made weights large
        for t in mod.parameters():
            t.data.mul_(3.0).clamp_(-0.3, 0.3)

    def version(mod):                        # in place under no_grad (bumps versions: worked before too)
        with torch.no_grad():
            for t in mod.parameters():
                t.mul_(-1.5)
    return {"data.mul_": data_mul, "data.copy_": data_copy, "data.clamp_": data_clamp, "no_grad mul_": version}


@pytest.mark.parametrize("edit", sorted(_edits()))
@pytest.mark.parametrize("strategy", REWRITES)
def test_derived_weights_follow_in_place_edits_whatever_made_them(write, strategy, edit):
    model, m = _pair(write, strategy)
    x = torch.randn(4, 3, 10, 10)
    fn = _edits()[edit]
    with torch.no_grad():
        torch.testing.assert_close(m(x), model(x), atol=1e-5, rtol=1e-5)     # derived weights cached
        for _ in range(2):
            fn(model)
            fn(m)
            torch.testing.assert_close(m(x), model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("strategy", REWRITES)
def test_gradients_accumulate_over_several_backwards(write, strategy):
    """Eval mode with autograd on (fine-tuning a frozen-statistics net, gradient accumulation): each forward's
    graph is its own, and the gradients are the reference's."""
    model, m = _pair(write, strategy)
    xs = [torch.randn(4, 3, 10, 10) for _ in range(3)]
    with torch.no_grad():
        m(xs[0])                                             # derived weights cached under no_grad first
    for x in xs:
        model(x).square().sum().backward()
        m(x).square().sum().backward()                       # raised on the second call before
    for (name, p), q in zip(model.named_parameters(), m.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4, msg=name)


@pytest.mark.parametrize("strategy", REWRITES)
def test_training_mode_runs_the_reference_computation(write, strategy):
    """In training mode batch norm normalizes with batch statistics and updates its running statistics; a
    candidate must do the same (a folded conv used the running statistics: 1.95 off, statistics frozen)."""
    model, m = _pair(write, strategy)
    x = torch.randn(4, 3, 10, 10)
    with torch.no_grad():
        m(x)                                                 # the rewritten graph built in eval mode first
    model.train()
    m.train()
    for k in range(3):
        x = torch.randn(4, 3, 10, 10) + k
        want, got = model(x), m(x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        want.sum().backward()
        got.sum().backward()
    for name, t in model.bn.named_buffers():
        torch.testing.assert_close(m.bn.get_buffer(name), t, msg=name)
    for (name, p), q in zip(model.named_parameters(), m.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4, msg=name)
    model.eval()
    m.eval()
    with torch.no_grad():                                    # back in eval: the statistics training left
        torch.testing.assert_close(m(x), model(x), atol=1e-5, rtol=1e-5)


def test_training_mode_is_traced_out_of_the_rewritten_graph(write):
    """A rewrite level first called in training mode must not freeze training-time control flow into its
    graph (F.dropout(x, training=self.training) traced as a constant)."""
    src = REF.replace("return self.c(self.b(self.a(y))) * 0.5",
                      "y = torch.nn.functional.dropout(y, 0.5, self.training)\n"
                      "        return self.c(self.b(self.a(y))) * 0.5")
    path = write("drop.py", src)
    ref = load_reference(Spec.parse(path, "Model"))
    model = ref.build()
    ctx = Context(src, "Model", "cpu", "test", Contract(), analyse(model.eval(), None, REWRITE_FNS), (), {})
    by = {s.name: s for s in STRATEGIES}
    cand = Library()._make(ctx, [(by["rewrite:merge-linear"], {})], None, 0)
    ns: dict = {"__name__": "kg_candidate"}
    exec(compile(cand.source, "cand.py", "exec"), ns)        # noqa: S102
    m = ns["ModelNew"]().train()
    m.load_state_dict(model.state_dict())
    model.train()
    x = torch.randn(4, 3, 10, 10)
    m(x)                                                     # first call in training mode
    model(x)                                                 # (the same running-statistics update)
    m.eval()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(m(x), model(x), atol=1e-5, rtol=1e-5)


def test_fold_bn_helper_in_training_mode_uses_batch_statistics():
    conv, bn = torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)
    bn.train()
    ref_bn = torch.nn.BatchNorm2d(8).train()
    x = torch.randn(4, 3, 9, 9)
    torch.testing.assert_close(R.kg_conv_bn(x, conv, bn), ref_bn(conv(x)))
    torch.testing.assert_close(bn.running_mean, ref_bn.running_mean)


def test_derived_cache_holds_no_autograd_history_and_follows_storage_swaps():
    lin = torch.nn.Linear(6, 6)
    key = ("test", id(lin))
    w = R._kg_derived(key, (lin.weight,), lambda: lin.weight * 2)
    assert w.grad_fn is None and not w.requires_grad
    lin.weight.data = torch.randn(6, 6)                      # a new tensor behind the same parameter
    torch.testing.assert_close(R._kg_derived(key, (lin.weight,), lambda: lin.weight * 2), lin.weight.detach() * 2)
    lin.weight.data[0, 0] = float("nan")                     # NaN equals nothing; the cache still answers right
    got = R._kg_derived(key, (lin.weight,), lambda: lin.weight * 2)
    assert torch.isnan(got[0, 0]) and torch.equal(got[1:], lin.weight.detach()[1:] * 2)
    lin.weight.data[1, 1] = 0.0
    R._kg_derived(key, (lin.weight,), lambda: lin.weight * 2)
    lin.weight.data[1, 1] = -0.0                             # only the sign bit changes
    assert str(R._kg_derived(key, (lin.weight,), lambda: lin.weight * 2)[1, 1].item()) == "-0.0"


def test_low_precision_colmajor_copy_follows_data_edits():
    w = torch.randn(8, 16)
    first = P._kg_lp_colmajor(w, False)
    torch.testing.assert_close(first, w)
    w.data.mul_(2.0)
    torch.testing.assert_close(P._kg_lp_colmajor(w, False), w)
    wt = torch.randn(16, 8)                                   # (N, K) row-major: its transpose is column-major
    assert P._kg_lp_colmajor(wt, True).data_ptr() == wt.data_ptr()


@pytest.mark.gpu
def test_cudagraph_over_fold_bn_follows_data_edits(write):
    """A captured graph reads the folded weights the capture left; an edit through `.data` (no version bump)
    must still drop it."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    path = write("cg.py", REF)
    ref = load_reference(Spec.parse(path, "Model"))
    model = ref.build().eval()
    ctx = Context(REF, "Model", "cuda", "test", Contract(), analyse(model, None, REWRITE_FNS), (), {})
    by = {s.name: s for s in STRATEGIES}
    for outputs in ("clone", "in-place"):
        cand = Library()._make(ctx, [(by["rewrite:fold-bn"], {}), (by["runtime:cudagraph"], {"outputs": outputs})],
                               None, 0)
        ns: dict = {"__name__": "kg_candidate"}
        exec(compile(cand.source, "cand.py", "exec"), ns)    # noqa: S102
        m = ns["ModelNew"]().cuda().eval()
        model = model.cuda().eval()
        m.load_state_dict(model.state_dict())
        x = torch.randn(4, 3, 10, 10, device="cuda")
        with torch.no_grad():
            for _ in range(3):
                torch.testing.assert_close(m(x), model(x), atol=1e-4, rtol=1e-4)
            for mod in (model, m):
                mod.conv.weight.data.mul_(2.0)
                mod.bn.running_var.data.mul_(3.0)
            for _ in range(2):
                torch.testing.assert_close(m(x), model(x), atol=1e-4, rtol=1e-4)


def test_caches_made_under_inference_mode_serve_later_autograd_calls():
    """A first call under torch.inference_mode must not leave inference tensors in a cache that a later call
    with autograd on saves for backward."""
    lin = torch.nn.Linear(5, 5)
    with torch.inference_mode():
        v = R._kg_derived(("inference", id(lin)), (lin.weight,), lambda: lin.weight * 2)
        R.kg_avgpool_conv(torch.randn(2, 7, 6, 6, dtype=torch.float64), (2, 2), (2, 2), (0, 0))
    assert not v.is_inference()
    x = torch.randn(2, 7, 6, 6, dtype=torch.float64, requires_grad=True)
    R.kg_avgpool_conv(x, (2, 2), (2, 2), (0, 0)).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 0.25))


def test_compile_over_rewrites_in_training_mode_runs_the_reference(write):
    """runtime:compile over a rewrite level compiles the rewritten graph, built in eval mode: a first call in
    training mode runs the reference's forward instead (it built nothing to compile before)."""
    model, _ = _pair(write, "rewrite:fold-bn")
    ctx = Context(REF, "Model", "cpu", "test", Contract(), analyse(model, None, REWRITE_FNS), (), {})
    by = {s.name: s for s in STRATEGIES}
    cand = Library()._make(ctx, [(by["rewrite:fold-bn"], {}), (by["runtime:compile"], {"mode": "default"})], None, 0)
    ns: dict = {"__name__": "kg_candidate"}
    exec(compile(cand.source, "cand.py", "exec"), ns)        # noqa: S102
    m = ns["ModelNew"]().train()
    m.load_state_dict(model.state_dict())
    model.train()
    x = torch.randn(4, 3, 10, 10)
    torch.testing.assert_close(m(x), model(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(m.bn.running_mean, model.bn.running_mean)
