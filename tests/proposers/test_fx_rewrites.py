"""Each rewrite changes the graph where it applies, leaves it alone where it does not, and keeps the math."""
import copy
import math

import pytest
import torch
import torch.fx as fx
import torch.nn as nn

from kernelgate.proposers.library import fx_rewrites as R


def _check(model, xs, rewrite, expect_n, atol=1e-5):
    model = model.eval()
    gm = fx.symbolic_trace(copy.deepcopy(model))
    n = rewrite(gm)
    assert n == expect_n
    with torch.no_grad():
        torch.testing.assert_close(gm(*xs), model(*xs), atol=atol, rtol=1e-5)
    return gm


class Pool(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.pool = nn.AvgPool2d(**kw)

    def forward(self, x):
        return self.pool(x) * 2


@pytest.mark.parametrize("kw, n", [
    (dict(kernel_size=2), 1),
    (dict(kernel_size=3, stride=2, padding=1), 1),
    (dict(kernel_size=3, stride=1, padding=1, count_include_pad=False), 0),
    (dict(kernel_size=3, ceil_mode=True), 0),
])
def test_avgpool_as_conv(kw, n):
    _check(Pool(**kw), [torch.randn(2, 5, 11, 13)], R.kg_rewrite_avgpool, n)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.lin = nn.Linear(8, 4)
        self.bn1 = nn.BatchNorm1d(4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.bn1(self.lin(y))


def test_fold_bn_and_refold_after_new_parameters():
    m = ConvBN().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        m.bn.running_var.mul_(2.0)
    x = torch.randn(4, 3, 9, 9)
    gm = _check(m, [x], R.kg_rewrite_fold_bn, 2)
    assert "kg_conv_bn" in gm.code
    # new parameters loaded in place must be picked up (cached folds keyed on versions)
    sd = {k: v + 0.05 if v.is_floating_point() else v for k, v in m.state_dict().items()}
    m.load_state_dict(sd)
    gm.load_state_dict(sd)
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-5, rtol=1e-5)


class Attn(nn.Module):
    def __init__(self, d, div):
        super().__init__()
        self.d, self.div = d, div

    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1)
        s = s / (self.d ** 0.5) if self.div else s * (1.0 / self.d ** 0.5)
        return torch.softmax(s, dim=-1) @ v


class NotAttn(nn.Module):
    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1)
        return torch.softmax(s, dim=-2) @ v            # softmax over the wrong axis: not attention


@pytest.mark.parametrize("div", [True, False])
def test_sdpa(div):
    xs = [torch.randn(2, 3, 16, 8) for _ in range(3)]
    gm = _check(Attn(8, div), xs, R.kg_rewrite_sdpa, 1)
    assert "kg_sdpa" in gm.code and "softmax" not in gm.code


def test_sdpa_leaves_other_patterns():
    _check(NotAttn(), [torch.randn(2, 16, 8) for _ in range(3)], R.kg_rewrite_sdpa, 0)


class TwoLinear(nn.Module):
    def __init__(self, a, b, c):
        super().__init__()
        self.l1, self.l2 = nn.Linear(a, b), nn.Linear(b, c)

    def forward(self, x):
        return self.l2(self.l1(x))


def test_merge_linear_only_when_it_saves_work():
    _check(TwoLinear(64, 256, 64), [torch.randn(8, 64)], R.kg_rewrite_merge_linear, 1, atol=1e-4)
    _check(TwoLinear(256, 16, 256), [torch.randn(8, 256)], R.kg_rewrite_merge_linear, 0)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)
        self.conv = nn.Conv2d(3, 4, 3)
        self.shared = nn.Linear(8, 8)

    def forward(self, x, img):
        y = self.lin(x) * 0.5
        z = 2.0 * self.lin(x)
        s = self.shared(y)
        w = s / 4 + s                          # not folded: the layer output has two users
        return y + z, self.conv(img) / 3.0, w


def test_fold_scale():
    gm = _check(Scaled(), [torch.randn(5, 16), torch.randn(2, 3, 9, 9)], R.kg_rewrite_fold_scale, 3)
    assert sum(n.target is R.kg_scaled_layer for n in gm.graph.nodes) == 3


class ShapeScaled(nn.Module):
    """The common idiom: the scale computed from the head dimension at run time."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1)
        if self.how == "sqrt-shape":
            s = s / math.sqrt(q.shape[-1])
        elif self.how == "size-pow":
            s = s * q.size(-1) ** -0.5
        else:                                   # read from the data: not a shape-only scale
            s = s / q.abs().amax()
        return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("how, n", [("sqrt-shape", 1), ("size-pow", 1), ("data", 0)])
def test_sdpa_with_a_scale_from_the_shape(how, n):
    xs = [torch.randn(2, 3, 16, 8) for _ in range(3)]
    gm = _check(ShapeScaled(how), xs, R.kg_rewrite_sdpa, n)
    if n:
        assert "kg_sdpa" in gm.code
        ys = [torch.randn(1, 2, 5, 32) for _ in range(3)]          # another head dim: the scale follows it
        torch.testing.assert_close(gm(*ys), ShapeScaled(how)(*ys), atol=1e-5, rtol=1e-5)


class Idioms(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how

    def forward(self, x):
        if self.how == "silu":
            return x * torch.sigmoid(x)
        if self.how == "silu-rev":
            return torch.sigmoid(x).mul(x) + 1.0
        if self.how == "gelu-pow":
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))
        if self.how == "gelu-cube":
            return x * 0.5 * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
        if self.how == "not-gelu":                      # a different constant: another function
            return 0.5 * x * (1.0 + torch.tanh(0.8 * (x + 0.044715 * torch.pow(x, 3))))
        s = torch.sigmoid(x)
        return x * s + s                                 # the sigmoid is used again: left alone


@pytest.mark.parametrize("how, n, fn", [("silu", 1, "silu"), ("silu-rev", 1, "silu"), ("gelu-pow", 1, "gelu"),
                                        ("gelu-cube", 1, "gelu"), ("not-gelu", 0, None), ("shared", 0, None)])
def test_activation_idioms(how, n, fn):
    x = torch.randn(64, 33) * 4
    gm = _check(Idioms(how), [x], R.kg_rewrite_idioms, n, atol=2e-6)
    if fn:
        assert fn in gm.code and "torch.tanh" not in gm.code and "sigmoid" not in gm.code
