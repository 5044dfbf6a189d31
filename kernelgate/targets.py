"""Machine models of hardware targets: datasheet peaks, detection, user overrides and calibration.

A model's values come from, in rising precedence: the datasheet (or detection), the user's override
file (`KERNELGATE_MACHINES`, else ~/.config/kernelgate/machines.toml), and measured values from the
calibration store (`KERNELGATE_CALIBRATION`, else ~/.cache/kernelgate/calibration.json).
Peak rates are dense (no structured sparsity), in FLOP/s (OP/s for int8), keyed by dtype.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import platform
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from . import clock, config, versions
from .errors import KernelgateError
from .records import Reason

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
KINDS = ("gpu", "cpu", "apple")
SOURCES = ("datasheet", "measured", "override", "detected")
T = 1e12                                  # tera
KIB, MIB = 1 << 10, 1 << 20
GPU_LAUNCH_S = 4e-6                       # typical CUDA kernel launch cost from eager PyTorch


@dataclass(frozen=True)
class Machine:
    """One hardware target: dense peak rates per dtype, memory bandwidth, on-chip sizes, and provenance."""

    name: str                                       # target name: "h200", "cpu", ...
    kind: str                                       # gpu | cpu | apple
    peak: dict[str, float] = field(default_factory=dict, hash=False)  # FLOP/s per dtype, dense
    bandwidth: float | None = None                  # DRAM/HBM bytes/s
    sm_count: int | None = None                     # SMs (GPU), cores (CPU), GPU cores (Apple)
    l2_bytes: int | None = None                     # last on-chip cache level: L2 on GPUs, L3 on CPUs
    smem_per_sm_bytes: int | None = None            # max shared memory per SM
    registers_per_sm: int | None = None             # 32-bit registers per SM
    launch_overhead_s: float | None = None          # typical cost of one kernel launch
    source: str = "datasheet"                       # datasheet | measured | override | detected
    notes: str = ""
    label: str = ""                                 # the full product name
    memory_bytes: int | None = None                 # device memory capacity
    planned: bool = False                           # True: a model only, no runner for it yet
    cache_bandwidth: float | None = None            # CPU: bytes/s the cores can move through their caches (upper bound)
    cache_bytes: int | None = None                  # CPU: all data caches, every level and instance
    origins: dict[str, str] = field(default_factory=dict, hash=False, compare=False)  # field -> source

    def rate(self, dtype: str) -> float | None:
        """Peak dense rate for `dtype` (FLOP/s), or None when unknown."""
        return self.peak.get(dtype)

    def origin(self, key: str) -> str:
        """Where a value came from: key is a field name or "peak.<dtype>"."""
        return self.origins.get(key, self.source)


def _gpu(name: str, label: str, peak_t: dict[str, float], bandwidth: float, sm_count: int, l2_bytes: int,
         smem_kib: int, memory_bytes: int, notes: str) -> Machine:
    return Machine(name, "gpu", {k: v * T for k, v in peak_t.items()}, bandwidth, sm_count, l2_bytes,
                   smem_kib * KIB, 65536, GPU_LAUNCH_S, "datasheet", notes, label, memory_bytes)


# Dense rates: NVIDIA datasheets print tensor-core figures "with sparsity"; those are halved here.
# "fp64" is the FP64 tensor-core rate where one exists (what DGEMM reaches); "fp32" is the non-tensor-core rate.
BUILTIN: dict[str, Machine] = {m.name: m for m in (
    # H100 SXM5 80GB datasheet: FP64 TC 67, FP32 67, TF32 989*, BF16/FP16 1979*, FP8/INT8 3958* (*sparse);
    # HBM3 3.35 TB/s; 132 SMs, 50 MB L2, 228 KB shared memory per SM.
    _gpu("h100-sxm", "NVIDIA H100 SXM5 80GB",
         {"fp64": 67, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979, "int8": 1979},
         3.35e12, 132, 50 * MIB, 228, 80 * 10**9,
         "Datasheet, dense (sparse figures halved). FP64 vector rate is 34 TFLOP/s."),
    # H100 PCIe 80GB datasheet: FP64 TC 51, FP32 51, TF32 756*, BF16/FP16 1513*, FP8/INT8 3026*;
    # HBM2e 2.0 TB/s; 114 SMs, 50 MB L2.
    _gpu("h100-pcie", "NVIDIA H100 PCIe 80GB",
         {"fp64": 51, "fp32": 51, "tf32": 378, "bf16": 756.5, "fp16": 756.5, "fp8": 1513, "int8": 1513},
         2.0e12, 114, 50 * MIB, 228, 80 * 10**9,
         "Datasheet, dense (sparse figures halved). 350 W part: sustained clocks, hence rates, are lower than "
         "the SXM's. FP64 vector rate is 26 TFLOP/s."),
    # H200 SXM 141GB datasheet: compute as H100 SXM (FP64 TC 67, FP32 67, TF32 989*, BF16 1979*, FP8 3958*);
    # HBM3e 4.8 TB/s, 141 GB; 132 SMs, 50 MB L2.
    _gpu("h200", "NVIDIA H200 SXM 141GB",
         {"fp64": 67, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979, "int8": 1979},
         4.8e12, 132, 50 * MIB, 228, 141 * 10**9,
         "Datasheet, dense (sparse figures halved); same compute as H100 SXM. The H200 NVL (600 W) is a "
         "different part and is not matched to this model."),
    # A100 SXM4 80GB datasheet: FP64 TC 19.5, FP32 19.5, TF32 156, BF16/FP16 312, INT8 624 (dense); no FP8;
    # HBM2e 2,039 GB/s; 108 SMs, 40 MB L2, 164 KB shared memory per SM.
    _gpu("a100", "NVIDIA A100 SXM4 80GB",
         {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624},
         2.039e12, 108, 40 * MIB, 164, 80 * 10**9,
         "Datasheet, dense. No FP8 tensor cores. FP64 vector rate is 9.7 TFLOP/s."),
    # L40S datasheet: FP32 91.6, TF32 183, BF16/FP16 362.05, FP8 733, INT8 733 (dense); GDDR6 864 GB/s, 48 GB;
    # 142 SMs, 96 MB L2, 100 KB shared memory per SM (Ada).
    _gpu("l40s", "NVIDIA L40S 48GB",
         {"fp64": 1.43, "fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "fp8": 733, "int8": 733},
         864e9, 142, 96 * MIB, 100, 48 * 10**9,
         "Datasheet, dense. FP64 is not on the datasheet: 1/64 of FP32 per the Ada architecture (estimate)."),
    # RTX PRO 6000 Blackwell Workstation Edition datasheet: FP32 125 TFLOPS, 4000 AI TOPS (FP4, sparse),
    # GDDR7 1,792 GB/s, 96 GB; 188 SMs, 128 MB L2.
    _gpu("rtx6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
         {"fp64": 1.95, "fp32": 125, "tf32": 250, "bf16": 500, "fp16": 500, "fp8": 1000, "int8": 1000,
          "fp4": 2000},
         1.792e12, 188, 128 * MIB, 100, 96 * 10**9,
         "Only FP32 (125) and FP4 sparse (4000 AI TOPS) are published. Tensor-core rates are derived: FP4 "
         "dense 2000, halved per precision step (FP8/INT8 1000, FP16/BF16 500, TF32 250): uncertain, about "
         "+-10%, and FP16 with FP32 accumulation may run at half rate. FP64 = 1/64 FP32 (estimate). Shared "
         "memory per SM (100 KB) assumed as sm_120; detection replaces it."),
    # HGX B200 (8 GPUs): FP4 144 PF*, FP8 72 PF*, INT8 72 POPS*, FP16/BF16 36 PF*, TF32 18 PF*, FP32 600 TF,
    # FP64/FP64 TC 296 TF (*sparse); per GPU 8 TB/s HBM3e, 180 GB; 148 SMs.
    _gpu("b200", "NVIDIA B200 (HGX, 1000 W)",
         {"fp64": 37, "fp32": 75, "tf32": 1125, "bf16": 2250, "fp16": 2250, "fp8": 4500, "int8": 4500,
          "fp4": 9000},
         8.0e12, 148, 126 * MIB, 228, 180 * 10**9,
         "Per GPU = HGX B200 8-GPU figures / 8, sparse halved. Earlier NVIDIA material quoted FP64 40 and "
         "FP32 80 TFLOP/s; L2 size (about 126 MB) is not on the datasheet: detection replaces it."),
    # Apple M4 (10-core GPU): memory bandwidth 120 GB/s (Apple); GPU FP32 about 4.3 TFLOP/s (not published by
    # Apple: 10 cores x 128 ALUs x 2 x ~1.7 GHz).
    Machine("apple-m4", "apple", {"fp32": 4.3 * T, "fp16": 4.3 * T}, 120e9, 10, None, 32 * KIB, None, 10e-6,
            "datasheet",
            "Planned: no runner yet. Bandwidth is Apple's figure; GPU FP32/FP16 rates are third-party estimates "
            "(Apple publishes none). sm_count = GPU cores; shared memory = Metal's 32 KB threadgroup limit; "
            "system-level cache size and launch overhead unknown/estimated. Memory 16-32 GB by configuration.",
            "Apple M4 (10-core GPU)", 16 * 10**9, True),
)}

ALIASES = {"h100": "h100-sxm", "h100-sxm5": "h100-sxm", "h200-sxm": "h200", "a100-sxm": "a100",
           "a100-80gb": "a100", "rtx-pro-6000-blackwell": "rtx6000-blackwell", "rtx-pro-6000": "rtx6000-blackwell",
           "m4": "apple-m4"}

# CUDA device name (lower-cased) -> model; the first matching rule wins, and a None model means "not this
# datasheet" (a variant with other clocks or memory), so the device is modelled from its properties.
_NAME_RULES: tuple[tuple[str, str | None], ...] = (
    (r"\bh100\b.*\bnvl\b", None),
    (r"\bh100\b.*\bpcie\b", "h100-pcie"),
    (r"\bh100\b.*\b(hbm3|sxm\d?)\b", "h100-sxm"),
    (r"\bh200\b.*\bnvl\b", None),
    (r"\bh200\b", "h200"),
    (r"\ba100\b.*\bsxm4?-80gb\b", "a100"),
    (r"\bl40s\b", "l40s"),
    (r"\brtx pro 6000 blackwell\b.*\b(max-q|server)\b", None),
    (r"\brtx pro 6000 blackwell\b", "rtx6000-blackwell"),
    (r"\bb200\b", "b200"),
)


def canonical(name: str) -> str:
    """The target name for an alias ("h100" -> "h100-sxm"); names are case-insensitive."""
    key = name.strip().lower()
    return ALIASES.get(key, key)


def match_gpu(device_name: str) -> str | None:
    """The built-in model for a CUDA device name ("NVIDIA H200" -> "h200"), or None."""
    lowered = device_name.lower()
    for pattern, model in _NAME_RULES:
        if re.search(pattern, lowered):
            return model
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


# ------------------------------------------------------------------ detection

def from_properties(device_name: str, props: Any) -> Machine:
    """Model of a CUDA device from its name and torch.cuda device properties (datasheet when the name is known)."""
    hw = {"sm_count": getattr(props, "multi_processor_count", None),
          "l2_bytes": getattr(props, "L2_cache_size", None),
          "smem_per_sm_bytes": getattr(props, "shared_memory_per_multiprocessor", None),
          "registers_per_sm": getattr(props, "regs_per_multiprocessor", None),
          "memory_bytes": getattr(props, "total_memory", None)}
    hw = {k: int(v) for k, v in hw.items() if v}
    key = match_gpu(device_name)
    if key is None:
        return Machine(_slug(device_name), "gpu", {}, None, launch_overhead_s=GPU_LAUNCH_S, source="detected",
                       label=device_name, notes=f"No datasheet model for '{device_name}': peak rates and bandwidth "
                       "unknown. Add them to machines.toml or run calibrate. Sizes from the device properties.",
                       **hw)
    base = BUILTIN[key]
    return dataclasses.replace(base, **hw, origins={**base.origins, **{k: "detected" for k in hw}},
                               notes=f"{base.notes} Detected as '{device_name}'; SM count, L2, shared memory, "
                               "registers and memory size from the device properties.")


def _cache_sizes() -> dict[tuple[int, str], int]:
    """Data and unified CPU caches from Linux sysfs: (level, CPUs sharing it) -> bytes ({} if unknown)."""
    sizes: dict[tuple[int, str], int] = {}
    for index in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip().upper()
            size = int(text.rstrip("KMG")) * {"K": KIB, "M": MIB, "G": 1 << 30}.get(text[-1:], 1)
            sizes[(level, (index / "shared_cpu_list").read_text().strip())] = size
        except (OSError, ValueError):
            continue
    return sizes


def _llc_bytes() -> int | None:
    """Total size of the last CPU cache level (Linux sysfs), summed over its instances; None if unknown."""
    sizes = _cache_sizes()
    if not sizes:
        return None
    top = max(level for level, _ in sizes)
    return sum(size for (level, _), size in sizes.items() if level == top)


def _all_cache_bytes() -> int | None:
    """Every data cache of every level and instance, summed: the most a working set can keep on chip
    (an exclusive last level, as on AMD, holds what the private levels do not)."""
    sizes = _cache_sizes()
    return sum(sizes.values()) if sizes else None


def cpu_label() -> str:
    """The host CPU's model name (/proc/cpuinfo), else the platform's processor or machine."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


CPU_CLOCK_HZ = 3.5e9                      # assumed all-core clock: high, so the floor stays a lower bound
CPU_BYTES_PER_CORE = 40e9                 # assumed DRAM streaming bytes/s per logical core (high, same reason)
CPU_MIN_BANDWIDTH = 250e9                 # ... and never less in all: a 2-vCPU EPYC host moved a 64 MiB in-place
                                          # multiply (128 MiB) in 0.73 ms, 184 GB/s, below the floor at 100 GB/s
CPU_CACHE_BYTES_PER_CYCLE = 64            # one cache line per cycle per core: the L2-to-L1 fill width of current
                                          # x86 and Arm cores (L3 delivers 32 B/cycle or less); L1-resident data is
                                          # faster but a few tens of kB per core, well under a microsecond


def cpu_cache_bandwidth(m: Machine) -> float | None:
    """Bytes/s a CPU's cores can move through their caches: the model's value, else cores x clock x
    CPU_CACHE_BYTES_PER_CYCLE (an upper bound); None without a core count."""
    if m.cache_bandwidth:
        return m.cache_bandwidth
    return m.sm_count * CPU_CLOCK_HZ * CPU_CACHE_BYTES_PER_CYCLE if m.sm_count else None


def cpu_model() -> Machine:
    """Model of this host's CPU: cores from os.cpu_count(); rates and bandwidths are estimates (upper bounds)."""
    cores = os.cpu_count() or 1
    capability = torch.backends.cpu.get_cpu_capability()
    per_cycle = 64 if "AVX512" in capability else 32   # FP32 FLOP/cycle/core: 2 FMA pipes x lanes x 2
    fp32 = cores * CPU_CLOCK_HZ * per_cycle
    bandwidth = max(cores * CPU_BYTES_PER_CORE, CPU_MIN_BANDWIDTH)
    cache_bw = cores * CPU_CLOCK_HZ * CPU_CACHE_BYTES_PER_CYCLE
    notes = (f"Detected; rates and bandwidths are estimates, not measurements: {cores} logical cores x "
             f"{CPU_CLOCK_HZ / 1e9:g} GHz x {per_cycle} FP32 FLOP/cycle ({capability}), FP64 half of that; DRAM "
             f"{CPU_BYTES_PER_CORE / 1e9:g} GB/s per core, at least {CPU_MIN_BANDWIDTH / 1e9:g} GB/s; caches "
             f"{CPU_CACHE_BYTES_PER_CYCLE} B/cycle per core. Chosen high so floors stay lower bounds; run "
             "calibrate('cpu') for a measured DRAM bandwidth. l2_bytes holds the last-level cache, cache_bytes "
             "every data cache.")
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    return Machine("cpu", "cpu", {"fp32": fp32, "fp64": fp32 / 2}, bandwidth, cores, _llc_bytes(),
                   None, None, 2e-6, "detected", notes, cpu_label(), memory, cache_bandwidth=cache_bw,
                   cache_bytes=_all_cache_bytes())


def detect(device: str) -> Machine:
    """Model of a local device: "cpu", or "cuda"/"cuda:N" matched by name, sizes from its properties."""
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise KernelgateError(f"target '{device}': not a device ({e})") from e
    if dev.type == "cpu":
        return cpu_model()
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise KernelgateError(f"target '{device}': no CUDA device is present", Reason.NO_DEVICE)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return from_properties(torch.cuda.get_device_name(index), torch.cuda.get_device_properties(index))
    raise KernelgateError(f"target '{device}': no runner for device type '{dev.type}' (cpu and cuda are supported)")


# ------------------------------------------------------------------ overrides and calibration store

machines_path = config.machines_path
calibration_path = config.calibration_path


def load_overrides() -> dict[str, dict[str, Any]]:
    """Tables of the override file, keyed by canonical machine name ({} when the file is absent)."""
    path = machines_path()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise KernelgateError(f"machine override file {path}: {e}") from e
    bad = [k for k, v in data.items() if not isinstance(v, dict)]
    if bad:
        raise KernelgateError(f"machine override file {path}: '{bad[0]}' must be a table ([name])")
    return {canonical(k): v for k, v in data.items()}


def load_calibration() -> dict[str, dict[str, Any]]:
    """Measured values by machine name from the calibration store ({} when absent)."""
    path = calibration_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise KernelgateError(f"calibration store {path}: {e}") from e
    return {canonical(k): v for k, v in data.items() if isinstance(v, dict)}


def save_calibration(name: str, measured: dict[str, Any]) -> Path:
    """Store measured values ({"bandwidth": B/s, "fp32": FLOP/s, ...}) for machine `name`; returns the file."""
    path = calibration_path()
    data = load_calibration()
    data[canonical(name)] = {**measured, "saved": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)
    return path


_SETTABLE = {f.name for f in dataclasses.fields(Machine)} - {"name", "peak", "source", "origins"}


def _apply(m: Machine, table: dict[str, Any], source: str) -> Machine:
    """`m` with the values of `table` (fields, dtype rates at top level or under "peak") from `source`."""
    where = f"{machines_path()} [{m.name}]" if source == "override" else f"{calibration_path()} [{m.name}]"
    origins = {key: m.origin(key) for key in (*_SETTABLE, *(f"peak.{d}" for d in m.peak))}
    peak, changes = dict(m.peak), {}
    for key, value in table.items():
        if key == "peak" and isinstance(value, dict):
            items = value.items()
        elif key in DTYPES:
            items = [(key, value)]
        elif key in _SETTABLE:
            if key == "kind" and value not in KINDS:
                raise KernelgateError(f"{where}: kind must be one of {', '.join(KINDS)}")
            changes[key], origins[key] = value, source
            continue
        elif source == "measured":
            continue                      # conditions, timestamps, extra measurements
        else:
            raise KernelgateError(f"{where}: unknown field '{key}' (fields: {', '.join(sorted(_SETTABLE))}, "
                                  f"peak, or a dtype: {', '.join(DTYPES)})")
        for dtype, rate in items:
            if dtype not in DTYPES or not isinstance(rate, (int, float)) or rate <= 0:
                raise KernelgateError(f"{where}: peak '{dtype}' = {rate!r} (dtypes: {', '.join(DTYPES)}; FLOP/s > 0)")
            peak[dtype], origins[f"peak.{dtype}"] = float(rate), source
    if not changes and peak == m.peak:
        return m
    return dataclasses.replace(m, peak=peak, source=source, origins=origins, **changes)


def machine(name_or_device: str) -> Machine:
    """The model for a target name ("h200") or local device ("cpu", "cuda:0"): datasheet < override < measured."""
    key = canonical(name_or_device)
    overrides = load_overrides()
    if key == "cpu" or key.split(":")[0] == "cuda":
        m = detect(key)
    elif key in BUILTIN:
        m = BUILTIN[key]
    elif key in overrides:
        m = Machine(key, overrides[key].get("kind", "gpu"), source="override")
    else:
        raise KernelgateError(f"unknown target '{name_or_device}': known are cpu, cuda, "
                              f"{', '.join(sorted(set(BUILTIN) | set(overrides)))}")
    if m.name in overrides:
        m = _apply(m, overrides[m.name], "override")
    measured = load_calibration().get(m.name)
    if measured:
        m = _apply(m, measured, "measured")
    return m


# ------------------------------------------------------------------ calibration

def _median_s(fn: Callable[[], Any], cuda: bool, warmup: int, repeats: int) -> float:
    """Median seconds of `fn` (kernelgate/clock.py: the one clock)."""
    return clock.median_s(fn, cuda, warmup, repeats)


_TORCH_DTYPE = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _matmul_rate(n: int, dtype: str, dev: torch.device, warmup: int, repeats: int) -> float:
    """FLOP/s of an n x n x n matmul in `dtype` (tf32: fp32 operands with TF32 allowed, else TF32 off)."""
    a = torch.randn(n, n, device=dev).to(_TORCH_DTYPE[dtype])
    b, c = torch.randn_like(a), torch.empty_like(a)
    flags = torch.backends.cuda.matmul
    old = flags.allow_tf32                # the legacy flag, as the rest of kernelgate reads it
    flags.allow_tf32 = dtype == "tf32"
    try:
        seconds = _median_s(lambda: torch.mm(a, b, out=c), dev.type == "cuda", warmup, repeats)
    finally:
        flags.allow_tf32 = old
    return 2.0 * n**3 / seconds


def _bandwidths(nbytes: int, dev: torch.device, warmup: int, repeats: int) -> tuple[float, float]:
    """Bytes/s of a copy of `nbytes` (bytes read + written) and of a read-only pass (sum) over them."""
    src = torch.rand(nbytes // 4, device=dev)
    dst = torch.empty_like(src)
    cuda = dev.type == "cuda"
    copy_s = _median_s(lambda: dst.copy_(src), cuda, warmup, repeats)
    read_s = _median_s(lambda: torch.sum(src), cuda, warmup, repeats)
    return 2 * src.nbytes / copy_s, src.nbytes / read_s


def calibrate(device: str) -> dict[str, Any]:
    """Measure bandwidth (B/s) and matmul rates (FLOP/s) on `device`; returns them with their conditions."""
    dev = torch.device(device)
    m = detect(device)
    with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
        return _calibrate(dev, m)


def _calibrate(dev: torch.device, m: Machine) -> dict[str, Any]:
    cuda = dev.type == "cuda"
    if cuda:
        nbytes = min(max(1 << 30, 8 * (m.l2_bytes or 0)), (m.memory_bytes or 8 << 30) // 8)
        n, dtypes, warmup, repeats = 8192, ("fp32", "tf32", "bf16", "fp16"), 5, 20
    else:
        nbytes = min(max(64 * MIB, 4 * (m.l2_bytes or 0)), 256 * MIB)
        n, dtypes, warmup, repeats = (1024 if torch.get_num_threads() <= 8 else 2048), ("fp32",), 2, 5
    copy_bw, read_bw = _bandwidths(nbytes, dev, warmup, repeats)
    out: dict[str, Any] = {"bandwidth": max(copy_bw, read_bw)}
    for dtype in dtypes:
        out[dtype] = _matmul_rate(n, dtype, dev, warmup, repeats)
    out["conditions"] = {**versions.conditions(str(dev)), "machine": m.name, "label": m.label,
                         "copy_bandwidth": copy_bw, "read_bandwidth": read_bw, "copy_bytes": nbytes,
                         "matmul_n": n, "warmup": warmup, "repeats": repeats, "statistic": "median",
                         "threads": torch.get_num_threads(),
                         "bandwidth_rule": "max of copy (bytes read + written) and read-only (sum) bandwidth"}
    return out


# ------------------------------------------------------------------ listing

def table() -> list[dict[str, Any]]:
    """Every known model (built-in and from the override file) plus the detected local devices."""
    names = list(BUILTIN) + sorted(set(load_overrides()) - set(BUILTIN) - {"cpu"})
    rows = [{**_row(machine(n)), "detected": False} for n in names]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    return rows + [{**_row(machine(d)), "detected": True} for d in devices]


def _row(m: Machine) -> dict[str, Any]:
    row = dataclasses.asdict(m)
    row.pop("origins")
    return row


def format_table() -> str:
    """`table()` as aligned text: rates in TFLOP/s, bandwidth in TB/s, L2 in MiB."""
    def num(v: float | None, scale: float, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v / scale)
    head = ["name", "kind", "fp64", "fp32", "tf32", "bf16", "fp8", "TB/s", "SMs", "L2 MiB", "source", "note"]
    lines = [head]
    for r in table():
        note = "planned: no runner yet" if r["planned"] else r["label"]
        rates = (num(r["peak"].get(d), T) for d in ("fp64", "fp32", "tf32", "bf16", "fp8"))
        lines.append([r["name"], r["kind"], *rates, num(r["bandwidth"], T, "{:.2f}"), num(r["sm_count"], 1, "{:.0f}"),
                      num(r["l2_bytes"], MIB, "{:.0f}"), r["source"] + (" (this host)" if r["detected"] else ""),
                      note])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(row, widths)), row[-1]]).rstrip() for row in lines)
