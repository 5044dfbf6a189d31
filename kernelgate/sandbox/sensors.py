"""What the worker reports about itself and about each output: numerics flags, the identity of its clocks,
who started each thread, an output's kind, layout and aliasing. Sensors for honest mistakes and messages
(a candidate's process can forge them); the judge cross-checks what it can from outside.
Imported by the worker before any candidate code (it tracks threading.Thread.start from then on)."""
from __future__ import annotations

import os
import random as _random_module
import secrets as _SECRETS
import sys
import threading
import time as _time
import weakref
from types import ModuleType
from typing import Any

import torch

from .. import clock
from . import loop
from .handle import _same_bits  # noqa: F401 - the worker's input check, from handle

# read through torch's C getters, bound now: a candidate that replaces the Python-level getters (torch.backends,
# torch.get_float32_matmul_precision) changes nothing here
_C = torch._C
_FLAG_GETTERS = (_C._get_cublas_allow_tf32, _C._get_cudnn_allow_tf32, _C._get_float32_matmul_precision,
                 _C._get_cublas_allow_fp16_reduced_precision_reduction,
                 _C._get_cublas_allow_bf16_reduced_precision_reduction, torch.get_default_dtype, torch.get_num_threads)
# switches a caller's later work runs under (red team 38: oneDNN switched off made a caller's conv 2.4x slower)
_SWITCHES = tuple((name, getattr(_C, getter)) for name, getter in (
    ("mkldnn.enabled", "_get_mkldnn_enabled"), ("cudnn.enabled", "_get_cudnn_enabled"),
    ("cudnn.deterministic", "_get_cudnn_deterministic"), ("cudnn.benchmark", "_get_cudnn_benchmark"),
    ("nnpack.enabled", "_get_nnpack_enabled"), ("deterministic_algorithms", "_get_deterministic_algorithms"))
    if hasattr(_C, getter))
_FULL, _MUL = torch.full, torch.mul
# Python's and NumPy's global generators, bound now (red team 39 reseeded them: a caller's shuffles repeated)
_PY_GET, _PY_SEED = _random_module.getstate, _random_module.seed
try:
    import numpy as _np
    _NP_GET, _NP_SEED = _np.random.get_state, _np.random.seed
except ImportError:  # pragma: no cover - numpy comes with torch
    _NP_GET = _NP_SEED = None


def _first(v: Any) -> bool:
    return bool(v[0]) if isinstance(v, tuple) else bool(v)


def numerics_flags() -> dict[str, Any]:
    """Global settings that change numerical results."""
    tf32, cudnn, prec, fp16, bf16, dtype, threads = _FLAG_GETTERS
    return {
        "cuda.matmul.allow_tf32": bool(tf32()),
        "cudnn.allow_tf32": bool(cudnn()),
        "float32_matmul_precision": str(prec()),
        "cuda.matmul.allow_fp16_reduced_precision_reduction": _first(fp16()),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": _first(bf16()),
        "default_dtype": str(dtype()),
        "num_threads": int(threads()),
        **{name: bool(get()) for name, get in _SWITCHES},
        # torch.set_flush_denormal has no getter: a subnormal through one multiply (this thread's FPU mode, where
        # the candidate's code runs: jobs.flags reads on the runner)
        "flush_denormal": bool(_MUL(_FULL((1,), 1e-40, dtype=torch.float32), 1.0).item() == 0.0),
    }


RNG_DRAWN = {"error": "flags", "message": "the forward drew from or reseeded the global random generators "
             "(torch.manual_seed, a random op): a caller's later draws change; the reference's does neither"}


def loaded_as(ref_path: str) -> list[str]:
    """The names of the modules loaded from the reference's file (a candidate falling back to the reference)."""
    mods: list[str] = []
    if ref_path:
        base = os.path.basename(ref_path)
        for m in list(sys.modules.values()):
            if type(m) is not ModuleType:          # anything else's attributes could run candidate code here
                continue
            f, name = vars(m).get("__file__"), vars(m).get("__name__")
            # str.endswith first (a C method: the harness thread's trace function sees no call, and most of ~2000
            # modules end here), the exact tests only for the few that end in the reference's file name
            if (type(f) is str and type(name) is str and f.endswith(base) and os.path.basename(f) == base
                    and os.path.realpath(f) == ref_path):
                mods.append(name)
    return mods


def rng_fresh(device: str) -> bytes:
    """The global generators (torch's, Python's `random`, NumPy's legacy one) seeded with a secret, and their state:
    a forward reseeding them to a seed of its own (the same state after every call) changes them from this one."""
    seed = _SECRETS.randbits(62)
    _C.default_generator.manual_seed(seed)
    _PY_SEED(seed)
    if _NP_SEED is not None:
        _NP_SEED(seed & 0xFFFFFFFF)
    gen = _cuda_generator(device)
    if gen is not None:
        gen.manual_seed(seed)
    return rng_state(device)


def _cuda_generator(device: str) -> Any:
    """The device's default generator once CUDA is up, else None."""
    if device.startswith("cuda") and torch.cuda.is_initialized():
        return torch.cuda.default_generators[torch.device(device).index or 0]
    return None


def rng_state(device: str) -> bytes:
    """The global random generators' state (CPU, and the device's once CUDA is up): a forward that draws from them or
    reseeds them changes a caller's later draws (red team 38: `torch.manual_seed(0)` in forward made every training
    step's dropout mask the same), which a deterministic reference does not (oracle.py, `probe`)."""
    state = bytes(_C.default_generator.get_state().numpy().tobytes()) + repr(_PY_GET()).encode()
    if _NP_GET is not None:
        kind, keys, pos, has_gauss, cached = _NP_GET()
        state += bytes(keys.tobytes()) + repr((kind, pos, has_gauss, cached)).encode()
    gen = _cuda_generator(device)
    if gen is not None:
        state += bytes(gen.get_state().numpy().tobytes())
    return state


_THREAD_ORIGIN: "weakref.WeakKeyDictionary[threading.Thread, str]" = weakref.WeakKeyDictionary()
_THREAD_START = threading.Thread.start
# stdlib machinery that starts threads on its caller's behalf (pool workers, queue feeder threads)
_PLUMBING = ("threading", "concurrent.futures", "multiprocessing", "kernelgate.sandbox.worker",
             "kernelgate.sandbox.sensors")
_TORCH = ("torch.", "triton.")


def _lib_dirs() -> tuple[str, ...]:
    import importlib.util
    dirs = [os.path.dirname(torch.__file__) + os.sep]
    spec = importlib.util.find_spec("triton")         # where triton lives, without importing it
    if spec is not None and spec.origin:
        dirs.append(os.path.dirname(spec.origin) + os.sep)
    return tuple(dirs)


_LIB_DIRS = _lib_dirs()
_CANDIDATE_MODULE = "kernelgate_candidate"


def _creator() -> str:
    """Who started a thread: walking out from the start call, the first frame of torch/triton or of the
    candidate's file decides (a library in between, such as tqdm's monitor under inductor's autotuning,
    is attributed to whoever called it); with neither on the stack, the first frame outside the plumbing."""
    f = sys._getframe(2)
    first = ""
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod == _CANDIDATE_MODULE:
            return mod
        # torch's or triton's by where the code lives, not by the module name it claims (exec can set any)
        if (mod.startswith(_TORCH) or mod in ("torch", "triton")) and f.f_code.co_filename.startswith(_LIB_DIRS):
            return mod
        if not first and not mod.startswith(_PLUMBING):
            first = mod or f.f_code.co_filename
        f = f.f_back
    return first


def _tracked_start(self: threading.Thread) -> None:
    _THREAD_ORIGIN[self] = _creator()
    _THREAD_START(self)


threading.Thread.start = _tracked_start


def _torch_owned(t: threading.Thread) -> bool:
    origin = _THREAD_ORIGIN.get(t, "")
    return origin.startswith(_TORCH) or origin in ("torch", "triton")


def candidate_threads() -> int:
    """Live Python threads, not counting those started from torch's or triton's own code
    (torch.compile's compile and autotuning pools)."""
    return sum(1 for t in threading.enumerate() if not _torch_owned(t))


def describe_candidate_threads() -> list[str]:
    """Name and origin of each live thread counted as the candidate's (for the verdict's message)."""
    return [f"{t.name} ({type(t).__name__}, started from {_THREAD_ORIGIN.get(t, 'outside Python threading')})"
            for t in threading.enumerate() if not _torch_owned(t)][:8]


def torch_threads() -> int:
    """Live Python threads started from torch's or triton's own code."""
    return sum(1 for t in threading.enumerate() if _torch_owned(t))


def timer_ids() -> dict[str, int]:
    """Identity of every clock and timing function a harness could rely on."""
    import statistics
    objs = {
        "time.perf_counter": _time.perf_counter, "time.perf_counter_ns": _time.perf_counter_ns,
        "time.time": _time.time, "time.monotonic": _time.monotonic, "time.monotonic_ns": _time.monotonic_ns,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "statistics.median": statistics.median, "threading.Thread.start": threading.Thread.start,
        "kernelgate.clock.perf_ns": clock.perf_ns, "kernelgate.clock.monotonic": clock.monotonic,
        "kernelgate.clock.cuda_sync": clock.cuda_sync, "kernelgate.clock.Event": clock.Event,
        "kernelgate.clock.device_sync": clock.device_sync, "kernelgate.clock.EventBase": clock.EventBase,
        "kernelgate.loop.timed_loop": loop.timed_loop, "kernelgate.loop.warm_up": loop.warm_up,
    }
    return {k: id(v) for k, v in objs.items()}


# The containers an output may come in: plain tuples and lists, and torch's result tuples (torch.max(x, 1)
# returns torch.return_types.max). A subclass of the candidate's could run its code (a Python __iter__, or a
# chain of C callables no tracer sees) when the harness iterates it, so it is never iterated here.
_CONTAINERS = frozenset([tuple, list] + [t for t in vars(torch.return_types).values()
                                         if isinstance(t, type) and issubclass(t, tuple)])


def _tensors(objs: Any) -> list[torch.Tensor]:
    """The tensors in (nested plain tuples/lists of) objects."""
    out: list[torch.Tensor] = []
    stack = list(objs) if type(objs) in _CONTAINERS else [objs]
    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            out.append(o)
        elif type(o) in _CONTAINERS:
            stack.extend(o)
    return out


def _storages(xs: list[Any]) -> list[tuple[int, int]]:
    """The byte ranges of the inputs' storages (an output overlapping one aliases that input, whatever
    storage object it was built on: a view, from_blob, or an array interface at an offset)."""
    spans = []
    for x in xs:
        if isinstance(x, torch.Tensor) and x.numel() > 0:
            st = x.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
    return spans


def _overlaps(o: torch.Tensor, spans: list[tuple[int, int]]) -> bool:
    if o.numel() == 0:
        return False
    st = o.untyped_storage()
    lo, hi = st.data_ptr(), st.data_ptr() + st.nbytes()
    return any(lo < b and a < hi for a, b in spans)


def describe_output(out: Any, in_ptrs: list[tuple[int, int]], device: str) -> dict:
    """Check the output's kind; its tensors (as returned) plus the metadata the judge compares."""
    if isinstance(out, (tuple, list)) and type(out) not in _CONTAINERS:
        return {"error": "output_type", "message": f"the output is a {type(out).__name__} (a subclass of "
                f"{'tuple' if isinstance(out, tuple) else 'list'}); expected a tensor, or a plain tuple or list of tensors"}
    single = type(out) not in _CONTAINERS
    outs = [out] if single else list(out)
    meta, tensors, spans = [], [], []
    for k, o in enumerate(outs):
        if type(o) is not torch.Tensor:
            kind = type(o).__name__ if not isinstance(o, torch.Tensor) else f"tensor subclass {type(o).__name__}"
            return {"error": "output_type", "message": f"output {k} is {kind}, expected a plain torch.Tensor"}
        if o.layout != torch.strided or o.is_meta:
            return {"error": "output_type", "message": f"output {k} has layout {o.layout}; expected strided with storage"}
        if o.requires_grad:  # under torch.no_grad() the reference's never does (red team 38: a caller's .numpy() failed)
            return {"error": "output_type", "message": f"output {k} requires grad (a tensor made with requires_grad=True "
                    "or under torch.enable_grad()); the gate calls under torch.no_grad(), where the reference's does not"}
        if o.is_neg():      # its memory holds the negated values (red team 36): no op of the reference's returns one
            return {"error": "output_type", "message": f"output {k} is a negative-bit view (its memory holds the "
                    "negated values); expected a plain tensor"}
        aliased = _overlaps(o, in_ptrs)
        shares = next((j for j, span in enumerate(spans) if span is not None and _overlaps(o, [span])), None)
        spans.append(_storages([o])[0] if o.numel() else None)
        meta.append({"dtype": str(o.dtype), "shape": list(o.shape), "stride": list(o.stride()),
                     "device": str(o.device), "aliased": aliased, "shares": shares, "conj": bool(o.is_conj())})
        tensors.append(o.detach())                 # copied into the reply (shared region or inline) when sent
    return {"single": single, "meta": meta, "tensors": tensors}


def _unclean(t: Any) -> str | None:
    """Why a tensor the harness keeps or checks may not be touched: not a plain tensor, or an attribute dict that is
    not an empty plain dict (read with exact types: nothing of the candidate's runs here)."""
    if type(t) is not torch.Tensor:
        return f"a tensor the harness checks is a {type(t).__qualname__}, not a plain torch.Tensor"
    d = vars(t)
    if type(d) is not dict:
        return "a tensor the harness checks was given an attribute dict of another type"
    if dict.__len__(d):
        return (f"a tensor the harness checks carries instance attributes ({', '.join(sorted(dict.keys(d)))[:200]})"
                ": they would shadow its methods")
    return None


def kernel_artifacts(events: list[dict[str, Any]], budget: int = 64 << 20) -> list[dict[str, Any]]:
    """The compiled kernels (.ptx/.ttgir/.cubin/.json) in this process's private caches that the profiled forward
    launched (`events`: the trace's, whose kernel names are matched; inductor's autotuning leaves hundreds of
    others), up to `budget` bytes."""
    from pathlib import Path
    found: list[dict[str, Any]] = []
    launched = {e["name"].split("(")[0].split()[-1] for e in events
                if str(e.get("cat", "")).lower() == "kernel" and e["name"]}
    for var in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        root = os.environ.get(var)
        for p in sorted(Path(root).rglob("*")) if root and os.path.isdir(root) else []:
            if (p.suffix not in (".ptx", ".ttgir", ".cubin", ".json") or p.stem.startswith("__grp__")
                    or (launched and p.stem not in launched)
                    or not p.is_file() or p.stat().st_size > min(8 << 20, budget)):
                continue
            if p.suffix == ".json" and not any(p.with_suffix(s).exists() for s in (".ptx", ".cubin")):
                continue
            data = p.read_bytes()
            budget -= len(data)
            found.append({"kernel": p.stem, "kind": p.suffix[1:], "dir": p.parent.name,
                          "data": data if p.suffix == ".cubin" else data.decode(errors="replace")})
    return found


def profile_reply(text: Any, msg: dict[str, Any], observations: Any) -> dict[str, Any]:
    """The profile op's reply from the chrome trace's `text` (jobs.profile): the events of the asked categories
    (plain dicts, whitelisted args, at most `max_events`), the device's properties, the worker's observations and,
    with `artifacts`, the compiled kernels those events launched (`kernel_artifacts`)."""
    import json
    if type(text) is not str:
        return {"error": "crash", "message": "the profile came back as something other than text"}
    trace = json.loads(text)
    cats, keys, cap = set(msg["categories"]), tuple(msg["args"]), int(msg.get("max_events", 200_000))
    events = [{"name": str(e.get("name", ""))[:1000], "cat": str(e["cat"]).lower(), "ts": e.get("ts"),
               "dur": e.get("dur"), "tid": e.get("tid"),
               "args": {k: e["args"][k] for k in keys if k in (e.get("args") or {})}}
              for e in trace.get("traceEvents", []) if e.get("ph") == "X" and str(e.get("cat")).lower() in cats]
    reply: dict[str, Any] = {"ok": True, "events": events[:cap], "truncated": len(events) > cap,
                             "device_properties": trace.get("deviceProperties", []), "observations": observations()}
    if msg.get("artifacts"):
        reply["artifacts"] = kernel_artifacts(events)
    return reply
