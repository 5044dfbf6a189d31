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


# ---------------------------------------------------------------- oneDNN conv / linear + activation (CPU)

onednn = pytest.mark.skipif(not R._kg_onednn(), reason="this torch has no oneDNN (mkldnn) CPU kernels")


class ConvAct(nn.Module):
    def __init__(self, act, bn=False, bias=True, stride=1, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, stride=stride, bias=bias, groups=groups)
        self.bn = nn.BatchNorm2d(16) if bn else None
        self.act = act

    def forward(self, x):
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        return self.act(y) if self.act is not None else y


def _stats(m):
    with torch.no_grad():
        for b in m.modules():
            if isinstance(b, nn.BatchNorm2d):
                b.running_mean.normal_()
                b.running_var.uniform_(0.5, 2.0)
                b.weight.normal_()
                b.bias.normal_()
    return m


@onednn
@pytest.mark.parametrize("act", [None, torch.relu, nn.ReLU(inplace=True), torch.sigmoid, nn.GELU(),
                                 nn.GELU(approximate="tanh"), nn.SiLU(), nn.Hardswish(), nn.LeakyReLU(0.2)])
@pytest.mark.parametrize("bn", [False, True])
def test_onednn_conv_act_matches_with_the_reference_strides(act, bn):
    m = _stats(ConvAct(act, bn=bn)).eval()
    for x in (torch.randn(2, 8, 10, 12), torch.randn(2, 8, 10, 12).contiguous(memory_format=torch.channels_last)):
        gm = _check(m, [x], R.kg_rewrite_onednn, 1, atol=1e-4)
        assert "kg_onednn_layer" in gm.code and "self.bn(" not in gm.code
        with torch.no_grad():
            assert gm(x).stride() == m(x).stride()


@onednn
def test_onednn_after_fold_bn_and_for_strided_grouped_convs():
    m = _stats(ConvAct(torch.relu, bn=True, bias=False, stride=2, groups=2)).eval()
    x = torch.randn(3, 8, 11, 9)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert R.kg_rewrite_fold_bn(gm) == 1 and R.kg_rewrite_onednn(gm) == 1
    assert "kg_conv_bn" not in gm.code
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-4, rtol=1e-5)


class LinearAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x)) * 0.5 if self.act is not None else self.fc(x)


@onednn
@pytest.mark.parametrize("act, n", [(torch.relu, 1), (torch.nn.functional.gelu, 1), (nn.Tanh(), 1), (None, 0)])
def test_onednn_linear_act_only_with_an_activation(act, n):
    m = LinearAct(act).eval()
    _check(m, [torch.randn(5, 7, 16)], R.kg_rewrite_onednn, n, atol=1e-5)


@onednn
def test_onednn_weights_never_stale_and_the_reference_path_where_not_verified():
    """Packed (and folded) weights follow writes through .data; autograd and a batch norm in training mode run
    the reference's modules."""
    m = _stats(ConvAct(torch.relu, bn=True)).eval()
    x = torch.randn(2, 8, 10, 12)
    gm = _check(m, [x], R.kg_rewrite_onednn, 1, atol=1e-4)
    for edit in (lambda: m.conv.weight.data.mul_(2.0), lambda: m.bn.running_var.data.copy_(torch.full((16,), 3.0)),
                 lambda: m.conv.bias.data.zero_()):
        edit()
        gm.load_state_dict(m.state_dict())
        with torch.no_grad():
            torch.testing.assert_close(gm(x), m(x), atol=1e-4, rtol=1e-5)
    xg = x.clone().requires_grad_()
    y = gm(xg)
    assert y.grad_fn is not None                      # recorded: the reference's modules ran
    y.sum().backward()
    assert xg.grad is not None and xg.grad.shape == x.shape
    gm.train()
    m.train()
    with torch.no_grad():
        torch.testing.assert_close(gm(x), m(x), atol=1e-4, rtol=1e-5)     # batch statistics, as the reference


@onednn
def test_onednn_in_channels_last_from_entry_to_exit():
    """The variant that converts 4-D inputs once at the entry and 4-D outputs back at the exit: same values,
    the reference's strides, and the conversions appear once each."""
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = ConvAct(torch.relu, bn=True)
            self.b = nn.Conv2d(16, 8, 1)

        def forward(self, x, scale):
            return self.b(torch.max_pool2d(self.a(x), 2)) * scale, x.mean()
    m = _stats(Two()).eval()
    xs = [torch.randn(2, 8, 10, 12), torch.tensor(0.5)]
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert R.kg_rewrite_onednn(gm, channels_last=True) == 2
    assert gm.code.count("kg_channels_last(") == 2 and gm.code.count("kg_contiguous(") == 1
    with torch.no_grad():
        got, want = gm(*xs), m(*xs)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    assert got[0].stride() == want[0].stride() and got[0].is_contiguous()
