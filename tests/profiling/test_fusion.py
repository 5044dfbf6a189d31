"""profiling.fusion: predicted savings of a fusion; the strategy hook."""
import pytest
import torch
import torch.nn as nn

from kernelgate import targets
from kernelgate.profiling import fusion
from kernelgate.profiling.fusion import Fusion

H200 = targets.BUILTIN["h200"]


def test_fusion_estimate_is_monotone_and_ranked():
    base = fusion.fusion_estimate(Fusion("f", 1 << 20, 2), H200)
    assert base.bytes_saved == 2 << 20
    assert base.memory_s == pytest.approx((2 << 20) / H200.bandwidth)
    assert base.launch_s == pytest.approx(2 * H200.launch_overhead_s)
    for more in (Fusion("f", 2 << 20, 2), Fusion("f", 1 << 20, 3), Fusion("f", 1 << 20, 2, reads=2)):
        assert fusion.fusion_estimate(more, H200).predicted_s > base.predicted_s
    ranked = fusion.rank_fusions([Fusion("small", 1 << 10, 1), Fusion("big", 1 << 30, 1),
                                      Fusion("launches", 0, 40)], H200)
    assert [e.name for e in ranked] == ["big", "launches", "small"]
    assert [e.predicted_s for e in ranked] == sorted((e.predicted_s for e in ranked), reverse=True)
    m = ranked[0].measured(before_s=1.0e-3, after_s=0.6e-3)
    assert m.measured_s == pytest.approx(0.4e-3) and m.predicted_s == ranked[0].predicted_s
    assert m.ratio == pytest.approx(0.4e-3 / ranked[0].predicted_s)
    assert set(m.to_json()) >= {"predicted_s", "measured_s", "ratio", "derivation"}
    with pytest.raises(ValueError):
        fusion.fusion_estimate(Fusion("bad", -1, 0), H200)


def test_whole_forward_counts_intermediates_read_by_later_ops():
    class Chain(nn.Module):
        def forward(self, x):
            y = x * 2.0             # intermediate, read once
            z = torch.sigmoid(y)    # intermediate, read twice
            return z * z + y.view(-1).view_as(z)
    x = torch.randn(16, 32)
    f = fusion.whole_forward(Chain(), [x], kernels_per_forward=4)
    # y read by sigmoid and by the add (through views); z read twice by one mul; z*z read by the add
    assert f.intermediate_bytes == 3 * x.numel() * 4
    assert f.launches_removed == 3 and f.reads >= 1


def test_strategy_estimates_price_what_the_source_reports():
    seen = []

    def source(model, inputs):
        seen.append((model, inputs))
        return {"a:fuse": Fusion("a:fuse", 1 << 20, 2), "b:fuse": Fusion("b:fuse", 0, 5)}
    model, inputs = nn.Identity(), [torch.randn(2)]
    est = fusion.strategy_estimates(source, model, inputs, H200)
    assert seen == [(model, inputs)] and set(est) == {"a:fuse", "b:fuse"}
    assert est["a:fuse"] == fusion.fusion_estimate(Fusion("a:fuse", 1 << 20, 2), H200)
    assert fusion.strategy_estimates(lambda m, x: {}, model, inputs, H200) == {}
