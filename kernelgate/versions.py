"""Software and hardware conditions recorded with every result."""
from __future__ import annotations

import functools
import platform
import subprocess
import sys

import torch


@functools.lru_cache(maxsize=1)
def software() -> dict[str, str | None]:
    try:
        import triton  # noqa: PLC0415
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"torch": torch.__version__, "triton": triton_version, "python": sys.version.split()[0],
            "cuda": torch.version.cuda, "platform": platform.platform()}


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """kernelgate's own code: a hash of every Python file of the package (a verdict kept from an earlier run holds only
    for the gate that gave it)."""
    import hashlib  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def conditions(device: str) -> dict[str, object]:
    """GPU (name, driver), versions, and the command line."""
    out: dict[str, object] = dict(software())
    out["device"] = device
    argv = list(sys.argv)
    if argv and argv[0].endswith(("kernelgate/__main__.py", "/kernelgate")):
        argv[0] = "kernelgate"
    out["command"] = " ".join(argv)
    if device.startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
        try:
            out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out["driver"] = None
    else:
        out["cpu"] = platform.processor() or platform.machine()
        out["threads"] = torch.get_num_threads()
    return out
