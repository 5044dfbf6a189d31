"""rewrite:reduce-linear (kernelgate/proposers/library/fx_algebra.py): a linear map whose output features are summed
or averaged, through feature-wise scales and shifts, as one matrix-vector product; the reference's own ops wherever
the identity does not hold for the tensors of a call."""
import torch
import torch.nn.functional as F

from kernelgate.graph import analyse
from kernelgate.proposers import Context
from kernelgate.proposers.library import fx_algebra as A
from kernelgate.proposers.library import fx_rewrites as R
from kernelgate.proposers.library.library import REWRITE_FNS, STRATEGIES, Library
from kernelgate.records import Contract

torch.manual_seed(0)


class LinearSum(torch.nn.Module):                   # nn.Linear, a divide, a sum keeping the dim, a scale
    def __init__(self, k=48, n=40):
        super().__init__()
        self.lin = torch.nn.Linear(k, n)

    def forward(self, x):
        y = self.lin(x) / 2
        return torch.sum(y, dim=1, keepdim=True) * 1.5


class MatmulT(torch.nn.Module):                     # matmul with W.T, a scalar on the left, a feature vector
    def __init__(self, k=48, n=40):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k))
        self.shift = torch.nn.Parameter(torch.randn(n))

    def forward(self, x):
        y = 3.0 * torch.matmul(x, self.weight.T)
        y = y - self.shift
        return y.mean(-1)


class MatmulPlain(torch.nn.Module):                 # x @ W (W [in, out]), operand first in a subtraction
    def __init__(self, k=48, n=40):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(k, n))
        self.register_buffer("s", torch.rand(1, n) + 0.5)

    def forward(self, x):
        return (1.0 - (x @ self.w) * self.s).sum(-1)


class Functional(torch.nn.Module):                  # F.linear, division by a feature vector, 3-D input
    def __init__(self, k=48, n=40):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(n, k))
        self.b = torch.nn.Parameter(torch.randn(n))
        self.register_buffer("d", torch.rand(n) + 0.5)

    def forward(self, x):
        return torch.mean(F.linear(x, self.w, self.b) / self.d, dim=2, keepdim=True)


def _rewritten(model):
    gm = R.kg_trace(model)
    return gm, A.kg_rewrite_reduce_linear(gm)


def test_the_identity_replaces_the_gemm_and_matches_the_reference_in_float64():
    for model, shape in ((LinearSum(), (16, 48)), (MatmulT(), (16, 48)), (MatmulPlain(), (16, 48)),
                         (Functional(), (4, 5, 48))):
        model = model.double().eval()
        gm, n = _rewritten(model)
        assert n == 1, type(model).__name__
        assert not any(node.op == "call_module" or getattr(node.target, "__name__", "") in ("linear", "matmul")
                       for node in gm.graph.nodes), gm.code
        x = torch.randn(*shape, dtype=torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(gm(x), model(x), rtol=1e-10, atol=1e-10)


def test_fp32_error_against_float64_stays_at_the_references():
    model = LinearSum(512, 1024).eval()
    gm, n = _rewritten(model)
    assert n == 1
    x = torch.randn(64, 512)
    with torch.no_grad():
        exact = model.double()(x.double())
        ref_err = (model.float()(x).double() - exact).abs().max()
        got_err = (gm(x).double() - exact).abs().max()
    assert got_err <= 4 * ref_err + 1e-6 * exact.abs().max(), (got_err, ref_err)


def test_not_rewritten_where_the_identity_is_not_one():
    class Relu(torch.nn.Module):                    # a non-linear step between
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 6)

        def forward(self, x):
            return torch.relu(self.lin(x)).sum(-1)

    class Shared(torch.nn.Module):                  # the GEMM's output also used elsewhere
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 6)

        def forward(self, x):
            y = self.lin(x)
            return y.sum(-1, keepdim=True) + y

    class FromOutput(torch.nn.Module):              # an operand computed from the GEMM's own output
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 6)

        def forward(self, x):
            y = self.lin(x)
            return (y * y).sum(-1)

    class Quotient(torch.nn.Module):                # a constant divided by the features
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 6)

        def forward(self, x):
            return (2.0 / self.lin(x)).sum(-1)

    for cls in (Relu, Shared, FromOutput, Quotient):
        assert _rewritten(cls().eval())[1] == 0, cls.__name__


def test_a_call_the_identity_does_not_cover_runs_the_references_ops():
    w, b = torch.randn(6, 8), torch.randn(6)
    x = torch.randn(5, 8)
    cases = [
        (x, w, b, "linear", (), 0, False, False),                               # over the batch, not the features
        (x, w, b, "linear", (("mul", torch.randn(5, 1), 0),), -1, False, False),    # varies along the batch
        (x, w, b, "linear", (("div", 0.0, 0),), -1, True, False),               # a zero divisor
        (x, w, b, "linear", (("add", torch.randn(1, 1, 6), 0),), -1, False, True),  # broadcasts to more dims
        (x, w.double(), b, "linear", (), -1, False, False),                     # mixed dtypes
    ]
    for args in cases:
        if args[1].dtype != x.dtype:
            continue
        assert not A._kg_alg_ok(*args[:6])
        torch.testing.assert_close(A.kg_reduced_linear(*args), A._kg_alg_chain(*args), rtol=0, atol=0,
                                   equal_nan=True)
    assert not A._kg_alg_ok(x, w.double(), b, "linear", (), -1)


def test_weights_edited_in_place_are_used_at_the_next_call():
    model = LinearSum(16, 12).eval()
    gm, _ = _rewritten(model)
    x = torch.randn(4, 16)
    with torch.no_grad():
        gm(x)
        model.lin.weight.data.mul_(2.0)             # no version bump through .data
        model.lin.bias.data.copy_(torch.randn(12))
        torch.testing.assert_close(gm(x), model(x), rtol=1e-5, atol=1e-5)


def test_with_autograd_recording_the_references_ops_give_gradients():
    model = LinearSum(16, 12)
    gm, _ = _rewritten(model)
    x = torch.randn(4, 16, requires_grad=True)
    gm(x).sum().backward()
    g = model.lin.weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(g, model.lin.weight.grad)


def test_the_library_proposes_it_and_its_candidate_matches(write):
    src = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k, n):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(n, k))

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        return x * 1.5


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32, 24]
'''
    ns: dict = {"__name__": "kg_ref"}
    exec(compile(src, "ref.py", "exec"), ns)                # noqa: S102 - the test's own reference
    model = ns["Model"](32, 24).eval()
    graph = analyse(model, None, REWRITE_FNS)
    assert graph.patterns["reduce-linear"] == 1
    ctx = Context(src, "Model", "cpu", "test", Contract(), graph, (), {})
    by = {s.name: s for s in STRATEGIES}
    assert by["rewrite:reduce-linear"].applies(ctx)
    cand = Library()._make(ctx, [(by["rewrite:reduce-linear"], {})], None, 0)
    cns: dict = {"__name__": "kg_candidate"}
    exec(compile(cand.source, "cand.py", "exec"), cns)       # noqa: S102 - the library's own candidate
    m = cns["ModelNew"](32, 24).eval()
    m.load_state_dict(model.state_dict())
    x = torch.randn(8, 32)
    with torch.no_grad():
        torch.testing.assert_close(m(x), model(x), rtol=1e-5, atol=1e-4)
    (gm,) = [v for k, v in vars(m).items() if k.startswith("_kg_gm_")]
    assert "kg_reduced_linear" in gm.code


class Triangles(torch.nn.Module):                   # the kept triangle of a product, by function and by method
    def forward(self, a, b):
        return torch.tril(torch.matmul(a, b)), (a @ b).triu(1), torch.tril(a @ b, diagonal=-5)


def test_the_kept_triangle_of_a_product_is_computed_alone_and_exactly():
    gm = R.kg_trace(Triangles())
    assert A.kg_rewrite_triangular_matmul(gm) == 3
    assert "kg_tri_matmul" in gm.code and "matmul" not in gm.code.replace("kg_tri_matmul", "")
    for m, k, n in ((96, 40, 96), (130, 64, 70), (40, 8, 200)):
        a, b = torch.randn(m, k, dtype=torch.float64), torch.randn(k, n, dtype=torch.float64)
        for got, want in zip(gm(a, b), Triangles()(a, b)):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_the_triangle_runs_the_references_ops_where_it_does_not_apply():
    a, b = torch.randn(3, 40, 8), torch.randn(8, 40)              # batched: not 2-D
    torch.testing.assert_close(A.kg_tri_matmul(a, b, True), torch.tril(a @ b), rtol=0, atol=0)
    a, b = torch.randn(6, 8), torch.randn(8, 6)                   # fewer rows than blocks
    torch.testing.assert_close(A.kg_tri_matmul(a, b, False, 2), torch.triu(a @ b, 2), rtol=0, atol=0)
    a = torch.randn(64, 16, requires_grad=True)                   # autograd records: the reference's ops
    b = torch.randn(16, 64)
    A.kg_tri_matmul(a, b, True).sum().backward()
    torch.testing.assert_close(a.grad, torch.tril(torch.ones(64, 64)) @ b.t())


def test_the_library_proposes_the_triangle():
    ctx = Context("", "Model", "cuda", "test", Contract(), analyse(Triangles(), None, REWRITE_FNS), (), {})
    assert ctx.graph.patterns["triangular-matmul"] == 3
    assert {s.name for s in STRATEGIES if s.applies(ctx)} >= {"rewrite:triangular-matmul"}


def test_a_triangle_of_something_else_is_not_rewritten():
    class Other(torch.nn.Module):
        def forward(self, a, b):
            y = a @ b
            return torch.tril(y + 1), torch.triu(torch.relu(a)), torch.tril(y) + y   # y used twice
    assert A.kg_rewrite_triangular_matmul(R.kg_trace(Other())) == 0
