"""`kernelgate profile` end to end (api.profile, the CLI): launch records, bottleneck lines, fingerprints and
their distance, the fusion estimate. The profiling package's parts are tested in tests/profiling/."""
import dataclasses
import json

import pytest
import torch

from kernelgate import api
from kernelgate.cli import main
from kernelgate.profiling import bottleneck, fingerprint
from kernelgate.profiling.records import Launch, Profile, Report, Side

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x):
        return self.ln(torch.nn.functional.gelu(self.fc(x))) + x
def get_inputs():
    return [torch.randn(32, 64)]
def get_init_inputs():
    return [64]
"""
CAND = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x):
        y = torch.addmm(self.fc.bias, x, self.fc.weight.t())
        y = 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))
        return torch.layer_norm(y, y.shape[-1:], self.ln.weight, self.ln.bias) + x
"""
CRASHES = """
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x):
        raise RuntimeError("boom")
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGATE_MACHINES", str(tmp_path / "machines.toml"))
    monkeypatch.setenv("KERNELGATE_CALIBRATION", str(tmp_path / "calibration.json"))


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ end to end on the CPU

@pytest.mark.slow
def test_api_profile_gives_cpu_op_records(write):
    ref = write("ref.py", REF)
    rep = api.profile(ref, target="cpu", warmup=1, forwards=3)
    p = rep.reference.profile
    assert rep.candidate is None and rep.distance is None and rep.exit_code == 0
    assert p.forwards == 3 and not p.kernels_applicable
    names = [x.name for x in p.launches if x.forward == 0]
    assert names == ["aten::linear", "aten::gelu", "aten::layer_norm", "aten::add"]
    assert all(x.duration_us > 0 and x.grid is None for x in p.launches)
    assert p.kernels_per_forward == 4 and 0.0 <= p.gap_share < 1.0
    assert rep.reference.bottleneck.kind in bottleneck.CLASSES
    assert rep.reference.fingerprint.basis == "ops"
    assert rep.reference.fusion is not None and rep.reference.fusion.launches_removed == 3
    assert rep.floor is not None


@pytest.mark.slow
def test_cli_profile_json_end_to_end(write, capsys):
    ref, cand = write("ref.py", REF), write("cand.py", CAND)
    rc, out, _ = run(capsys, "profile", ref, cand, "--json", "--forwards", "2", "--warmup", "1")
    assert rc == 0
    doc = json.loads(out)
    assert doc["status"] == "ok" and doc["target"] == "cpu" and doc["floor"]["bound"] in ("memory", "compute")
    for side in ("reference", "candidate"):
        s = doc[side]
        assert s["error"] is None
        assert s["launches"]["kernels_applicable"] is False and s["launches"]["forwards"] == 2
        assert s["launches"]["records"] and s["bottleneck"]["line"]
        assert s["fingerprint"]["basis"] == "ops"
    assert "aten::addmm" in doc["candidate"]["fingerprint"]["kernels"]
    assert doc["reference"]["fusion_estimate"]["predicted_s"] > 0
    d = doc["distance"]
    assert d["basis"] == "ops" and 0.0 < d["value"] < 1.0
    rc, out, _ = run(capsys, "profile", ref, "--forwards", "1", "--warmup", "0")
    assert rc == 0 and "reference (Model):" in out and "fingerprint: ops" in out


def test_profile_error_paths(write, capsys, tmp_path):
    ref = write("ref.py", REF)
    rc, out, _ = run(capsys, "profile", str(tmp_path / "missing.py"), "--json")
    assert rc == 2 and json.loads(out)["status"] == "error" and "no such file" in json.loads(out)["message"]
    rc, _, err = run(capsys, "profile", ref, str(tmp_path / "nope.py"))
    assert rc == 2 and "no such candidate file" in err
    rc, _, err = run(capsys, "profile", ref, "--forwards", "0")
    assert rc == 2 and "forwards >= 1" in err
    rc, _, _ = run(capsys, "profile")
    assert rc == 2
    if not torch.cuda.is_available():
        rc, out, _ = run(capsys, "profile", ref, "--target", "cuda", "--json")
        doc = json.loads(out)
        assert rc == 2 and doc["reason"] == "no_device" and "CUDA" in doc["message"]


@pytest.mark.slow
def test_candidate_that_crashes_is_reported_not_raised(write, capsys):
    ref, bad = write("ref.py", REF), write("bad.py", CRASHES)
    rc, out, _ = run(capsys, "profile", ref, bad, "--json", "--forwards", "1", "--warmup", "0")
    doc = json.loads(out)
    assert rc == 1 and doc["status"] == "error"
    assert "boom" in doc["candidate"]["error"] and doc["distance"] is None
    assert doc["reference"]["error"] is None


# ------------------------------------------------------------------ GPU

TRITON_CAND = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_one_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        add_one_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
"""
ADD_ONE_REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x + 1.0
def get_inputs():
    return [torch.randn(1 << 20)]
def get_init_inputs():
    return []
"""


@pytest.mark.gpu
def test_gpu_profile_records_triton_and_aten_kernels(write):
    ref, cand = write("ref.py", ADD_ONE_REF), write("cand.py", TRITON_CAND)
    rep = api.profile(ref, cand, target="cuda", warmup=2, forwards=3)
    r, c = rep.reference.profile, rep.candidate.profile
    assert r.kernels_applicable and r.kernels_per_forward == 1
    assert c.kernels_per_forward == 1
    k = next(x for x in c.launches if x.kind == "kernel")
    assert k.name == "add_one_kernel" and k.grid == ((1 << 20) // 1024, 1, 1) and k.registers
    assert rep.candidate.fingerprint.basis in ("sass", "ptx", "ttgir")
    assert rep.distance is not None and rep.distance.basis == "launches" and rep.distance.value == 1.0
    doc = dataclasses.asdict(rep.reference.profile)
    assert doc["sm_count"]


def prof(kernels, wall_us, busy_us, device="cuda", sm_count=132, forwards=1):
    recs = tuple(Launch(n, "kernel" if device != "cpu" else "op", f, 0.0, d, grid=g, block=(128, 1, 1) if g else None)
                 for f in range(forwards) for n, d, g in kernels)
    return Profile(device, forwards, recs, (wall_us,) * forwards, (busy_us,) * forwards, sm_count)


def test_cpu_profile_text_has_readable_times_and_no_gpu_columns():
    """Issue 12 item 9: `profile` on a CPU printed `1.418e+05 us` and grid/block/regs/smem columns that
    only a GPU fills."""
    from kernelgate.cli import format_profile
    p = prof([("aten::softmax", 90_000.0, None), ("aten::layer_norm", 50_000.0, None)], wall_us=141_800.0,
             busy_us=140_000.0, device="cpu")
    side = Side("reference", "ref.py", "Model", p, bottleneck.classify(None, p), fingerprint.build(p))
    text = format_profile(Report("ref.py", "cpu", "cpu", "cpu", None, side))
    assert "e+0" not in text and "142 ms" in text and "90 ms" in text
    for column in ("grid", "block", "regs", "smem"):
        assert column not in text
    gpu = prof([("k", 2.5, (64, 1, 1))], wall_us=12.0, busy_us=2.5)
    side = Side("reference", "ref.py", "Model", gpu, bottleneck.classify(None, gpu), fingerprint.build(gpu))
    text = format_profile(Report("ref.py", "cuda", "NVIDIA H200", "h200", None, side))
    assert "grid" in text and "block" in text and "12 us" in text and "2.5 us" in text
