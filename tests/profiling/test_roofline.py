"""Roofline: FLOP and byte counts against closed forms, floors on machine models, fraction and rejection."""
import dataclasses

import pytest
import torch
import torch.nn as nn

from kernelgate import targets
from kernelgate.profiling import roofline
from kernelgate.profiling.roofline import Work


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGATE_MACHINES", str(tmp_path / "machines.toml"))
    monkeypatch.setenv("KERNELGATE_CALIBRATION", str(tmp_path / "calibration.json"))


H200 = targets.BUILTIN["h200"]


def test_linear_flops_and_bytes_are_the_closed_forms():
    m, k, n = 8, 64, 32
    work = roofline.count(nn.Linear(k, n), [torch.randn(m, k)])
    assert work.flops == 2 * m * n * k
    assert work.by_dtype == {"fp32": 2 * m * n * k} and work.conv_by_dtype == {}
    # input read once + weight and bias read once + output written once, 4 bytes each
    assert work.min_bytes == 4 * (m * k + (n * k + n) + m * n) == 11392
    assert (work.input_bytes, work.param_bytes, work.output_bytes) == (2048, 8320, 1024)
    assert work.method == "meta"


def test_conv_flops_are_the_closed_form():
    n, cin, cout, h, w, kh, kw = 2, 3, 8, 16, 16, 3, 3
    work = roofline.count(nn.Conv2d(cin, cout, (kh, kw), padding=1), [torch.randn(n, cin, h, w)])
    assert work.flops == 2 * n * cout * h * w * cin * kh * kw
    assert work.conv_by_dtype == {"fp32": work.flops}


def test_batched_matmul_and_attention_flops():
    class Bmm(nn.Module):
        def forward(self, a, b):
            return torch.bmm(a, b)
    assert roofline.count(Bmm(), [torch.randn(4, 16, 32), torch.randn(4, 32, 8)]).flops == 2 * 4 * 16 * 8 * 32

    class Attention(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v)
    b, h, s, d = 2, 4, 128, 64
    q = torch.randn(b, h, s, d)
    work = roofline.count(Attention(), [q, q, q])
    assert work.flops == 4 * b * h * s * s * d                 # QK^T and PV
    assert work.input_bytes == q.nbytes                        # one tensor passed three times is read once


def test_elementwise_flops_are_counted_separately():
    class Chain(nn.Module):
        def forward(self, x):
            return torch.relu(x * 2.0).sum(dim=1)
    work = roofline.count(Chain(), [torch.randn(8, 16)])
    assert work.flops == 0
    assert work.elementwise_flops == 128 + 128 + 128            # mul, relu: per output; sum: per input element
    assert work.min_bytes == 4 * (128 + 8)


def test_unused_inputs_and_parameters_are_not_bytes_that_must_move():
    class Partial(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(16, 16, bias=False)
            self.unused = nn.Linear(100, 100)
        def forward(self, x, ignored):
            return self.used(x)
    work = roofline.count(Partial(), [torch.randn(4, 16), torch.randn(1000)])
    assert work.param_bytes == 16 * 16 * 4 and work.input_bytes == 4 * 16 * 4


def test_tied_parameters_count_once_and_dtypes_are_attributed():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(32, 32, bias=False)
            self.b = nn.Linear(32, 32, bias=False)
            self.b.weight = self.a.weight
        def forward(self, x):
            return self.b(self.a(x))
    work = roofline.count(Tied().to(torch.bfloat16), [torch.randn(4, 32, dtype=torch.bfloat16)])
    assert work.param_bytes == 32 * 32 * 2
    assert work.by_dtype == {"bf16": 2 * (2 * 4 * 32 * 32)}


def test_data_dependent_forward_falls_back_to_a_real_run():
    class Branchy(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x
    work = roofline.count(Branchy(), [torch.ones(10)])
    assert work.method == "cpu" and work.min_bytes == 80


def test_elementwise_op_is_memory_bound_on_h200():
    x = torch.empty(4096, 4096, device="meta")
    work = roofline.count(nn.ReLU(), [x])
    f = roofline.floor(work, H200)
    assert f.bound == "memory"
    assert f.memory_s == pytest.approx(2 * 4096 * 4096 * 4 / 4.8e12)
    assert f.floor_s == f.memory_s == f.safe_s and "4.8 TB/s" in f.derivation


def test_large_gemm_is_compute_bound_on_h200():
    n = 8192
    a = torch.empty(n, n, dtype=torch.bfloat16, device="meta")

    class MatMul(nn.Module):
        def forward(self, a, b):
            return a @ b
    work = roofline.count(MatMul(), [a, a])
    f = roofline.floor(work, H200)
    assert f.bound == "compute"
    assert f.compute_s == pytest.approx(2 * n**3 / 989.5e12)
    assert f.floor_s == f.compute_s > f.memory_s
    assert "bf16" in f.derivation and "compute-bound" in f.derivation


def test_fp32_gemm_uses_the_non_tensor_core_rate_unless_tf32_is_permitted():
    work = Work(flops=2 * 8192**3, elementwise_flops=0, min_bytes=3 * 8192**2 * 4, by_dtype={"fp32": 2 * 8192**3})
    assert roofline.floor(work, H200).compute_s == pytest.approx(2 * 8192**3 / 67e12)
    tf32 = roofline.floor(work, H200, precision="tf32")
    assert tf32.compute_s == pytest.approx(2 * 8192**3 / 494.5e12) and "precision tf32" in tf32.derivation
    assert tf32.precision == "tf32"


def test_fp32_conv_on_a_gpu_may_run_in_tf32():
    flops = 10**12
    work = Work(flops, 0, 10**6, by_dtype={"fp32": flops}, conv_by_dtype={"fp32": flops})
    assert roofline.floor(work, H200).compute_s == pytest.approx(flops / 494.5e12)
    assert roofline.floor(work, H200, precision="fp32").compute_s == pytest.approx(flops / 67e12)
    cpu = dataclasses.replace(targets.detect("cpu"), l2_bytes=None)
    assert roofline.floor(work, cpu).compute_s == pytest.approx(flops / cpu.rate("fp32"))


def test_unknown_rates_and_bandwidth_drop_their_terms():
    unknown = targets.Machine("mystery", "gpu")
    work = Work(10**9, 10**6, 10**6, by_dtype={"fp32": 10**9})
    f = roofline.floor(work, unknown)
    assert (f.compute_s, f.memory_s, f.floor_s, f.bound) == (0.0, 0.0, 0.0, "unknown")
    assert "term omitted" in f.derivation
    no_fp8 = roofline.floor(Work(10**12, 0, 0, by_dtype={"fp8": 10**12}), targets.BUILTIN["a100"])
    assert no_fp8.compute_s == 0.0 and "no fp8 rate" in no_fp8.derivation


# a host like the 2-core EPYC VM these tests run on: 32 MiB of L3, 80 GB/s assumed DRAM bandwidth
SMALL_CPU = targets.Machine("cpu", "cpu", {"fp32": 448e9}, 80e9, 2, 32 << 20)


def test_cpu_memory_term_of_data_held_in_cache_is_not_zero():
    """Issue 12 item 10: a LayerNorm reading and writing 32 MB printed "memory term 51.2 ns" and a softmax
    over 8 MB "0 ns" (the last-level cache was subtracted as if it were free), so every CPU bottleneck line
    said compute-bound and the floor check could never fire on a CPU."""
    ln = roofline.floor(roofline.count(nn.LayerNorm(512), [torch.randn(8192, 512)]), SMALL_CPU)   # 16 + 16 MiB
    moved = 2 * (16 << 20) + 2 * 512 * 4
    assert moved / 1e12 < ln.memory_s < moved / 10e9          # between 1 TB/s and 10 GB/s: tens of us, not ns
    assert ln.bound == "memory" and "cache" in ln.derivation
    sm = roofline.floor(roofline.count(nn.Softmax(-1), [torch.randn(2048, 1024)]), SMALL_CPU)     # 8 + 8 MiB
    assert sm.memory_s > (16 << 20) / 1e12 and sm.bound == "memory"
    # the floor check can fire: a LayerNorm over 32 MB in a microsecond is impossible on this machine
    assert roofline.below_floor(ln.safe_s, 1e-6)


def test_cpu_memory_term_beyond_the_caches_is_at_dram_bandwidth():
    big = roofline.floor(Work(0, 0, 128 << 20), SMALL_CPU)
    cache = SMALL_CPU.l2_bytes
    assert big.memory_s == pytest.approx(((128 << 20) - cache) / SMALL_CPU.bandwidth)
    # every byte also passes the cores' cache ports: that term binds when little spills to DRAM
    fits = roofline.floor(Work(0, 0, 16 << 20), SMALL_CPU)
    assert fits.memory_s == pytest.approx((16 << 20) / targets.cpu_cache_bandwidth(SMALL_CPU))
    assert fits.memory_s > 0 and fits.bound == "memory"


def test_a_measured_cpu_bandwidth_gets_a_margin():
    """A calibrated bandwidth is a median copy (read + write counted, stores with read-for-ownership): a
    kernel with streaming stores can beat it, so the floor uses it with a margin to stay a lower bound."""
    measured = dataclasses.replace(SMALL_CPU, bandwidth=40e9, source="measured", origins={"bandwidth": "measured"})
    f = roofline.floor(Work(0, 0, 256 << 20), measured)
    spill = (256 << 20) - SMALL_CPU.l2_bytes
    assert f.memory_s == pytest.approx(spill / (40e9 * roofline.CPU_MEASURED_MARGIN))
    assert "margin" in f.derivation


def _min_s(fn, reps=12):
    import time
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("mib", [1, 4, 16, pytest.param(64, marks=pytest.mark.slow)])
def test_honest_cpu_ops_are_never_below_the_floor(mib):
    """The floor check rejects a median below 0.9x the memory floor: on this host the fastest of a dozen
    calls of plain torch ops (in cache or not) must stay above it, or honest candidates would be rejected."""
    cpu = targets.cpu_model()
    x = torch.randn(mib << 18)
    out = torch.empty_like(x)

    class Copy(nn.Module):
        def forward(self, a):
            return out.copy_(a)

    class Scale(nn.Module):
        def forward(self, a):
            return torch.mul(a, 2.0, out=out)

    class InPlace(nn.Module):
        def forward(self, a):
            return a.mul_(1.0)

    rows = x.view(-1, 1024)
    cases = [(Copy(), [x]), (Scale(), [x]), (InPlace(), [x]), (nn.LayerNorm(1024), [rows]), (nn.Softmax(-1), [rows])]
    with torch.no_grad():
        for model, args in cases:
            f = roofline.floor(roofline.count(model, args), cpu)
            took = _min_s(lambda: model(*args))
            assert not roofline.below_floor(f.safe_s, took), (type(model).__name__, mib, took, f.derivation)


def test_fraction_and_below_floor():
    assert roofline.fraction(1e-3, 2e-3) == 0.5
    assert roofline.fraction(1e-3, 1e-3) == 1.0
    assert roofline.fraction(0.0, 1e-3) == 0.0
    assert not roofline.below_floor(1e-3, 0.95e-3)
    assert roofline.below_floor(1e-3, 0.89e-3)
    assert not roofline.below_floor(0.0, 1e-9)
    assert roofline.below_floor(1e-3, 0.97e-3, slack=1.0)


@pytest.mark.gpu
def test_count_on_cuda_inputs():
    work = roofline.count(nn.Linear(64, 32).cuda(), [torch.randn(8, 64, device="cuda")])
    assert work.flops == 2 * 8 * 32 * 64 and work.min_bytes == 11392
    f = roofline.floor(work, targets.detect("cuda"))
    assert f.floor_s >= 0 and f.derivation
