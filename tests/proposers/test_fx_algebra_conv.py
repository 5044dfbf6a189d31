"""rewrite:reduce-conv (kernelgate/proposers/library/fx_algebra.py): a convolution's output summed or averaged over
spatial dims, through channel-wise scales and shifts, as a convolution over the input's sums per kernel offset;
the reference's own ops wherever the identity does not hold for the tensors of a call."""
import random

import pytest
import torch

from kernelgate.graph import analyse
from kernelgate.proposers import Context
from kernelgate.proposers.library import fx_algebra as A
from kernelgate.proposers.library import fx_rewrites as R
from kernelgate.proposers.library.library import REWRITE_FNS, STRATEGIES, Library
from kernelgate.records import Contract


def _case(rnd):
    """A random convolution (1-3 spatial dims, plain or transposed, groups, stride, padding, dilation, output
    padding), reduced dims, channel-wise steps, keepdim and mean, in float64."""
    n, kind = rnd.choice([1, 2, 3]), rnd.choice(["conv", "convT"])
    g = rnd.choice([1, 1, 2])
    cin, cout = g * rnd.choice([1, 2, 3]), g * rnd.choice([1, 2, 4])
    k = tuple(rnd.choice([1, 2, 3, 4]) for _ in range(n))
    s = tuple(rnd.choice([1, 2, 3]) for _ in range(n))
    d = tuple(rnd.choice([1, 2]) for _ in range(n))
    p = tuple(rnd.choice([0, 1, 2]) for _ in range(n))
    op = tuple(rnd.randrange(0, max(s[j], d[j])) if kind == "convT" else 0 for j in range(n))
    size = tuple(rnd.choice([5, 7, 9] if n < 3 else [4, 5]) for _ in range(n))
    x = torch.randn(2, cin, *size, dtype=torch.float64)
    w = torch.randn(*((cout, cin // g) if kind == "conv" else (cin, cout // g)), *k, dtype=torch.float64)
    b = torch.randn(cout, dtype=torch.float64) if rnd.random() < 0.7 else None
    dims = tuple(sorted(rnd.sample(range(2, n + 2), rnd.randint(1, n))))
    if len(dims) == 1 and rnd.random() < 0.5:
        dims = dims[0] - (n + 2) if rnd.random() < 0.5 else dims[0]          # an int, negative at times
    steps = []
    for _ in range(rnd.randint(0, 3)):
        o = rnd.choice(["mul", "div", "add", "sub"])
        a = rnd.choice([1.5, -0.7, torch.rand(cout, *([1] * n), dtype=torch.float64) + 0.5])
        steps.append((o, a, 0 if o == "div" else rnd.choice([0, 1])))
    return x, w, b, kind, s, p, d, op, g, steps, dims, rnd.random() < 0.5, rnd.random() < 0.5


def test_the_identity_matches_the_references_ops_in_float64_over_random_geometry():
    rnd, fast, tried = random.Random(0), 0, 0
    torch.manual_seed(0)
    while tried < 150:
        args = _case(rnd)
        try:
            ref = A._kg_conv_chain(*args)
        except RuntimeError:            # a geometry torch itself refuses (an output padding too large)
            continue
        tried += 1
        fast += A._kg_conv_ok(*args[:11]) is not None
        got = A.kg_reduced_conv(*args)
        assert got.shape == ref.shape, args[3:]
        torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-9, msg=str(args[3:9] + args[10:]))
    assert fast >= 140                  # the identity itself, not the fallback, was what matched


def test_the_gpus_gemm_form_of_the_convolution_left_matches_torchs_convolution():
    """On a GPU the convolution over the dims left runs as unfold/fold and a float64 GEMM (cuDNN's float64
    convolutions are slow): the same values as torch's convolution, plain and transposed, 1-2 dims, groups."""
    rnd, done = random.Random(2), 0
    while done < 80:
        n, kind, g = rnd.choice([1, 2]), rnd.choice(["conv", "convT"]), rnd.choice([1, 2])
        cin, cout = g * rnd.choice([1, 3]), g * rnd.choice([1, 2])
        k = tuple(rnd.choice([1, 2, 3]) for _ in range(n))
        s, d = tuple(rnd.choice([1, 2, 3]) for _ in range(n)), tuple(rnd.choice([1, 2]) for _ in range(n))
        p = tuple(rnd.choice([0, 1, 2]) for _ in range(n))
        op = tuple(rnd.randrange(0, max(s[j], d[j])) if kind == "convT" else 0 for j in range(n))
        x = torch.randn(2, cin, *[rnd.choice([5, 8]) for _ in range(n)], dtype=torch.float64)
        w = torch.randn(*((cout, cin // g) if kind == "conv" else (cin, cout // g)), *k, dtype=torch.float64)
        try:
            ref = A._kg_conv_call(x, w, None, kind, s, p, d, op, g)
        except RuntimeError:
            continue
        got = A._kg_conv_gemm(x, w, kind, s, p, d, op, g)
        if got is None:                  # an output padding of a stride or more: fold cannot say it
            assert kind == "convT" and any(op[j] >= s[j] for j in range(n))
            continue
        done += 1
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)

def test_non_finite_inputs_land_where_the_references_do():
    rnd = random.Random(1)
    for _ in range(60):
        kind, n = rnd.choice(["conv", "convT"]), rnd.choice([1, 2])
        k, s = tuple(rnd.choice([1, 2, 3]) for _ in range(n)), tuple(rnd.choice([1, 2]) for _ in range(n))
        p, d = tuple(rnd.choice([0, 1, 2]) for _ in range(n)), tuple(rnd.choice([1, 2]) for _ in range(n))
        x = torch.randn(2, 3, *([6] * n))
        x.view(-1)[rnd.randrange(x.numel())] = rnd.choice([float("nan"), float("inf"), -float("inf")])
        w = torch.randn(4, 3, *k) if kind == "conv" else torch.randn(3, 4, *k)
        args = (x, w, None, kind, s, p, d, (0,) * n, 1, [], tuple(range(2, n + 2)), True, False)
        ref, got = A._kg_conv_chain(*args), A.kg_reduced_conv(*args)
        assert torch.equal(ref.isnan(), got.isnan()) and torch.equal(ref.isinf(), got.isinf())


class UpPool(torch.nn.Module):                  # a transposed conv, a scale, a global average pool, then more
    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(6, 8, 3, stride=2, padding=1, output_padding=1)
        self.bias = torch.nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        y = torch.mean(self.up(x) * 0.5, dim=(2, 3), keepdim=True) + self.bias
        return torch.logsumexp(y, dim=1)


class DepthMean(torch.nn.Module):               # a 3-D conv averaged over depth only, a softmax over channels
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(4, 6, 3, padding=1)

    def forward(self, x):
        return torch.softmax(self.conv(x).mean(dim=2, keepdim=True), dim=1)


class LastSum(torch.nn.Module):                 # a grouped, strided 1-D conv summed over its positions
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 6, 5, stride=2, groups=2, bias=False)
        self.register_buffer("s", torch.rand(6, 1) + 0.5)

    def forward(self, x):
        return (2.0 - self.conv(x) / self.s).sum(-1)


def _rewritten(model):
    gm = R.kg_trace(model)
    return gm, A.kg_rewrite_reduce_conv(gm)


@pytest.mark.parametrize("model,shape", [(UpPool, (2, 6, 9, 10)), (DepthMean, (2, 4, 6, 7, 8)),
                                         (LastSum, (3, 4, 21))])
def test_the_rewrite_replaces_the_convolution_and_matches_the_reference(model, shape):
    model = model().double().eval()
    gm, n = _rewritten(model)
    assert n == 1
    assert "kg_reduced_conv" in gm.code and not any(node.op == "call_module" for node in gm.graph.nodes), gm.code
    x = torch.randn(*shape, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), model(x), rtol=1e-10, atol=1e-10)


class DepthMeanOnly(torch.nn.Module):           # the mean itself is the output: its rounding shows whole
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose3d(8, 16, 3, padding=1)

    def forward(self, x):
        return self.conv(x).mean(dim=2)


@pytest.mark.parametrize("model,shape", [(UpPool, (4, 6, 40, 40)), (DepthMeanOnly, (2, 8, 32, 12, 12))])
def test_fp32_error_against_float64_stays_at_the_references(model, shape):
    """The sums and the convolution left are in float64: a sum of o outputs in one float32 convolution output errs
    about sqrt(o) times the reference's mean of o rounded outputs (1.5x the gate's bound on an H100 for a
    ConvTranspose3d averaged over 32 depths)."""
    torch.manual_seed(0)
    model = model().eval()
    gm, n = _rewritten(model)
    assert n == 1
    x = torch.randn(*shape) + 3.0                   # away from zero: the sums' cancellation at work
    with torch.no_grad():
        exact = model.double()(x.double())
        ref_err = (model.float()(x).double() - exact).abs().max()
        got = gm(x)
        got_err = (got.double() - exact).abs().max()
    assert got.dtype == torch.float32
    # the final rounding to float32 (and the log-sum-exp after the mean, in UpPool) is all that is left
    assert got_err <= ref_err + 2 ** -23 * exact.abs().max(), (got_err, ref_err)


def test_not_rewritten_where_the_identity_is_not_one():
    def conv(**kw):
        return torch.nn.Conv2d(3, 4, 3, **kw)

    class Relu(torch.nn.Module):                 # a non-linear step between
        def __init__(self):
            super().__init__()
            self.c = conv()

        def forward(self, x):
            return torch.relu(self.c(x)).mean((2, 3))

    class Channels(torch.nn.Module):             # a reduction over the channels
        def __init__(self):
            super().__init__()
            self.c = conv()

        def forward(self, x):
            return self.c(x).sum(1)

    class Shared(torch.nn.Module):               # the convolution's output used elsewhere too
        def __init__(self):
            super().__init__()
            self.c = conv()

        def forward(self, x):
            y = self.c(x)
            return y.mean((2, 3), keepdim=True) + y

    class Reflect(torch.nn.Module):              # padding other than zeros
        def __init__(self):
            super().__init__()
            self.c = conv(padding=1, padding_mode="reflect")

        def forward(self, x):
            return self.c(x).mean((2, 3))

    class Same(torch.nn.Module):                 # padding="same"
        def __init__(self):
            super().__init__()
            self.c = conv(padding="same")

        def forward(self, x):
            return self.c(x).mean((2, 3))

    for cls in (Relu, Channels, Shared, Reflect, Same):
        assert _rewritten(cls().eval())[1] == 0, cls.__name__


def test_a_call_the_identity_does_not_cover_runs_the_references_ops():
    x, w, b = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4)
    varying = torch.randn(1, 4, 6, 1)                # not constant along the reduced dim 2
    geo = ((1, 1), (0, 0), (1, 1), (0, 0), 1)
    args = (x, w, b, "conv", *geo, [("mul", varying, 0)], (2,), False, True)
    assert A._kg_conv_ok(*args[:11]) is None
    torch.testing.assert_close(A.kg_reduced_conv(*args), A._kg_conv_chain(*args))
    args = (x, w, b, "conv", *geo, [("div", torch.zeros(1, 4, 1, 1), 0)], (2, 3), False, True)   # a zero divisor
    assert A._kg_conv_ok(*args[:11]) is None
    assert A._kg_conv_ok(x, w, b, "conv", *geo, [], (1,)) is None                             # the channels
    assert A._kg_conv_ok(x.half(), w, b, "conv", *geo, [], (2,)) is None                     # mixed dtypes


def test_with_autograd_recording_the_references_ops_give_gradients():
    model = UpPool()
    gm, _ = _rewritten(model)
    x = torch.randn(2, 6, 9, 10, requires_grad=True)
    gm(x).sum().backward()
    assert x.grad is not None and model.up.weight.grad is not None


def test_the_library_proposes_it_and_its_candidate_matches(write):
    src = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.ConvTranspose3d(c_in, c_out, 3, stride=1, padding=1)

    def forward(self, x):
        x = self.conv(x).mean(dim=2, keepdim=True)
        return torch.tanh(x) * 2.0


def get_inputs():
    return [torch.randn(2, 4, 6, 8, 8)]


def get_init_inputs():
    return [4, 6]
'''
    ns: dict = {"__name__": "kg_ref"}
    exec(compile(src, "ref.py", "exec"), ns)                # noqa: S102 - the test's own reference
    model = ns["Model"](4, 6).eval()
    graph = analyse(model, None, REWRITE_FNS)
    assert graph.patterns["reduce-conv"] == 1
    ctx = Context(src, "Model", "cpu", "test", Contract(), graph, (), {})
    by = {s.name: s for s in STRATEGIES}
    assert by["rewrite:reduce-conv"].applies(ctx)
    cand = Library()._make(ctx, [(by["rewrite:reduce-conv"], {})], None, 0)
    cns: dict = {"__name__": "kg_candidate"}
    exec(compile(cand.source, "cand.py", "exec"), cns)       # noqa: S102 - the library's own candidate
    m = cns["ModelNew"](4, 6).eval()
    m.load_state_dict(model.state_dict())
    x = torch.randn(2, 4, 6, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(m(x), model(x), rtol=1e-5, atol=1e-5)
    (gm,) = [v for k, v in vars(m).items() if k.startswith("_kg_gm_")]
    assert "kg_reduced_conv" in gm.code
