"""Write the drop-in module: the best verified implementation behind guards, the reference otherwise."""
from __future__ import annotations

import pprint
from pathlib import Path
from typing import Any

import torch

from .versions import software

GUARD = '''

# ---- kernelgate: drop-in module --------------------------------------------------------------
# The fast path runs only where it was verified: the same device type (and GPU model), the same
# torch/triton versions, inputs of the verified shapes and dtypes, and the verified modes (see
# _KG_VERIFIED["modes"]: the gate checks eval mode with autograd off, so training mode, in any
# submodule, and calls autograd records take the reference path). Anything else takes the
# reference path with the same parameters, so the module is safe to import anywhere.
import torch as _kg_torch

_KG_VERIFIED = json_verified
_KgReference = {ref_cls}
_KgBest = ModelNew


def _kg_versions_match():
    if _kg_torch.__version__ != _KG_VERIFIED["torch"]:
        return False
    if _KG_VERIFIED["triton"] is not None:
        try:
            import triton
        except ImportError:
            return False
        if triton.__version__ != _KG_VERIFIED["triton"]:
            return False
    return True


_KG_ENV_OK = _kg_versions_match()


def _kg_mode_ok(module, tensors):
    """Whether the call is in a mode the gate verified: eval mode (every submodule), and autograd off under
    torch.no_grad() (not inference mode), unless training / autograd were verified too. A candidate can branch
    on the autograd mode, so a mode the gate never ran (autograd on with nothing requiring grad, inference
    mode) takes the reference path."""
    modes = _KG_VERIFIED["modes"]
    if not modes["training"]:
        if module.training:
            return False
        subs = module.__dict__.get("_kg_submodules")     # listed once (about 30 ns a module per call after)
        if subs is None:
            subs = [m for m in module.modules() if m is not module]
            object.__setattr__(module, "_kg_submodules", subs)
        if any(m.training for m in subs):
            return False
    if not modes["grad"] and (_kg_torch.is_grad_enabled() or _kg_torch.is_inference_mode_enabled()):
        return False
    return True


def _kg_fast_path_ok(args, module=None):
    """Whether a call of `module` (its modes checked where given) with args takes the fast path."""
    if not _KG_ENV_OK:
        return False
    tensors = [a for a in args if _kg_torch.is_tensor(a)]
    if not tensors or any(t.device.type != _KG_VERIFIED["device_type"] for t in tensors):
        return False
    if module is not None and not _kg_mode_ok(module, tensors):
        return False
    if _KG_VERIFIED["gpu"] is not None and _kg_torch.cuda.get_device_name(tensors[0].device) != _KG_VERIFIED["gpu"]:
        return False
    sig = [[list(a.shape), str(a.dtype), list(a.stride()), a.storage_offset()] if _kg_torch.is_tensor(a)
           else repr(a) for a in args]
    return sig in _KG_VERIFIED["signatures"]


class {ref_cls}(_KgBest):
    """Drop-in replacement for the original `{ref_cls}`: same constructor, forward and state_dict."""

    def __init__(self, *args, **kwargs):
        # The reference's own methods look its class up by name at call time (`super({ref_cls}, self)`),
        # and that name now means this class: while they construct, it means the original again, so such
        # a call continues after the original in this class's MRO, as it did before.
        g = globals()
        saved = g.get("{ref_cls}")
        g["{ref_cls}"] = _KgReference
        try:
            super().__init__(*args, **kwargs)
        finally:
            g["{ref_cls}"] = saved

    def forward(self, *args):
        if _kg_fast_path_ok(args, self):
            return super().forward(*args)
        return _KgReference.forward(self, *args)


ModelNew = {ref_cls}
'''


def _wrap(text: str, width: int = 100) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


def signatures(input_sets: list[list[Any]]) -> list[Any]:
    out = []
    for xs in input_sets:
        sig = [[list(a.shape), str(a.dtype), list(a.stride()), a.storage_offset()] if isinstance(a, torch.Tensor)
               else repr(a) for a in xs]
        if sig not in out:
            out.append(sig)
    return out


#: The modes the gate verifies a candidate in (worker.py: model.eval(), every call under torch.no_grad()):
#: the fast path of an emitted module runs in these only.
GATE_MODES = {"training": False, "grad": False}


def modes_text(modes: dict[str, bool] = GATE_MODES) -> str:
    """Which calls take the fast path, in words (optimized.py's docstring, the report's notes)."""
    if modes["training"] and modes["grad"]:
        return "The fast path runs in eval and training mode, with or without autograd (all verified)."
    when = "eval or training mode" if modes["training"] else "eval mode (every submodule)"
    if not modes["grad"]:
        when += " under torch.no_grad() (not torch.inference_mode(), not autograd on with nothing requiring grad)"
    other = [(w, v) for w, v, ok in (("training mode (of any submodule)", "takes", modes["training"]),
                                     ("calls with autograd on or in inference mode", "take", modes["grad"]))
             if not ok]
    verb = "take" if len(other) > 1 else other[0][1]
    return (f"The fast path runs only in the modes the gate verified: {when}. "
            f"{' and '.join(w for w, _ in other).capitalize()} "
            f"{verb} the reference path (the original's forward: its outputs, gradients and buffer updates, "
            "batch-norm running statistics included).")


def emit(path: Path, candidate_source: str, ref_cls: str, device: str, input_sets: list[list[Any]],
         strategy: str, modes: dict[str, bool] | None = None) -> Path:
    """Write optimized.py from a verified candidate's source (which defines the reference and ModelNew).
    `modes`: the modes the candidate was verified in (default: the gate's, GATE_MODES)."""
    path.write_text(render(candidate_source, ref_cls, device, input_sets, strategy, modes))
    return path


def render(candidate_source: str, ref_cls: str, device: str, input_sets: list[list[Any]], strategy: str,
           modes: dict[str, bool] | None = None) -> str:
    """optimized.py's text (`emit`): the same arguments give the same bytes."""
    sw = software()
    modes = dict(modes or GATE_MODES)
    verified = {
        "strategy": strategy, "device_type": torch.device(device).type,
        "gpu": torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None,
        "torch": str(sw["torch"]), "triton": sw.get("triton") if device.startswith("cuda") else None,
        "signatures": signatures(input_sets), "modes": modes,
    }
    header = (f'"""Optimized by kernelgate: {strategy}.\n\nImport in place of the original module; '
              f'load the original state_dict.\n\n{_wrap(modes_text(modes))}\n"""\n')
    guard = GUARD.replace("{ref_cls}", ref_cls).replace("json_verified", pprint.pformat(verified, width=100))
    return header + candidate_source.rstrip() + "\n" + guard


def baseline_source(reference_source: str, ref_cls: str, kind: str) -> str:
    """When no candidate wins: the reference itself, or the reference under torch.compile (default mode)."""
    if kind != "compile":
        return reference_source.rstrip() + f"\n\nModelNew = {ref_cls}\n"
    return reference_source.rstrip() + f'''


class ModelNew({ref_cls}):
    """The faster baseline: the reference under torch.compile (default mode)."""

    def forward(self, *args):
        fn = self.__dict__.get("_kg_compiled")
        if fn is None:
            import torch
            fn = torch.compile(super().forward)
            object.__setattr__(self, "_kg_compiled", fn)
        return fn(*args)
'''
