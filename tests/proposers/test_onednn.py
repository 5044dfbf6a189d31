"""The CPU's oneDNN rewrite (kernelgate/proposers/library/onednn.py): where it applies, the reference's values and
strides, weights never stale, the reference's modules where the fast path is not verified."""
import copy

import pytest
import torch
import torch.fx as fx
import torch.nn as nn

from kernelgate.proposers.library import fx_rewrites as R
from kernelgate.proposers.library import onednn as O


def _check(model, xs, rewrite, expect_n, atol=1e-5):
    model = model.eval()
    gm = fx.symbolic_trace(copy.deepcopy(model))
    assert rewrite(gm) == expect_n
    with torch.no_grad():
        torch.testing.assert_close(gm(*xs), model(*xs), atol=atol, rtol=1e-5)
    return gm


onednn = pytest.mark.skipif(not O._kg_onednn(), reason="this torch has no oneDNN (mkldnn) CPU kernels")


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
        gm = _check(m, [x], O.kg_rewrite_onednn, 1, atol=1e-4)
        assert "kg_onednn_layer" in gm.code and "self.bn(" not in gm.code
        with torch.no_grad():
            assert gm(x).stride() == m(x).stride()


@onednn
def test_onednn_after_fold_bn_and_for_strided_grouped_convs():
    m = _stats(ConvAct(torch.relu, bn=True, bias=False, stride=2, groups=2)).eval()
    x = torch.randn(3, 8, 11, 9)
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert R.kg_rewrite_fold_bn(gm) == 1 and O.kg_rewrite_onednn(gm) == 1
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
    _check(m, [torch.randn(5, 7, 16)], O.kg_rewrite_onednn, n, atol=1e-5)


@onednn
def test_onednn_weights_never_stale_and_the_reference_path_where_not_verified():
    """Packed (and folded) weights follow writes through .data; autograd and a batch norm in training mode run
    the reference's modules."""
    m = _stats(ConvAct(torch.relu, bn=True)).eval()
    x = torch.randn(2, 8, 10, 12)
    gm = _check(m, [x], O.kg_rewrite_onednn, 1, atol=1e-4)
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
    assert O.kg_rewrite_onednn(gm, channels_last=True) == 2
    assert gm.code.count("kg_channels_last(") == 2 and gm.code.count("kg_contiguous(") == 1
    with torch.no_grad():
        got, want = gm(*xs), m(*xs)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    assert got[0].stride() == want[0].stride() and got[0].is_contiguous()


@onednn
@pytest.mark.parametrize("act", [torch.nn.functional.gelu, torch.sigmoid, torch.tanh, nn.SiLU()])
def test_approximated_activations_run_in_torch_after_the_onednn_call(act):
    """oneDNN's GELU, sigmoid, tanh and SiLU post-ops are approximations (GELU off by 1.2e-6 on [-10, 10], past the
    gate's allowance on extreme values): only exact post-ops are fused; these match torch's activation bit for bit
    on the layer's output."""
    m = LinearAct(act).eval()
    with torch.no_grad():
        m.fc.weight.copy_(torch.eye(32, 16))
        m.fc.bias.zero_()
    gm = fx.symbolic_trace(copy.deepcopy(m))
    assert O.kg_rewrite_onednn(gm) == 1
    x = torch.linspace(-10, 10, 16 * 4001)[: 16 * 4000].reshape(4000, 16)
    with torch.no_grad():
        assert torch.equal(gm(x), m(x))
