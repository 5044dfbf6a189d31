"""Load workloads (KernelBench format or `file.py:Class` + inputs function), hash them, make input sets."""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import math
import random
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


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the file's source text on every load: no bytecode cache is read or written.

    A candidate runs as the same user as the judge and may plant `__pycache__/<name>.cpython-*.pyc`
    next to a reference (stamped with the source's mtime and size, which is all CPython checks): the
    judge and the baseline workers must execute the source they hash, never such a file."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return compile(self.get_data(path), path, "exec", dont_inherit=True)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """While a file executes, modules found next to it (a sibling `helpers.py`, a package beside it and
    its submodules) are loaded from source too; everything else (torch, site-packages) as usual."""

    def __init__(self, folder: Path):
        self.folders = {folder}

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        origin = Path(spec.origin).resolve()
        if origin.parent not in self.folders and not (origin.name == "__init__.py"
                                                      and origin.parent.parent in self.folders):
            return None
        locations = spec.submodule_search_locations
        if locations is not None:
            self.folders.update(Path(p).resolve() for p in locations)
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=_SourceLoader(fullname, spec.origin),
                                                      submodule_search_locations=locations)


def import_file(path: str, name: str | None = None) -> types.ModuleType:
    """Import a Python file as a fresh module, compiled from its source text (never from bytecode), with
    clear errors for a missing file or bad syntax. The module is registered in sys.modules under its
    name (dataclasses and pickling look it up there)."""
    p = Path(path)
    if not p.exists():
        raise KernelgateError(f"no such file: {path}")
    if p.suffix != ".py":
        raise KernelgateError(f"not a Python file: {path}")
    mod_name = name or f"_kg_{p.stem}_{hashlib.sha1(str(p).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, p, loader=_SourceLoader(mod_name, str(p)))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    finder = _SourceFinder(p.resolve().parent)
    sys.meta_path.insert(0, finder)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise KernelgateError(f"syntax error in {p.name} line {e.lineno}: {e.msg}", Reason.TASK_LOAD) from e
    except Exception as e:  # noqa: BLE001 - any import-time failure is a load error
        raise KernelgateError(f"importing {p.name} failed: {type(e).__name__}: {e}", Reason.TASK_LOAD) from e
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
    return module


def file_hash(*paths: str) -> str:
    return hashlib.sha256(b"".join(Path(p).read_bytes() for p in paths)).hexdigest()[:16]


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
        """The reference file's bytes and, where not the defaults, the class and `--inputs` (its file's bytes too)."""
        h, src = hashlib.sha256(Path(self.spec.path).read_bytes()), (self.spec.inputs or "").rpartition(":")[0]
        if self.spec.cls != REFERENCE_CLASS or self.spec.inputs:
            h.update(f"\0{self.spec.cls}\0{self.spec.inputs or ''}".encode()
                     + (Path(src).read_bytes() if src.endswith(".py") and Path(src).is_file() else b""))
        return h.hexdigest()[:16]

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
TRIAL_KINDS = ("given", "normal", "heavy", "wide", "narrow", "given", "signs", "magnitudes")


def _gen_on(gen: torch.Generator, device: torch.device) -> torch.Generator:
    """A generator on `device` seeded from `gen` (the CPU generator itself for CPU tensors)."""
    if device.type == "cpu":
        return gen
    return torch.Generator(device).manual_seed(int(torch.randint(1 << 62, (1,), generator=gen)))


#: elements per chunk of the input sets' full-size passes (statistics, noise): no full-size fp64 copy, and a
#: large input's temporaries stay a small share of it (the lean memory plan widens a 16 GiB input on the device)
CHUNK = 1 << 24


def moments(x: torch.Tensor) -> tuple[float, float, float]:
    """(mean, standard deviation, RMS) of a float tensor, in fp64 a chunk at a time (chunks merged by Chan's
    formula: no cancellation); the deviation of one element is its absolute value's mean, as before."""
    flat = x.detach().reshape(-1)
    n_all, mean, m2, sq = 0, 0.0, 0.0, 0.0
    for a in range(0, flat.numel(), CHUNK):
        c = flat[a:a + CHUNK].double()
        n = c.numel()
        cm = float(c.mean())
        cm2 = float((c - cm).pow_(2).sum())
        sq += float(c.square().sum())          # not in place: c is x itself where x is fp64
        delta, tot = cm - mean, n_all + n
        mean += delta * n / tot
        m2 += cm2 + delta * delta * n_all * n / tot
        n_all = tot
    if n_all == 0:
        return 0.0, 0.0, 0.0
    std = math.sqrt(m2 / (n_all - 1)) if n_all > 1 and m2 == m2 and m2 >= 0 else (
        abs(mean) if n_all == 1 else float("nan"))
    return mean, std, math.sqrt(sq / n_all)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype input sets are drawn in: the input's own for fp32/fp64, fp32 for narrower formats."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def widen(xs: list[Any], kind: str, gen: torch.Generator, contract: Contract) -> list[Any]:
    """Transform the workload's inputs into another distribution; integer/bool tensors keep their values.

    "normal": N(mean, std) of the given values; "heavy": heavy-tailed around them; "wide"/"narrow": scaled
    by 4 / 0.25 about zero (crosses clamp/ReLU boundaries); "signs": random sign flips; "magnitudes": |x|, and a
    complex input's magnitudes as real-valued complex numbers (red team 39: a candidate dropping its bias when every
    input was >= 0, as after a ReLU, and a term when every imaginary part was 0, was right on inputs centred near
    0). Done where the
    inputs are (the task's device: a host generator takes seconds per GiB), a chunk at a time, in the input's
    layout; no pass draws noise it does not use.
    """
    out = []
    for i, x in enumerate(xs):
        if isinstance(x, torch.Tensor) and x.is_complex() and kind == "magnitudes" and x.numel():
            out.append(x.detach().abs().to(x.dtype))
            continue
        if isinstance(x, torch.Tensor) and x.is_complex() and kind != "given" and x.numel():
            # complex inputs widen as their real and imaginary parts (red team 24: never varied, a capped
            # magnitude was accepted); tensors inside lists and tuples widen as top-level ones
            parts = torch.view_as_real(x.detach().resolve_conj().contiguous())
            out.append(torch.view_as_complex(widen([parts], kind, gen, Contract())[0].contiguous()))
            continue
        if isinstance(x, (list, tuple)) and kind != "given" and any(isinstance(y, torch.Tensor) for y in x):
            try:
                out.append(type(x)(widen(list(x), kind, gen, Contract())))
            except TypeError:                   # a tuple subclass taking other arguments
                out.append(x)
            continue
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()) or kind == "given" or x.numel() == 0:
            out.append(x)
            continue
        x = x.detach()
        g, dev, cdt = _gen_on(gen, x.device), x.device, _compute_dtype(x.dtype)
        if kind in ("wide", "narrow"):
            y = x * (4.0 if kind == "wide" else 0.25)       # exact in binary formats (overflow to inf as in fp64)
        elif kind == "magnitudes":
            y = x.abs()
        elif kind == "signs":
            y = x.clone(memory_format=torch.contiguous_format)
            for c in _chunks(y):
                c.mul_(torch.where(torch.rand(c.numel(), generator=g, device=dev) < 0.5, -1.0, 1.0).to(c.dtype))
        elif kind in ("normal", "heavy"):
            mean, std, _ = moments(x)
            std = std if std > 0 and math.isfinite(std) else 1.0
            mean = mean if math.isfinite(mean) else 0.0
            y = torch.empty(x.shape, dtype=x.dtype, device=dev)
            for c in _chunks(y):
                z = torch.randn(c.numel(), generator=g, dtype=cdt, device=dev)
                if kind == "heavy":
                    z.mul_(torch.randn(c.numel(), generator=g, dtype=cdt, device=dev).exp_())
                c.copy_(z.mul_(std).add_(mean))
        else:
            raise ValueError(kind)
        d = contract.domain_of(i)
        if d is not None:
            y = _into_domain(y, d.low, d.high)
        if not x.is_contiguous() and y.is_contiguous():      # the input's own layout (a transposed view stays one)
            y = torch.empty_like(x).copy_(y)
        elif x.is_contiguous() and not y.is_contiguous():
            y = y.contiguous()
        out.append(y)
    return out


def _chunks(y: torch.Tensor):
    """Views of a contiguous tensor's elements, `CHUNK` at a time."""
    flat = y.view(-1)
    for a in range(0, flat.numel(), CHUNK):
        yield flat[a:a + CHUNK]


def _into_domain(y: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Map values into [low, high] keeping variety: affine from the sample's own range, then clamp (in place
    on `y`, which the caller owns; in fp32 for narrower formats)."""
    dtype = y.dtype
    w = y if y.dtype == _compute_dtype(y.dtype) else y.float()
    lo, hi = float(w.min()), float(w.max())
    if hi > lo and (lo < low or hi > high):
        w.sub_(lo).mul_((high - low) / (hi - lo)).add_(low)
    w.clamp_(low, high)
    return w.to(dtype)


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
            mean, std, _ = moments(x)
            std = std if x.numel() > 1 and std > 0 and math.isfinite(std) else 1.0
            y = torch.randn(shape, generator=g, dtype=_compute_dtype(x.dtype), device=dev)
            out[i] = y.mul_(std).add_(mean if math.isfinite(mean) else 0.0).to(x.dtype)
        elif x.dtype == torch.bool:
            out[i] = torch.rand(shape, generator=g, device=dev) < 0.5
        else:
            lo, hi = int(x.min()), int(x.max())
            out[i] = torch.randint(lo, hi + 1, shape, generator=g, dtype=x.dtype, device=dev)
    return out


def perturb(state: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Perturbed copies of the parameters and float buffers, so defaults (LayerNorm 1/0) cannot be assumed.
    Strictly positive tensors (variances, scales) multiplicatively, staying positive; all others (all-zero biases
    too) additively. In fp64 a CHUNK at a time (whole-size fp64 copies ran the judge of an 8 GiB MLP out of memory)."""
    out = {}
    for k, v in state.items():
        if not v.is_floating_point() or v.numel() == 0:
            out[k] = v.clone()
            continue
        flat = v.detach().reshape(-1)
        g = _gen_on(gen, v.device)
        positive = bool((flat > 0).all())
        if not positive:
            _, std, _ = moments(flat)           # one element: its absolute value
            sigma = 0.2 * (std if std > 0 and math.isfinite(std) else 1.0)
        y = torch.empty(flat.shape, dtype=v.dtype, device=v.device)
        for a in range(0, flat.numel(), CHUNK):
            w, noise = flat[a:a + CHUNK].double(), torch.randn(min(CHUNK, flat.numel() - a), generator=g,
                                                               dtype=torch.float64, device=v.device)
            y[a:a + CHUNK] = (w * torch.exp(noise.mul_(0.2)) if positive else w + noise.mul_(sigma)).to(v.dtype)
        out[k] = y.view(v.shape) if v.is_contiguous() else torch.empty_like(v).copy_(y.view(v.shape))   # its layout
    return out


# ---------------------------------------------------------------- trials beyond the given values
# (gate/trials.py decides which of these a task gets, after probing the reference with them)

def _rng(gen: torch.Generator) -> random.Random:
    """A Python RNG seeded from `gen`, for picking a few positions of a tensor of any size."""
    return random.Random(int(torch.randint(1 << 62, (1,), generator=gen)))


def _put(y: torch.Tensor, positions: list[int], values: list[Any]) -> None:
    """Write `values` at flat (row-major) `positions` of `y`, whatever its strides."""
    if not positions:
        return
    vals = torch.tensor(values, dtype=torch.float64 if y.is_floating_point() else torch.int64).to(y.dtype).to(y.device)
    if y.dim() == 0:
        y.fill_(vals[0])
        return
    idx = torch.unravel_index(torch.tensor(positions, device=y.device), y.shape)
    y[idx] = vals


@dataclass(frozen=True)
class IntDomain:
    """Values an integer (or bool) input may take, as inferred from its generator and probed on the reference."""

    low: int
    high: int                          # inclusive
    specials: tuple[int, ...] = ()     # values outside [low, high] the reference accepts (-100: ignore_index)
    density: float | None = None       # bool inputs: the share of True in the given values

    def draw(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """New values for `x` (same shape, dtype and strides) over the whole domain: uniform, plus the two
        ends and each special value at a few positions."""
        g, n = _gen_on(gen, x.device), x.numel()
        if x.dtype == torch.bool:
            p = min(max(self.density if self.density is not None else 0.5, 0.1), 0.9)
            y = torch.rand(x.shape, generator=g, device=x.device) < p
        else:
            y = torch.randint(self.low, self.high + 1, x.shape, generator=g, dtype=torch.int64, device=x.device)
            r = _rng(gen)
            ends = [self.low, self.high] + [s for s in self.specials for _ in range(max(1, n // 64))]
            if n >= 2 * len(ends):
                _put(y, r.sample(range(n), len(ends)), ends)
            elif n:
                _put(y, list(range(n)), [r.choice(ends) if r.random() < 0.5 else int(v) for v in y.reshape(-1)])
        out = torch.empty_like(x)
        out.copy_(y)
        return out


def integer_sizes(xs: list[Any], model: torch.nn.Module, init_inputs: list[Any]) -> set[int]:
    """Sizes an integer input might index into: every dimension of the inputs, parameters and buffers,
    and the integer constructor arguments (a class count, a vocabulary size)."""
    sizes: set[int] = set()
    for x in xs:
        if isinstance(x, torch.Tensor):
            sizes.update(x.shape)
        elif isinstance(x, int) and not isinstance(x, bool):
            sizes.add(x)
    for t in list(model.parameters()) + list(model.buffers()):
        sizes.update(t.shape)
    sizes.update(a for a in init_inputs if isinstance(a, int) and not isinstance(a, bool))
    return {n for n in sizes if n > 0}


def infer_int_domain(i: int, samples: list[list[Any]], sizes: set[int], accepts: Callable[[list[Any]], bool],
                     gen: torch.Generator) -> IntDomain | None:
    """The valid range of integer input `i`: the values its generator produced across `samples`, widened up to
    the largest size it could index into (sizes tried in increasing order, up to the first the reference
    rejects), to negative indices and to special values (-1, -100, 0) where the reference accepts them (`accepts` runs the reference on samples[0] with a few positions changed). None
    when the reference accepts no new draw over the range."""
    base = samples[0]
    x = base[i]
    xs = [s[i] for s in samples if isinstance(s[i], torch.Tensor) and s[i].dtype == x.dtype and s[i].numel()]
    r = _rng(gen)

    def with_values(values: list[int], inp: list[Any] = base) -> list[Any]:
        y = inp[i].clone()
        _put(y, r.sample(range(y.numel()), min(len(values), y.numel())), values[:y.numel()])
        return [y if k == i else v for k, v in enumerate(inp)]

    if x.dtype == torch.bool:
        dom = IntDomain(0, 1, density=float(sum(float(v.float().mean()) for v in xs) / len(xs)))
    else:
        info = torch.iinfo(x.dtype)
        lo, hi = min(int(v.min()) for v in xs), max(int(v.max()) for v in xs)
        high = hi
        for n in sorted(n for n in sizes if n - 1 > hi)[:4]:      # the table, class count... it may index
            top = min(n - 1, info.max)
            if top <= high or not accepts(with_values([top, r.randint(high, top)])):
                break
            high = top
        low, neg = lo, max(-(high + 1), info.min)
        if lo >= 0 and neg < 0 and accepts(with_values([neg, -1, r.randint(neg, -1)])):
            low = neg                                            # Python-style indices from the end
        elif lo > 0 and accepts(with_values([0])):
            low = 0
        specials = tuple(v for v in (-1, -100) if info.min <= v < low and accepts(with_values([v])))
        dom = IntDomain(low, high, specials)
    for d in (dom, IntDomain(dom.low, dom.high, (), dom.density)):
        if accepts([d.draw(x, gen) if k == i else v for k, v in enumerate(base)]):
            return d
    return None


def perturb_ints(state: dict[str, torch.Tensor], gen: torch.Generator) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Integer and bool buffers changed within the range they hold: distinct values (a permutation, an
    index list) shuffled, other integer tensors redrawn over [min, max], a constant (a counter, a shift)
    moved by 1 or 2 away from zero's side, bools flipped at ~10% of positions. Returns the new state and
    the changed keys; the caller keeps it only where the reference still runs."""
    out, changed, r = dict(state), [], _rng(gen)
    for k, v in state.items():
        if v.is_floating_point() or v.is_complex() or v.numel() == 0:
            continue
        g = _gen_on(gen, v.device)
        if v.dtype == torch.bool:
            flip = torch.rand(v.shape, generator=g, device=v.device) < 0.1
            if not bool(flip.any()):
                flip.view(-1)[r.randrange(v.numel())] = True
            y = v ^ flip
        else:
            lo, hi = int(v.min()), int(v.max())
            info = torch.iinfo(v.dtype)
            if lo == hi:
                step = r.choice((1, 2))
                y = torch.full_like(v, lo + step if lo >= 0 or lo - step < info.min else lo - step)
            elif v.numel() == int(torch.unique(v).numel()):
                y = v.reshape(-1)[torch.randperm(v.numel(), generator=g, device=v.device)].reshape(v.shape)
            else:
                y = torch.randint(lo, hi + 1, v.shape, generator=g, dtype=v.dtype, device=v.device)
        out[k] = y.to(v.dtype).clone()
        changed.append(k)
    return out, changed


def flip_signs(state: dict[str, torch.Tensor], keys: list[str]) -> dict[str, torch.Tensor]:
    """`state` with the listed float tensors negated (so "a scale is positive" cannot be assumed)."""
    return {k: (-v if k in keys else v) for k, v in state.items()}


def with_nonfinite(xs: list[Any], gen: torch.Generator, contract: Contract) -> list[Any] | None:
    """Copies of the inputs with NaN, +Inf and -Inf at a few random positions of every float input that has
    no declared domain (None when there is none)."""
    out, any_float, r = list(xs), False, _rng(gen)
    for i, x in enumerate(xs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()) or x.numel() == 0 or contract.domain_of(i):
            continue
        specials = [math.nan, math.inf, -math.inf]
        r.shuffle(specials)
        k = min(len(specials), x.numel())
        y = x.clone()
        _put(y, r.sample(range(x.numel()), k), specials[:k])
        out[i], any_float = y, True
    return out if any_float else None


#: magnitude of the extreme values, in units of the input's RMS (far beyond any generator's draws: exp overflows)
EXTREME = 1000.0


def with_extremes(xs: list[Any], gen: torch.Generator, contract: Contract) -> list[Any] | None:
    """Copies of the inputs with +M and -M (M = EXTREME x the input's RMS, within a sixteenth of the format's
    range) at two random positions of every float input that has no declared domain (None when there is none)."""
    out, any_float, r = list(xs), False, _rng(gen)
    for i, x in enumerate(xs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()) or x.numel() < 2 or contract.domain_of(i):
            continue
        rms = moments(x)[2]
        m = min(EXTREME * (rms if rms > 0 and math.isfinite(rms) else 1.0), torch.finfo(x.dtype).max / 16)
        y = x.clone()
        _put(y, r.sample(range(x.numel()), 2), [m, -m])
        out[i], any_float = y, True
    return out if any_float else None


def edit(xs: list[Any], gen: torch.Generator, contract: Contract, domains: dict[int, IntDomain],
         counts: dict[int, int]) -> list[Any]:
    """Copies of the inputs changed at `counts[i]` random positions of input i and nowhere else: floats moved
    by 2-4 standard deviations (or redrawn inside a declared domain), integers redrawn from their domain,
    bools flipped. Against a cache keyed on a few sampled elements, which then answers stale."""
    out, r = list(xs), _rng(gen)
    for i, count in counts.items():
        x = xs[i]
        k = min(count, x.numel())
        pos = r.sample(range(x.numel()), k)
        y = x.clone()
        if x.dtype == torch.bool:
            idx = torch.unravel_index(torch.tensor(pos, device=x.device), x.shape) if x.dim() else ()
            y[idx] = ~y[idx]
        elif x.is_floating_point():
            flat = x.detach().reshape(-1)
            old = flat[torch.tensor(pos, device=x.device)].double().tolist()
            d = contract.domain_of(i)
            std = moments(flat)[1]
            std = std if std > 0 and math.isfinite(std) else 1.0
            if d is not None:
                new = [r.uniform(d.low, d.high) for _ in old]
            else:
                new = [v + r.choice((-1, 1)) * r.uniform(2.0, 4.0) * std for v in old]
            _put(y, pos, new)
        else:
            dom = domains[i]
            old = x.reshape(-1)[torch.tensor(pos, device=x.device)].tolist()
            choices = list(range(dom.low, dom.high + 1)) if dom.high - dom.low < 64 else None
            new = []
            for v in old:
                for _ in range(16):
                    c = r.choice(choices + list(dom.specials)) if choices else r.choice(
                        [r.randint(dom.low, dom.high)] * 4 + list(dom.specials))
                    if c != v:
                        break
                new.append(c)
            _put(y, pos, new)
        out[i] = y
    return out


def describe(xs: list[Any]) -> str:
    parts = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            parts.append(f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}")
        else:
            parts.append(repr(x))
    return ", ".join(parts)
