"""Which known operation a kernel implementation computes, found by running it: the port's built-in proposer.

A port's reference is a kernel (Triton, CUDA C++, Pallas) called from a torch module: its graph is opaque.
`forms(model, xs)` lists the operations of the template library's shape, over the forward's tensor arguments
and the module's own parameters, that fit their shapes: an activation of one input, a row softmax or
log-softmax, a LayerNorm / RMSNorm over the last dim (the weight and bias among the module's parameters or
the inputs), a linear map (x @ W^T + b, W among the parameters) or a matmul of two inputs followed by an
activation, a sum or product of two inputs followed by an activation. `matching(model, xs, ...)` keeps
those whose torch value agrees with the reference's output on the given inputs and on a second draw. That is
only a proposal filter: every candidate built from a form then goes through the gate like any other, on
inputs it has not seen. Nothing depends on a problem's name.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

#: activation -> its torch function (names are kernels/ir.py op names; "none": no activation)
ACTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "none": lambda x: x,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}
EPS = (1e-5, 1e-6, 1e-8, 1e-12)


@dataclass(frozen=True)
class Form:
    """One operation over the forward's arguments (`inputs`: their positions) and the module's parameters
    (`params`: role -> the parameter's dotted name, or "arg:K" for a forward argument)."""

    kind: str                                    # act | softmax | log_softmax | layernorm | rmsnorm | linear |
                                                 # matmul | add | mul
    inputs: tuple[int, ...]
    params: tuple[tuple[str, str], ...] = ()
    act: str = "none"
    eps: float | None = None
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def describe(self) -> str:
        args = ", ".join([f"x{i}" for i in self.inputs] + [f"{r}={n}" for r, n in self.params])
        s = f"{self.kind}({args}{'' if self.eps is None else f', eps={self.eps:g}'})"
        return s if self.act == "none" else f"{self.act}({s})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "inputs": list(self.inputs), "params": dict(self.params), "act": self.act,
                "eps": self.eps, "form": self.describe()}


def _tensor(model: torch.nn.Module, xs: list[Any], ref: str) -> torch.Tensor | None:
    if ref.startswith("arg:"):
        return xs[int(ref[4:])]
    return dict(model.named_parameters()).get(ref)


def evaluate(form: Form, model: torch.nn.Module, xs: list[Any]) -> torch.Tensor:
    """The form's value in torch, on these arguments and the module's current parameters."""
    p = {role: _tensor(model, xs, ref) for role, ref in form.params}
    x = [xs[i] for i in form.inputs]
    act = ACTS[form.act]
    if form.kind == "act":
        return act(x[0])
    if form.kind == "softmax":
        return torch.softmax(x[0], -1)
    if form.kind == "log_softmax":
        return torch.log_softmax(x[0], -1)
    if form.kind == "layernorm":
        return F.layer_norm(x[0], (x[0].shape[-1],), p.get("weight"), p.get("bias"), form.eps)
    if form.kind == "rmsnorm":
        return F.rms_norm(x[0], (x[0].shape[-1],), p.get("weight"), form.eps)
    if form.kind == "linear":
        return act(F.linear(x[0], p["weight"], p.get("bias")))
    if form.kind == "matmul":
        return act(torch.matmul(x[0], x[1]))
    if form.kind == "add":
        return act(x[0] + x[1])
    if form.kind == "mul":
        return act(x[0] * x[1])
    raise ValueError(f"unknown form {form.kind}")


def _vectors(model: torch.nn.Module, xs: list[Any], n: int) -> list[str]:
    """Parameters and forward arguments that are vectors of length n (a norm's weight or bias)."""
    out = [name for name, t in model.named_parameters() if t.dim() == 1 and t.shape[0] == n]
    out += [f"arg:{k}" for k, t in enumerate(xs) if torch.is_tensor(t) and t.dim() == 1 and t.shape[0] == n]
    return out


def forms(model: torch.nn.Module, xs: list[Any]) -> list[Form]:
    """Every form whose operands' shapes fit the forward's floating tensor arguments and the module's parameters."""
    floats = [k for k, t in enumerate(xs) if torch.is_tensor(t) and t.is_floating_point() and t.dim() >= 1]
    params = dict(model.named_parameters())
    out: list[Form] = []
    for k in floats:
        x = xs[k]
        n = x.shape[-1]
        out += [Form("act", (k,), act=a) for a in ACTS if a != "none"]
        out += [Form("softmax", (k,)), Form("log_softmax", (k,))]
        vecs = _vectors(model, xs, n)
        for eps in EPS:
            for w, b in [(None, None)] + [(w, None) for w in vecs] + list(itertools.permutations(vecs, 2)):
                roles = tuple((r, v) for r, v in (("weight", w), ("bias", b)) if v is not None)
                out.append(Form("layernorm", (k,), roles, eps=eps))
                if b is None:
                    out.append(Form("rmsnorm", (k,), roles, eps=eps))
        for name, w in params.items():
            if w.dim() == 2 and w.shape[1] == n:
                biases = [None] + [b for b, t in params.items() if t.dim() == 1 and t.shape[0] == w.shape[0]]
                for b in biases:
                    roles = (("weight", name),) + ((("bias", b),) if b else ())
                    out += [Form("linear", (k,), roles, act=a) for a in ACTS]
    for i, j in itertools.permutations(floats, 2):
        a, b = xs[i], xs[j]
        if a.dim() >= 2 and b.dim() >= 2 and a.shape[-1] == b.shape[-2]:
            out += [Form("matmul", (i, j), act=act) for act in ACTS]
        if i < j and a.shape == b.shape:
            out += [Form(kind, (i, j), act=act) for kind in ("add", "mul") for act in ACTS]
    return out


def _error(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """The largest difference relative to the output's scale where both are finite; None where they differ in
    shape or in where they are NaN / infinite."""
    if a.shape != b.shape:
        return None
    a, b = a.detach().double(), b.detach().double()
    fin = torch.isfinite(a) & torch.isfinite(b)
    if not torch.equal(torch.isnan(a), torch.isnan(b)) or not torch.equal(a[~fin].nan_to_num(), b[~fin].nan_to_num()):
        return None
    if not fin.any():
        return 0.0
    return float((a[fin] - b[fin]).abs().max()) / max(float(a[fin].abs().max()), 1e-6)


#: a form matches within this relative error (an fp32 kernel's rounding and order, not another operation)
MATCH = 1e-3


@torch.no_grad()
def matching(model: torch.nn.Module, draws: list[list[Any]]) -> list[Form]:
    """The forms that agree with the module's output on every draw of its arguments (a single tensor output):
    of forms differing only in eps, the closest; the most specific (most operands) first, then the closest."""
    outs = []
    for xs in draws:
        y = model(*xs)
        if not torch.is_tensor(y):
            return []
        outs.append(y)
    best: dict[tuple, tuple[float, Form]] = {}
    for form in forms(model, draws[0]):
        try:
            errs = [_error(evaluate(form, model, xs), y) for xs, y in zip(draws, outs)]
        except (RuntimeError, KeyError, IndexError, TypeError):   # shapes that do not combine after all
            continue
        if any(e is None or not e <= MATCH for e in errs):
            continue
        err = max(errs)
        key = (form.kind, form.inputs, form.params, form.act)
        if key not in best or err < best[key][0]:
            best[key] = (err, form)
    ranked = sorted(best.values(), key=lambda ef: (-len(ef[1].params) - len(ef[1].inputs), ef[0]))
    return [f for _, f in ranked]
