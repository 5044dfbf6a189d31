"""The pointwise/row IR: programs, the op table with a column per language, the eager interpreter.

A *program* is a tuple of instructions (op, refs, params), the last one's value its result. A ref is
"iK" (the K-th operand of the fused call), "tJ" (instruction J's value) or a Python number; params are
the op's constants (clamp's bounds, pow's exponent). fx.py builds programs from a traced graph and puts
them in the graph as the fused call's first argument, so the rewritten graph's code shows them. A *row
op* next to a program describes a row kernel: ("softmax",), ("layernorm", has_weight, has_bias), or
("reduce", "sum" | "mean", program 2, operand kinds 2) (program 2 reads the reduced row value).

_KG_OPS holds every op once: what torch computes (the eager column, the launchers' fallback), the Triton
expression and the C++ expression, side by side, so a new op is one row and each renderer is a column.

A runtime module (kernels/manifest.py): imports nothing of kernelgate.
"""

import operator

import torch
import torch.nn.functional as F

# exponents torch evaluates by multiplications / sqrt (so a kernel can match it exactly)
_KG_POW = (2, 3, -1, -2, 0.5, -0.5, 1)

_KG_EAGER, _KG_TRITON, _KG_CPP = 0, 1, 2

# op -> (eager, Triton, C++). A template takes the operands' expressions as {0}, {1}; Triton's also the math
# functions {exp}, {log}, {log1p}, {tanh}, {erf} (libdevice's on a GPU, the interpreter's otherwise, triton_render.py).
# pow has a template per exponent in _KG_POW; clamp one per bound ({b}: the bound's literal), the lower one
# applied first (NaN kept, as torch.clamp). C++ math functions kg_* are cpp_render.py's prelude. Both
# languages compute in fp32, one rounding per op as torch's kernels do (no contraction, no fast math).
_KG_OPS = {
    "add": (operator.add, "{0} + {1}", "({0} + {1})"),
    "sub": (operator.sub, "{0} - {1}", "({0} - {1})"),
    "mul": (operator.mul, "{0} * {1}", "({0} * {1})"),
    "div": (operator.truediv, "tl.div_rn({0}, {1})", "({0} / {1})"),
    "neg": (operator.neg, "-{0}", "(-{0})"),
    "sigmoid": (torch.sigmoid, "tl.div_rn(1.0, 1.0 + {exp}(-{0}))", "kg_sigmoid({0})"),
    "silu": (F.silu, "tl.div_rn({0}, 1.0 + {exp}(-{0}))", "kg_silu({0})"),
    "relu": (torch.relu, "tl.where({0} < 0.0, 0.0, {0})", "kg_relu({0})"),          # NaN kept, as torch.relu
    "gelu": (F.gelu, "{0} * 0.5 * (1.0 + {erf}({0} * 0.7071067811865476))", "kg_gelu({0})"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  "0.5 * {0} * (1.0 + {tanh}(0.7978845608028654 * ({0} + 0.044715 * ({0} * {0} * {0}))))",
                  "kg_gelu_tanh({0})"),
    "exp": (torch.exp, "{exp}({0})", "kg_exp({0})"),
    "log": (torch.log, "{log}({0})", "kg_log({0})"),
    "tanh": (torch.tanh, "{tanh}({0})", "kg_tanh({0})"),
    "sqrt": (torch.sqrt, "tl.sqrt_rn({0})", "std::sqrt({0})"),
    "rsqrt": (torch.rsqrt, "tl.div_rn(1.0, tl.sqrt_rn({0}))", "(1.0f / std::sqrt({0}))"),
    "abs": (torch.abs, "tl.abs({0})", "std::fabs({0})"),
    "square": (torch.square, "{0} * {0}", "({0} * {0})"),
    # params as {p0}, {p1} (the renderer's literals): leaky_relu's slope; softplus's beta and threshold
    "leaky_relu": (F.leaky_relu, "tl.where({0} > 0.0, {0}, {0} * {p0})", "({0} > 0.0f ? {0} : {0} * {p0})"),
    "softplus": (F.softplus, "tl.where({0} * {p0} > {p1}, {0}, tl.div_rn({log1p}({exp}({0} * {p0})), {p0}))",
                 "kg_softplus({0}, {p0}, {p1})"),
    "mish": (F.mish, "{0} * {tanh}({log1p}({exp}({0})))", "kg_mish({0})"),
    # x * relu6(x + 3) / 6 and relu6(x + 3) / 6, NaN kept (torch's min/max order)
    "hardswish": (F.hardswish, "tl.div_rn({0} * tl.where({0} + 3.0 < 0.0, 0.0, tl.where({0} + 3.0 > 6.0, 6.0, "
                  "{0} + 3.0)), 6.0)", "kg_hardswish({0})"),
    "hardsigmoid": (F.hardsigmoid, "tl.div_rn(tl.where({0} + 3.0 < 0.0, 0.0, tl.where({0} + 3.0 > 6.0, 6.0, "
                    "{0} + 3.0)), 6.0)", "kg_hardsigmoid({0})"),
    "clamp": (torch.clamp,
              ("tl.where({0} < {b}, {b}, {0})", "tl.where({0} > {b}, {b}, {0})"),
              ("({0} < {b} ? {b} : {0})", "({0} > {b} ? {b} : {0})")),
    "pow": (operator.pow,
            {2: "{0} * {0}", 3: "{0} * {0} * {0}", -1: "tl.div_rn(1.0, {0})", 1: "{0}",
             -2: "tl.div_rn(1.0, {0} * {0})", 0.5: "tl.sqrt_rn({0})", -0.5: "tl.div_rn(1.0, tl.sqrt_rn({0}))"},
            {2: "({0} * {0})", 3: "({0} * {0} * {0})", -1: "(1.0f / {0})", 1: "{0}",
             -2: "(1.0f / ({0} * {0}))", 0.5: "std::sqrt({0})", -0.5: "(1.0f / std::sqrt({0}))"}),
}

_KG_IR_IDENTITY = (("mul", ("i0", 1.0), ()),)       # x * 1.0: exact for every value (-0, inf, NaN included)


def _kg_ir_code(op, args, params, column, literal, **math):
    """One instruction as an expression of the renderer's language (column _KG_TRITON or _KG_CPP); args: the
    operands' expressions, literal: a parameter's literal, math: the math functions Triton templates name."""
    template = _KG_OPS[op][column]
    if op == "clamp":
        y = args[0]
        for bound_template, bound in zip(template, params):
            if bound is not None:
                y = bound_template.format(y, b=literal(bound))
        return y
    if op == "pow":
        return template[params[0]].format(*args, **math)
    return template.format(*args, **math, **{f"p{k}": literal(v) for k, v in enumerate(params)})


def _kg_ir_eval(program, vals):
    """The program run op by op with torch: what the original subgraph computed."""
    temps = []
    for op, refs, params in program:
        args = [r if not isinstance(r, str) else (vals if r[0] == "i" else temps)[int(r[1:])] for r in refs]
        temps.append(_KG_OPS[op][_KG_EAGER](*args, *params))
    return temps[-1]
