"""Roofline: FLOP and byte counts against closed forms, floors on machine models, fraction and rejection."""
import dataclasses

import pytest
import torch
import torch.nn as nn

from kernelgate import roofline, targets
from kernelgate.roofline import Work


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


def test_cpu_memory_term_discounts_the_last_level_cache():
    cpu = targets.Machine("cpu", "cpu", {"fp32": 1e11}, 1e10, l2_bytes=32 << 20)
    small = roofline.floor(Work(0, 0, 16 << 20), cpu)
    assert small.memory_s == 0.0
    big = roofline.floor(Work(0, 0, 64 << 20), cpu)
    assert big.memory_s == pytest.approx((32 << 20) / 1e10) and big.bound == "memory"


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
