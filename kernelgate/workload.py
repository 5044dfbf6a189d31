"""Load workloads (KernelBench format or `file.py:Class` + inputs function), hash them, make input sets."""
from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .errors import KernelgateError
from .records import Contract, Reason

REFERENCE_CLASS = "Model"
CANDIDATE_CLASS = "ModelNew"


@dataclass(frozen=True)
class Spec:
    """Where a model comes from: a file, the class in it, and optionally `module:function` for inputs."""

    path: str
    cls: str
    inputs: str | None = None      # "module_or_file:function" returning the input list

    @staticmethod
    def parse(text: str, default_cls: str, inputs: str | None = None) -> "Spec":
        """`file.py` or `file.py:ClassName`."""
        path, cls = text, default_cls
        head, sep, tail = text.rpartition(":")
        if sep and head.endswith(".py") and tail.isidentifier():
            path, cls = head, tail
        return Spec(str(Path(path).resolve()), cls, inputs)


def import_file(path: str, name: str | None = None) -> types.ModuleType:
    """Import a Python file as a fresh module, with clear errors for a missing file or bad syntax."""
    p = Path(path)
    if not p.exists():
        raise KernelgateError(f"no such file: {path}")
    if p.suffix != ".py":
        raise KernelgateError(f"not a Python file: {path}")
    mod_name = name or f"_kg_{p.stem}_{hashlib.sha1(str(p).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise KernelgateError(f"syntax error in {p.name} line {e.lineno}: {e.msg}", Reason.TASK_LOAD) from e
    except Exception as e:  # noqa: BLE001 - any import-time failure is a load error
        raise KernelgateError(f"importing {p.name} failed: {type(e).__name__}: {e}", Reason.TASK_LOAD) from e
    return module


def file_hash(*paths: str) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


@dataclass
class Reference:
    """A loaded reference: its class, input generator and constructor arguments."""

    spec: Spec
    module: types.ModuleType
    cls: type
    get_inputs: Callable[[], list[Any]]
    init_inputs: list[Any]

    @property
    def hash(self) -> str:
        return file_hash(self.spec.path)

    def build(self, seed: int = 0) -> torch.nn.Module:
        """Construct the reference with a fixed seed (weights are then shared with the candidate)."""
        torch.manual_seed(seed)
        try:
            model = self.cls(*self.init_inputs)
        except Exception as e:  # noqa: BLE001
            raise KernelgateError(f"constructing {self.cls.__name__} failed: {type(e).__name__}: {e}",
                                  Reason.TASK_LOAD) from e
        return model.eval()

    def inputs(self, seed: int, device: str = "cpu") -> list[Any]:
        """Inputs from the workload's own generator under `seed`.

        With a GPU `device`, tensors the generator creates without naming a device are made there
        (torch's default-device context): a CPU generator would take seconds per large input. A
        generator that fails that way (numpy, say) runs again on the CPU."""
        if device != "cpu":
            torch.manual_seed(seed)
            try:
                with torch.device(device):
                    xs = self.get_inputs()
                return list(xs) if isinstance(xs, (tuple, list)) else [xs]
            except Exception:  # noqa: BLE001 - retried on the CPU below, where errors are reported
                pass
        torch.manual_seed(seed)
        try:
            xs = self.get_inputs()
        except Exception as e:  # noqa: BLE001
            raise KernelgateError(f"get_inputs() failed: {type(e).__name__}: {e}", Reason.TASK_LOAD) from e
        if isinstance(xs, (tuple, list)):
            return list(xs)
        return [xs]


def load_reference(spec: Spec) -> Reference:
    """Load a reference workload; errors name the missing piece."""
    module = import_file(spec.path)
    cls = getattr(module, spec.cls, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise KernelgateError(f"{Path(spec.path).name} defines no nn.Module class '{spec.cls}'", Reason.TASK_LOAD)
    if spec.inputs:
        get_inputs = _resolve_function(spec.inputs, Path(spec.path).parent)
        init = getattr(module, "get_init_inputs", lambda: [])
    else:
        get_inputs = getattr(module, "get_inputs", None)
        init = getattr(module, "get_init_inputs", lambda: [])
        if not callable(get_inputs):
            raise KernelgateError(f"{Path(spec.path).name} has no get_inputs(); pass --inputs module:function",
                                  Reason.TASK_LOAD)
    try:
        init_inputs = list(init())
    except Exception as e:  # noqa: BLE001
        raise KernelgateError(f"get_init_inputs() failed: {type(e).__name__}: {e}", Reason.TASK_LOAD) from e
    return Reference(spec, module, cls, get_inputs, init_inputs)


def _resolve_function(text: str, base: Path) -> Callable[[], list[Any]]:
    target, _, fn = text.rpartition(":")
    if not target or not fn:
        raise KernelgateError(f"--inputs must be module:function or file.py:function, got '{text}'")
    if target.endswith(".py"):
        path = Path(target) if Path(target).is_absolute() or Path(target).exists() else base / target
        module = import_file(str(path))
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise KernelgateError(f"cannot import '{target}' for --inputs: {e}") from e
    f = getattr(module, fn, None)
    if not callable(f):
        raise KernelgateError(f"'{target}' has no function '{fn}'")
    return f


# ---------------------------------------------------------------- input sets

#: the distributions each correctness trial draws from; "given" is the workload's own generator
TRIAL_KINDS = ("given", "normal", "heavy", "wide", "narrow", "given", "signs", "normal")


def _gen_on(gen: torch.Generator, device: torch.device) -> torch.Generator:
    """A generator on `device` seeded from `gen` (the CPU generator itself for CPU tensors)."""
    if device.type == "cpu":
        return gen
    return torch.Generator(device).manual_seed(int(torch.randint(1 << 62, (1,), generator=gen)))


def widen(xs: list[Any], kind: str, gen: torch.Generator, contract: Contract) -> list[Any]:
    """Transform the workload's inputs into another distribution; integer/bool tensors keep their values.

    "normal": N(mean, std) of the given values; "heavy": heavy-tailed around them; "wide"/"narrow": scaled
    by 4 / 0.25 about zero (crosses clamp/ReLU boundaries); "signs": random sign flips.
    """
    out = []
    for i, x in enumerate(xs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()) or kind == "given" or x.numel() == 0:
            out.append(x)
            continue
        work = x.detach().to(torch.float64)
        g, dev = _gen_on(gen, x.device), x.device
        mean, std = work.mean(), work.std() if work.numel() > 1 else work.abs().mean()
        std = std if float(std) > 0 else torch.tensor(1.0, dtype=torch.float64, device=dev)
        noise = torch.randn(work.shape, generator=g, dtype=torch.float64, device=dev)
        if kind == "normal":
            y = mean + std * noise
        elif kind == "heavy":
            y = mean + std * noise * torch.exp(torch.randn(work.shape, generator=g, dtype=torch.float64, device=dev))
        elif kind == "wide":
            y = work * 4.0
        elif kind == "narrow":
            y = work * 0.25
        elif kind == "signs":
            y = work * torch.where(torch.rand(work.shape, generator=g, dtype=torch.float64, device=dev) < 0.5, -1.0, 1.0)
        else:
            raise ValueError(kind)
        d = contract.domain_of(i)
        if d is not None:
            y = _into_domain(y, d.low, d.high)
        out.append(y.to(x.dtype).contiguous() if x.is_contiguous() else y.to(x.dtype))
    return out


def _into_domain(y: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Map values into [low, high] keeping variety: affine from the sample's own range, then clamp."""
    lo, hi = float(y.min()), float(y.max())
    if hi > lo and (lo < low or hi > high):
        y = low + (y - lo) * ((high - low) / (hi - lo))
    return y.clamp(low, high)


def resize(xs: list[Any], inputs: tuple[int, ...], dim: int, size: int, gen: torch.Generator) -> list[Any]:
    """The same inputs with dimension `dim` of the listed inputs set to `size` (new values, same statistics)."""
    out = list(xs)
    for i in inputs:
        x = xs[i]
        if not isinstance(x, torch.Tensor):
            raise KernelgateError(f"contract varies input {i}, which is not a tensor")
        shape = list(x.shape)
        shape[dim] = size
        g, dev = _gen_on(gen, x.device), x.device
        if x.is_floating_point():
            w = x.detach().double()
            std = float(w.std()) if w.numel() > 1 else 1.0
            y = float(w.mean()) + (std or 1.0) * torch.randn(shape, generator=g, dtype=torch.float64, device=dev)
            out[i] = y.to(x.dtype)
        elif x.dtype == torch.bool:
            out[i] = torch.rand(shape, generator=g, device=dev) < 0.5
        else:
            lo, hi = int(x.min()), int(x.max())
            out[i] = torch.randint(lo, hi + 1, shape, generator=g, dtype=x.dtype, device=dev)
    return out


def perturb(state: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Perturbed copies of the parameters and float buffers, so defaults (LayerNorm 1/0) cannot be assumed.

    Strictly positive tensors (variances, scales) are perturbed multiplicatively and stay positive; all others
    (including all-zero biases) additively.
    """
    out = {}
    for k, v in state.items():
        if not v.is_floating_point() or v.numel() == 0:
            out[k] = v.clone()
            continue
        w = v.detach().double()
        noise = torch.randn(w.shape, generator=_gen_on(gen, w.device), dtype=torch.float64, device=w.device)
        if bool((w > 0).all()):
            y = w * torch.exp(0.2 * noise)
        else:
            std = float(w.std()) if w.numel() > 1 else float(w.abs().mean())
            y = w + 0.2 * (std if std > 0 and math.isfinite(std) else 1.0) * noise
        out[k] = y.to(v.dtype)
    return out


def describe(xs: list[Any]) -> str:
    parts = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            parts.append(f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}")
        else:
            parts.append(repr(x))
    return ", ".join(parts)
