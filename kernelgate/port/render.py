"""A matched form (match.py) as a candidate written in the port's target language, and the proposer that offers
them.

A port candidate is the reference source verbatim, the target language's runtime from kernels/ (its launchers
and templates, bundled by kernels/manifest.py), then `ModelNew`, a subclass of the reference's `Model` (so its
state_dict is the reference's) whose forward calls one launcher on the forward's arguments and the module's
parameters, read at every call. Block sizes are variants. A launcher falls back to torch only for operands its
kernel does not take; the port command checks that the kernel itself ran on the reference's inputs.
"""
from __future__ import annotations

import random
from typing import Any

from ..kernels import manifest
from ..proposers import EXPLORE, Context, make_candidate
from ..records import Candidate
from .match import Form

#: target language -> the forms it has templates for
TEMPLATES = {"pallas": ("act", "softmax", "layernorm", "rmsnorm", "linear", "matmul", "add", "mul")}
#: block-size variants per form kind (a GEMM's (block_m, block_n, block_k), a pointwise kernel's elements a program)
BLOCKS = {
    "linear": ((64, 64, 32), (128, 128, 32), (128, 64, 64)),
    "matmul": ((64, 64, 32), (128, 128, 32), (128, 64, 64)),
    "act": ((1024,), (4096,)),
    "add": ((1024,), (4096,)),
    "mul": ((1024,), (4096,)),
}
IDENTITY = (("mul", ("i0", 1.0), ()),)        # kernels/ir.py's identity program (exact for every value)


def _act_program(act: str, first: tuple = ()) -> tuple:
    """The IR program: `first` (instructions producing t0..) then the activation of the last value."""
    if act == "none":
        return first or IDENTITY
    src = f"t{len(first) - 1}" if first else "i0"
    return first + ((act, (src,), ()),)


def _operand(form: Form, role: str) -> str:
    ref = dict(form.params).get(role)
    if ref is None:
        return "None"
    if ref.startswith("arg:"):
        return f"args[{int(ref[4:])}]"
    return f"self.get_parameter({ref!r})"


def call(form: Form, block: tuple[int, ...] | None) -> str:
    """The launcher call computing the form (Pallas launchers, kernels/pallas_launch.py)."""
    x = [f"args[{i}]" for i in form.inputs]
    if form.kind == "act":
        return f"kg_pl_pointwise({_act_program(form.act)!r}, {block!r}, {x[0]})"
    if form.kind == "softmax":
        return f"kg_pl_softmax({x[0]}, -1)"
    if form.kind == "layernorm":
        return (f"kg_pl_layernorm({x[0]}, ({x[0]}.shape[-1],), {_operand(form, 'weight')}, "
                f"{_operand(form, 'bias')}, {form.eps!r})")
    if form.kind == "rmsnorm":
        return f"kg_pl_rmsnorm({x[0]}, ({x[0]}.shape[-1],), {_operand(form, 'weight')}, {form.eps!r})"
    if form.kind == "linear":
        return (f"kg_pl_gemm({_act_program(form.act)!r}, {block!r}, 'linear', {x[0]}, "
                f"{_operand(form, 'weight')}, {_operand(form, 'bias')})")
    if form.kind == "matmul":
        return f"kg_pl_gemm({_act_program(form.act)!r}, {block!r}, 'matmul', {x[0]}, {x[1]}, None)"
    if form.kind in ("add", "mul"):
        first = ((form.kind, ("i0", "i1"), ()),)
        return f"kg_pl_pointwise({_act_program(form.act, first)!r}, {block!r}, {x[0]}, {x[1]})"
    raise ValueError(f"no {form.kind} template")


_TORCH_ACT = {"none": "{}", "relu": "torch.relu({})", "gelu": "F.gelu({})", "gelu_tanh": "F.gelu({}, approximate='tanh')",
              "silu": "F.silu({})", "sigmoid": "torch.sigmoid({})", "tanh": "torch.tanh({})"}


def torch_call(form: Form) -> str:
    """The form in eager PyTorch (`torch`, `F` in scope): the plain-PyTorch version a port is set beside."""
    x = [f"args[{i}]" for i in form.inputs]
    act = _TORCH_ACT[form.act]
    if form.kind == "act":
        return act.format(x[0])
    if form.kind in ("softmax", "log_softmax"):
        return f"torch.{form.kind}({x[0]}, -1)"
    if form.kind == "layernorm":
        return (f"F.layer_norm({x[0]}, ({x[0]}.shape[-1],), {_operand(form, 'weight')}, {_operand(form, 'bias')}, "
                f"{form.eps!r})")
    if form.kind == "rmsnorm":
        return f"F.rms_norm({x[0]}, ({x[0]}.shape[-1],), {_operand(form, 'weight')}, {form.eps!r})"
    if form.kind == "linear":
        return act.format(f"F.linear({x[0]}, {_operand(form, 'weight')}, {_operand(form, 'bias')})")
    if form.kind == "matmul":
        return act.format(f"torch.matmul({x[0]}, {x[1]})")
    return act.format(f"({x[0]} {'+' if form.kind == 'add' else '*'} {x[1]})")


def torch_module(form: Form) -> str:
    """Code after the implementation's source that rebinds `Model` to the form in eager PyTorch, with the
    implementation's constructor and parameters (so its state_dict is the implementation's)."""
    return ("\n\nimport torch.nn.functional as F  # noqa: E402\n\n_KgImplementation = Model\n\n\n"
            "class Model(_KgImplementation):\n"
            f"    \"\"\"{form.describe()} in eager PyTorch.\"\"\"\n\n"
            "    def forward(self, *args):\n"
            f"        return {torch_call(form)}\n")


def body(form: Form, language: str, block: tuple[int, ...] | None) -> str:
    """The code after the reference source: the language's runtime, then ModelNew calling the form's launcher."""
    return (f"# ---- kernelgate port runtime ({language}) ----\n{manifest.bundle([language])}\n\n\n"
            f"class ModelNew(Model):\n"
            f"    \"\"\"{form.describe()} as one {language} kernel (kernelgate port).\"\"\"\n\n"
            f"    def forward(self, *args):\n"
            f"        return {call(form, block)}\n")


def variants(form: Form) -> tuple[tuple[int, ...] | None, ...]:
    return BLOCKS.get(form.kind, (None,))


class PortProposer:
    """The port's built-in proposer: each matched form with a template in the target language, each block
    variant once (the gate judges and times them as any candidate)."""

    name = "port"
    modes = (EXPLORE,)

    def __init__(self, forms: list[Form], language: str):
        self.language = language
        self.forms = [f for f in forms if f.kind in TEMPLATES.get(language, ())]

    def propose(self, ctx: Context, rng: random.Random, n: int) -> list[Candidate]:
        tried = ctx.tried()
        out: list[Candidate] = []
        for form in self.forms:
            for block in variants(form):
                params: dict[str, Any] = {"form": form.describe()}
                if block is not None:
                    params["block"] = block
                c = make_candidate(ctx, f"port:{self.language}:{form.kind}", body(form, self.language, block),
                                   params=params, language=self.language, generation=ctx.generation,
                                   proposer=self.name)
                if c.id not in tried and len(out) < n:
                    out.append(c)
        return out
