"""The harness's jobs that run on the runner thread (kernelgate/sandbox/runner.py): everything that calls the
candidate's code besides the forward itself (its import and construction, loading weights, the profile).

Their frames sit on the runner's stack under the candidate's, so their locals hold only what the candidate may
see anyway (its module, its model, the inputs and weights the judge sends); never the harness. Failures are
raised as runner.BuildFailure and turned into error replies there.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch

from ..structure import structured
from ..workload import import_file
from .runner import BuildFailure, _first_line
from .sensors import _CANDIDATE_MODULE, numerics_flags


def nothing() -> None:
    """A job that only carries the harness's disposals to the runner (runner.py, `dispose`)."""


def flags() -> tuple:
    """The numerics flags as the candidate's code sees them (torch's thread count is per thread), as a tuple of
    (name, value) pairs: a thread of the candidate's can edit a dict the harness is reading (red team 14), not a
    tuple."""
    return tuple(numerics_flags().items())


def prime(device: str, profiler: bool = True) -> None:
    """The runner thread's own start: its Python thread record (so torch asking for the current thread later
    adds none) and, on CUDA, its current device. `profiler`: torch.profiler's first use too, for a worker that
    will be profiled (a search's candidates, `kernelgate profile`): 1.4 s of a CPU worker's 4 s start, which a
    worker only judged (verify, bench) does without."""
    threading.current_thread()
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device).index or 0)
    torch.ones(4, device=device).sum().item()
    (torch.ones(1 << 20) + 1).sum().item()      # the intra-op pool this thread's parallel regions use
    # threads torch starts on first use, started now (no thread can start after the lockdown, and one started
    # during the build would be there at it): the profiler's; on CUDA the autograd engine's device thread
    # (torch.compile's AOT autograd starts it); and no tqdm monitor (torch.fx's progress bars start one that
    # lives on), so none is left by an honest build
    if profiler:
        from torch.profiler import ProfilerActivity, profile as _profile
        with _profile(activities=[ProfilerActivity.CPU]):
            torch.ones(4).sum()
    if device.startswith("cuda"):
        with torch.enable_grad():           # jobs run with grad off unless asked
            x = torch.ones(2, device=device, requires_grad=True)
            (x * 2).sum().backward()
    try:
        import tqdm
        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass


def prime_jax(device: str) -> None:
    """JAX started by the harness, before any candidate code, for a file that imports it (a Pallas candidate, a
    port's Pallas reference): its runtime's threads (XLA's CPU client pools) then exist before the candidate's
    import, as torch's do; without JAX's GPU memory preallocation; CPU computations dispatched synchronously, so
    none runs on JAX's threads after a call returns. A DLPack round trip both ways and one interpreted
    Pallas kernel start what a kernel's first call would. No-op without JAX (the candidate's import then fails)."""
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    # best effort from here (a JAX without this device's backend, Pallas missing): what fails here fails again in
    # the candidate's own build, which reports it; threads it starts there are the candidate's and refused
    for dev in dict.fromkeys(("cpu", device)):
        try:
            t = torch.ones(8, device=dev)
            torch.from_dlpack(jax.jit(lambda v: v + 1)(jax.dlpack.from_dlpack(t))).sum().item()
            # one of kernelgate's own Pallas kernels: its compile starts XLA's LLVM workers (a pool kept for life)
            from ..kernels.pallas_launch import kg_pl_layernorm
            x = torch.ones(4, 8, device=dev)
            kg_pl_layernorm(x, (8,), torch.ones(8, device=dev), torch.zeros(8, device=dev), 1e-5).sum().item()
        except Exception:  # noqa: BLE001
            pass


def construct(path: str, cls_name: str, init_inputs: list, state: dict, seed: int, device: str,
              compile: bool, compile_options: dict, shape: Any = None) -> torch.nn.Module:
    """Import the candidate's file, construct its class, load the reference's weights (strict), move it to the
    device in eval mode, make it take the gate's inputs (the leaves of its arguments: structure.py) and
    compile it when asked."""
    module = import_file(path, name=_CANDIDATE_MODULE)
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise BuildFailure(f"{Path(path).name} defines no nn.Module class '{cls_name}'")
    torch.manual_seed(seed)
    try:
        model = cls(*init_inputs)
    except Exception as e:  # noqa: BLE001
        raise BuildFailure(f"constructing {cls_name} failed: {type(e).__name__}: {e}") from None
    try:
        model.load_state_dict(state, strict=True)
    except Exception as e:  # noqa: BLE001
        raise BuildFailure(f"load_state_dict(strict=True) failed: {_first_line(e)}") from None
    model = structured(model.eval().to(device), shape)
    if compile:
        model = torch.compile(model, **compile_options)
    return model


def handles_fault(model: torch.nn.Module, hooks: bool) -> str | None:
    """What a caller's training gets from the module other than its tensors (red team 40): its own `parameters()` and
    `named_parameters()` must hand out the tensors it holds (copies: a caller's optimizer trains tensors the forward
    never reads), and no parameter or submodule may carry a backward hook where the reference's carry none (`hooks`:
    whether they do; a hook negating the gradients made training diverge)."""
    target = model
    held = {id(t) for _, t in torch.nn.Module.named_parameters(target, remove_duplicate=False)}
    named = {(str(n), id(t)) for n, t in torch.nn.Module.named_parameters(target)}
    if {id(t) for t in target.parameters()} != held or {(str(n), id(t)) for n, t in target.named_parameters()} != named:
        return ("its parameters() or named_parameters() hands out other tensors or names than the module holds (a "
                "caller's optimizer would train tensors its forward never reads, or decay the wrong ones)")
    if hooks:
        return None
    for name, t in torch.nn.Module.named_parameters(target, remove_duplicate=False):
        if t._backward_hooks or getattr(t, "_post_accumulate_grad_hooks", None):
            return f"its parameter '{name}' carries a gradient hook (a caller's training runs it); the reference's carry none"
    for name, m in torch.nn.Module.named_modules(target, remove_duplicate=False):
        if m._backward_hooks or m._backward_pre_hooks:
            return f"its submodule '{name}' carries a backward hook (a caller's training runs it); the reference's carry none"
    return None


def state_of(model: torch.nn.Module, hooks: bool = False) -> list | str:
    """(name, detached tensor) of the module's parameters and persistent buffers: the caller's (its state_dict's),
    which a forward may not change (sandbox/history.py, `state_sigs`); a non-persistent buffer may be a workspace.
    What a caller's training gets from it beside its tensors, where wrong (`handles_fault`), instead."""
    target = getattr(model, "_orig_mod", model)
    fault = handles_fault(target, hooks)
    if fault:
        return fault
    bufs = [(f"{p}.{n}" if p else n, b) for p, m in torch.nn.Module.named_modules(target, remove_duplicate=False)
            for n, b in dict.items(m._buffers) if b is not None and n not in m._non_persistent_buffers_set]
    params = list(torch.nn.Module.named_parameters(target, remove_duplicate=False))
    return [(n, t.detach(), bool(t.requires_grad), id(t), None if t.grad is None else t.grad.detach())
            for n, t in params] + [(n, t.detach(), False, 0, None) for n, t in bufs]


def reload(model: torch.nn.Module) -> str | None:
    """The module's own checkpoint loaded back into it (strict): a module whose state_dict() has keys of its own
    must read what it writes (sandbox/history.py, `roundtrip_fault`)."""
    target = getattr(model, "_orig_mod", model)
    sd = target.state_dict()
    try:
        target.load_state_dict(sd, strict=True)
    except Exception as e:  # noqa: BLE001 - the verdict's reason: what a caller reloading it would see
        return f"its own state_dict() does not load back into it (strict): {_first_line(e)}"
    return None


#: bytes of gradients `zero_grad_fault` gives the parameters at most (the first ones; the rest keep theirs)
ZERO_GRAD_BYTES = 64 << 20


def zero_grad_fault(target: torch.nn.Module) -> str | None:
    """Its zero_grad() as a caller's training loop calls it, on gradients of ones (red team 41: a no-op override, so
    gradients accumulated across steps); each parameter's own gradient back afterwards."""
    grads, budget = [], ZERO_GRAD_BYTES
    for p in torch.nn.Module.parameters(target):
        size = p.numel() * p.element_size()
        if (p.is_floating_point() or p.is_complex()) and size <= budget:
            grads.append((p, p.grad))
            budget -= size
    try:
        for p, _ in grads:
            p.grad = torch.ones_like(p)
        target.zero_grad()
        kept = [p for p, _ in grads if p.grad is not None and bool(p.grad.any())]
    finally:
        for p, g in grads:
            p.grad = g
    return "its zero_grad() leaves gradients in place (a caller's training accumulates them across steps)" if kept \
        else None


def state_dict_of(model: torch.nn.Module) -> list | str:
    """(key, detached tensor) of the module's own `state_dict()` (the candidate's, overridden or not): what a
    checkpoint saved from it holds (sandbox/history.py, `roundtrip_fault`); what its zero_grad() leaves, where wrong
    (`zero_grad_fault`), instead."""
    target = getattr(model, "_orig_mod", model)
    fault = zero_grad_fault(target)
    if fault:
        return fault
    return [(str(k), v.detach() if isinstance(v, torch.Tensor) else v) for k, v in target.state_dict().items()]


def load(model: torch.nn.Module, state: dict, device: str, quiet: bool = False, direct: bool = False) -> None:
    """`state` into the model (strict). `quiet`: afterwards every parameter and buffer of the module gets back
    the version counter it had before, as if written through `.data` (weight averaging, clipping and EMA updates
    write so): a cache of derived weights keyed on versions (red team 29) answers stale. The module's own
    conversions (load hooks) run as in any load, and nothing of the candidate's decides whether the versions
    go back (red team 30: a quiet path that consulted the candidate's `state_dict()` was switched off by it).
    `direct`: where every key names a parameter or buffer of the module of the same shape and dtype, the values are
    written into those tensors, versions set back, and no load hook runs (red team 36: a cache refreshed by a load
    hook answered stale after an in-place update, an EMA or an optimizer's step)."""
    target = getattr(model, "_orig_mod", model)
    named = list(torch.nn.Module.named_parameters(target, remove_duplicate=False)) + \
        list(torch.nn.Module.named_buffers(target, remove_duplicate=False))
    own = [t for _, t in named] if quiet or direct else []
    versions = tuple(t._version for t in own)
    into = dict(named)
    if direct and all(k in into and into[k].shape == v.shape and into[k].dtype == v.dtype for k, v in state.items()):
        with torch.no_grad():
            for k, v in state.items():
                into[k].copy_(v.to(device))
        _set_versions(own, versions)
        return
    try:
        target.load_state_dict({k: v.to(device) for k, v in state.items()}, strict=True)
    except Exception as e:  # noqa: BLE001
        raise BuildFailure(f"load_state_dict(strict=True) failed: {_first_line(e)}") from None
    if own:
        _set_versions(own, versions)


def _set_versions(ts: list[torch.Tensor], versions: tuple[int, ...]) -> None:
    """Version counters set back (torch takes tuples of tensors and versions; older releases one of each)."""
    setter = torch._C._autograd._unsafe_set_version_counter
    try:
        setter(tuple(ts), versions)
    except TypeError:
        for t, v in zip(ts, versions):
            setter(t, v)


def profile(model: torch.nn.Module, xs: list, device: str, warmup: int, iters: int, marker: str) -> str:
    """Warm-up forwards, then `iters` forwards under torch.profiler, each in a `marker.<i>` record_function that
    ends after a device sync; the chrome trace as JSON text (the harness parses it: plain values only)."""
    from torch.profiler import ProfilerActivity, profile as _profile, record_function
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.no_grad():
        for _ in range(warmup):
            model(*xs)
        sync()
        with _profile(activities=activities) as prof:
            for i in range(iters):
                with record_function(f"{marker}.{i}"):
                    model(*xs)
                    sync()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            text = f.read()
    json.loads(text)               # a trace that does not parse fails here, on this thread
    return text
