"""Machine models: datasheet entries, GPU name matching, detection, override < measured precedence, calibration."""
import dataclasses
import json
import time
from types import SimpleNamespace

import pytest
import torch

from kernelgate import targets
from kernelgate.errors import KernelgateError


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """No test reads or writes the user's override file or calibration store."""
    monkeypatch.setenv("KERNELGATE_MACHINES", str(tmp_path / "machines.toml"))
    monkeypatch.setenv("KERNELGATE_CALIBRATION", str(tmp_path / "calibration.json"))


def test_builtin_models_are_complete_and_frozen():
    for name in ("h100-sxm", "h100-pcie", "h200", "a100", "l40s", "rtx6000-blackwell", "b200", "apple-m4"):
        m = targets.machine(name)
        assert m.kind in targets.KINDS and m.source == "datasheet"
        assert m.bandwidth > 0 and m.rate("fp32") > 0 and m.sm_count > 0 and m.notes
        assert set(m.peak) <= set(targets.DTYPES)
        hash(m)
    with pytest.raises(dataclasses.FrozenInstanceError):
        targets.machine("h200").bandwidth = 1.0


def test_h200_is_h100_sxm_compute_with_more_bandwidth():
    h200, h100 = targets.machine("h200"), targets.machine("h100")
    assert h200.peak == h100.peak and h100.name == "h100-sxm"
    assert h200.bandwidth == 4.8e12 and h100.bandwidth == 3.35e12
    assert h200.memory_bytes == 141 * 10**9
    assert h200.rate("bf16") == pytest.approx(989.5e12)       # dense: half the datasheet's sparse 1979
    assert h200.rate("tf32") > h200.rate("fp32")


def test_apple_is_planned_and_unknown_names_are_usage_errors():
    assert targets.machine("apple-m4").planned and targets.machine("m4").kind == "apple"
    assert not targets.machine("h200").planned
    with pytest.raises(KernelgateError, match="unknown target 'tpu-v9'"):
        targets.machine("tpu-v9")


@pytest.mark.parametrize("device_name, model", [
    ("NVIDIA H200", "h200"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx6000-blackwell"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA H200 NVL", None),              # other clocks and power: not the SXM datasheet
    ("NVIDIA H100 NVL", None),
    ("NVIDIA GH200 480GB", None),
    ("NVIDIA GB200", None),
    ("NVIDIA A100-SXM4-40GB", None),        # 1.6 TB/s, not the 80GB part
    ("NVIDIA L40", None),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", None),
    ("NVIDIA GeForce RTX 4090", None),
])
def test_gpu_name_matching(device_name, model):
    assert targets.match_gpu(device_name) == model


def _props(**kw):
    base = dict(multi_processor_count=132, L2_cache_size=60 * 2**20, shared_memory_per_multiprocessor=233472,
                regs_per_multiprocessor=65536, total_memory=150 * 10**9)
    return SimpleNamespace(**{**base, **kw})


def test_known_gpu_takes_sizes_from_properties():
    m = targets.from_properties("NVIDIA H200", _props())
    assert m.name == "h200" and m.source == "datasheet" and m.rate("bf16") == targets.BUILTIN["h200"].rate("bf16")
    assert m.sm_count == 132 and m.l2_bytes == 60 * 2**20 and m.memory_bytes == 150 * 10**9
    assert m.origin("l2_bytes") == "detected" and m.origin("bandwidth") == "datasheet"


def test_unknown_gpu_has_unknown_rates():
    m = targets.from_properties("NVIDIA Future GPU", _props(multi_processor_count=200))
    assert m.source == "detected" and m.kind == "gpu" and m.name == "nvidia-future-gpu"
    assert m.peak == {} and m.bandwidth is None and m.rate("fp32") is None
    assert m.sm_count == 200 and "No datasheet model" in m.notes


def test_detect_cpu():
    m = targets.detect("cpu")
    assert m.kind == "cpu" and m.name == "cpu" and m.source == "detected"
    assert m.sm_count >= 1 and m.rate("fp32") > 0 and m.bandwidth > 0
    assert "estimate" in m.notes
    assert targets.machine("cpu").name == "cpu"
    # upper bounds for the CPU memory floor: caches at least as fast as DRAM, every data cache counted
    assert m.cache_bandwidth >= m.bandwidth >= targets.CPU_MIN_BANDWIDTH
    if m.l2_bytes:
        assert m.cache_bytes >= m.l2_bytes


def test_detect_rejects_other_devices():
    with pytest.raises(KernelgateError, match="no runner"):
        targets.detect("mps")
    with pytest.raises(KernelgateError, match="not a device"):
        targets.detect("tpu")


def test_override_then_measured_precedence(tmp_path):
    (tmp_path / "machines.toml").write_text(
        '[h200]\nbandwidth = 4.0e12\nbf16 = 9.0e14\n\n[H100]\npeak = { fp32 = 6.0e13 }\n\n'
        '[my-gpu]\nkind = "gpu"\nbandwidth = 1.0e12\nsm_count = 10\npeak = { fp32 = 1.0e13 }\n')
    h200 = targets.machine("h200")
    assert h200.bandwidth == 4.0e12 and h200.rate("bf16") == 9.0e14 and h200.source == "override"
    assert h200.rate("fp32") == 67e12 and h200.origin("peak.fp32") == "datasheet"
    assert targets.machine("h100-sxm").rate("fp32") == 6.0e13          # table keyed by an alias
    mine = targets.machine("my-gpu")
    assert (mine.kind, mine.bandwidth, mine.sm_count, mine.rate("fp32")) == ("gpu", 1.0e12, 10, 1.0e13)

    path = targets.save_calibration("h200", {"bandwidth": 4.5e12, "fp32": 5.0e13, "conditions": {"x": 1}})
    assert path == tmp_path / "calibration.json" and "h200" in json.loads(path.read_text())
    h200 = targets.machine("h200")
    assert h200.bandwidth == 4.5e12 and h200.rate("fp32") == 5.0e13 and h200.source == "measured"
    assert h200.rate("bf16") == 9.0e14 and h200.origin("peak.bf16") == "override"
    assert h200.origin("bandwidth") == "measured"
    assert targets.BUILTIN["h200"].bandwidth == 4.8e12                 # the datasheet entry is untouched
    assert {r["name"] for r in targets.table()} >= {"my-gpu", "h200"}


def test_calibration_file_from_env(tmp_path, monkeypatch):
    other = tmp_path / "elsewhere" / "cal.json"
    monkeypatch.setenv("KERNELGATE_CALIBRATION", str(other))
    targets.save_calibration("cpu", {"bandwidth": 1.0e10})
    assert other.is_file()
    m = targets.machine("cpu")
    assert m.bandwidth == 1.0e10 and m.source == "measured" and m.origin("peak.fp32") == "detected"


def test_default_paths_follow_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELGATE_MACHINES")
    monkeypatch.delenv("KERNELGATE_CALIBRATION")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert targets.machines_path() == tmp_path / "config" / "kernelgate" / "machines.toml"
    assert targets.calibration_path() == tmp_path / "cache" / "kernelgate" / "calibration.json"


@pytest.mark.parametrize("text, message", [
    ("[h200]\nbandwith = 1.0\n", "unknown field 'bandwith'"),
    ("[h200]\npeak = { fp33 = 1.0 }\n", "peak 'fp33'"),
    ("[h200]\nbf16 = -1.0\n", "peak 'bf16'"),
    ("[h200]\nkind = \"tpu\"\n", "kind must be"),
    ("h200 = 3\n", "must be a table"),
    ("[h200\n", "machine override file"),
])
def test_bad_override_files_are_usage_errors(tmp_path, text, message):
    (tmp_path / "machines.toml").write_text(text)
    with pytest.raises(KernelgateError, match=message):
        targets.machine("h200")


def test_table_lists_every_model_and_the_detected_cpu():
    rows = targets.table()
    names = [r["name"] for r in rows]
    assert set(targets.BUILTIN) <= set(names)
    assert any(r["name"] == "cpu" and r["detected"] for r in rows)
    text = targets.format_table()
    assert all(name in text for name in targets.BUILTIN) and "planned" in text
    assert "989.5" in text and "4.80" in text                        # h200 bf16 TFLOP/s and TB/s


@pytest.mark.slow
def test_calibrate_cpu_is_quick_and_positive():
    t0 = time.perf_counter()
    out = targets.calibrate("cpu")
    assert time.perf_counter() - t0 < 10
    assert out["bandwidth"] > 1e8 and out["fp32"] > 1e8
    c = out["conditions"]
    assert c["machine"] == "cpu" and c["matmul_n"] > 0 and c["threads"] >= 1
    assert out["bandwidth"] == max(c["copy_bandwidth"], c["read_bandwidth"])


@pytest.mark.gpu
def test_detect_cuda():
    m = targets.detect("cuda")
    props = torch.cuda.get_device_properties(0)
    assert m.kind == "gpu" and m.sm_count == props.multi_processor_count and m.l2_bytes == props.L2_cache_size
    name = torch.cuda.get_device_name(0)
    assert m.name == (targets.match_gpu(name) or m.name)
    if "H200" in name and "NVL" not in name:
        assert m.name == "h200" and m.rate("bf16") == pytest.approx(989.5e12)


@pytest.mark.gpu
def test_calibrate_cuda():
    before = torch.backends.cuda.matmul.allow_tf32
    out = targets.calibrate("cuda")
    assert out["bandwidth"] > 1e11 and out["fp32"] > 1e12 and out["bf16"] > out["fp32"]
    assert out["tf32"] > 0 and out["fp16"] > 0
    assert torch.backends.cuda.matmul.allow_tf32 == before           # the flag is restored
    m = targets.detect("cuda")
    if m.bandwidth:
        assert out["bandwidth"] < 1.2 * m.bandwidth                   # a measured copy cannot beat the datasheet
