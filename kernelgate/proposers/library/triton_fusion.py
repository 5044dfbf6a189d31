"""Generated Triton kernels for pointwise chains and GEMM epilogues, and the torch.fx rewrites that call them.

Two families:
- pointwise: every maximal group of pointwise ops in the traced graph (add/sub/mul/div with tensors
  or scalars, neg, sigmoid, tanh, relu, silu, gelu, exp, log, sqrt, rsqrt, abs, clamp, pow by a
  constant) whose intermediate values are used only inside the group becomes ONE generated kernel.
- GEMM epilogue: nn.Linear / F.linear / matmul followed by such a group. "library": the GEMM without
  bias by torch (cuBLAS), then one generated kernel applying the bias and the group. "triton": one
  generated Triton GEMM with the bias and the group applied to the accumulator tile before the store.

A group is described by a *program*, a tuple of (op, operand refs, params) built from the graph; refs
are "iK" (the K-th tensor/number operand of the fused call), "tJ" (the J-th instruction's value) or
a Python number. The program is the fused node's first argument, so the rewritten graph's code shows
it. Kernel source is generated from the program and the operand kinds at the first call (a file in
the temp dir, imported, since @triton.jit needs real source), computes in fp32 and stores in the
operands' dtype. Launchers use a kernel only where it applies (CUDA tensors, or any device when the
kernels are interpreted, TRITON_INTERPRET=1; one floating dtype; operands that are the output's shape
and contiguous, vectors along the last dim, or scalars; no autograd) and otherwise replay the
original ops with torch. Parameters stay get_attr nodes, read at every call (load_state_dict works).
Like triton_kernels.py, candidates embed this file verbatim: it stays self-contained and imports
without Triton.
"""

import hashlib
import importlib.util
import math
import operator
import os
import re
import sys
import tempfile

import torch
import torch.fx
import torch.nn.functional as F

try:
    import triton
except ImportError:  # the rewrites then apply nowhere, the launchers always fall back
    triton = None

_KG_TF_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_KG_TF_SMEM = 200 * 1024          # shared-memory budget for the GEMM's pipelined tiles (H100/H200: 227 KiB)

if triton is not None:
    @triton.jit
    def _kg_tf_probe(x):
        pass

    _KG_TF_INTERPRETED = type(_kg_tf_probe).__name__ == "InterpretedFunction"
else:
    _KG_TF_INTERPRETED = False


# ---------------------------------------------------------------- which graph nodes are pointwise

_KG_TF_FUNCTIONS = {
    operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub", operator.mul: "mul",
    torch.mul: "mul", operator.truediv: "div", torch.div: "div", torch.true_divide: "div", operator.neg: "neg",
    torch.neg: "neg", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
    torch.relu: "relu", F.relu: "relu", F.silu: "silu", F.gelu: "gelu", torch.exp: "exp", torch.log: "log",
    torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.abs: "abs", operator.abs: "abs", torch.clamp: "clamp",
    torch.clip: "clamp", operator.pow: "pow", torch.pow: "pow", torch.square: "square",
}
_KG_TF_METHODS = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div", "neg": "neg",
    "sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "exp": "exp", "log": "log", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "abs": "abs", "clamp": "clamp", "clip": "clamp", "pow": "pow", "square": "square",
}
_KG_TF_MODULES = ((torch.nn.ReLU, "relu"), (torch.nn.Sigmoid, "sigmoid"), (torch.nn.Tanh, "tanh"),
                  (torch.nn.SiLU, "silu"), (torch.nn.GELU, "gelu"))
# argument names after the input, and keyword arguments that may appear with their only accepted value
_KG_TF_SIGNATURES = {
    "add": (("other",), {"alpha": 1}), "sub": (("other",), {"alpha": 1}), "mul": (("other",), {}),
    "div": (("other",), {"rounding_mode": None}), "clamp": (("min", "max"), {}), "pow": (("exponent",), {}),
    "gelu": (("approximate",), {}), "relu": (("inplace",), {}), "silu": (("inplace",), {}),
}
# exponents that torch evaluates by multiplications / sqrt (so the kernel can match it)
_KG_TF_POW = (2, 3, -1, -2, 0.5, -0.5, 1)


def _kg_tf_number(v):
    return isinstance(v, (int, float)) and (isinstance(v, bool) or math.isfinite(v))


def _kg_tf_classify(node, mods):
    """(op, operands, params) for a pointwise node, else None. Operands are Nodes or Python numbers,
    at least one a Node; params are the op's constants (clamp bounds, pow exponent)."""
    if node.op == "call_function":
        op = _KG_TF_FUNCTIONS.get(node.target)
        args, kwargs = list(node.args), dict(node.kwargs)
    elif node.op == "call_method":
        op = _KG_TF_METHODS.get(node.target)
        args, kwargs = list(node.args), dict(node.kwargs)
    elif node.op == "call_module":
        m = mods.get(node.target)
        op = next((name for cls, name in _KG_TF_MODULES if type(m) is cls), None)
        args, kwargs = list(node.args), {}
        if op == "gelu":
            kwargs["approximate"] = m.approximate
        elif op in ("relu", "silu"):
            kwargs["inplace"] = m.inplace
    else:
        return None
    if op is None or not args:
        return None
    names, fixed = _KG_TF_SIGNATURES.get(op, ((), {}))
    if len(args) > 1 + len(names):
        return None
    bound = dict(zip(names, args[1:]))
    for k, v in kwargs.items():
        if k in bound or (k not in names and k not in fixed) or (k in fixed and v != fixed[k]):
            return None
        bound[k] = v
    x = args[0] if "input" not in kwargs else None
    if x is None:
        return None
    if bound.pop("inplace", False):
        # writing into x is unobservable only if this node is x's one user and x is not an input or parameter
        if not isinstance(x, torch.fx.Node) or x.op in ("placeholder", "get_attr") or len(x.users) != 1:
            return None
    params = ()
    if op in ("add", "sub", "mul", "div"):
        if "other" not in bound:
            return None
        operands = [x, bound["other"]]
    elif op == "clamp":
        lo, hi = bound.get("min"), bound.get("max")
        if (lo is None and hi is None) or not all(v is None or _kg_tf_number(v) for v in (lo, hi)):
            return None
        operands, params = [x], (lo, hi)
    elif op == "pow":
        e = bound.get("exponent")
        if not _kg_tf_number(e) or isinstance(e, bool) or e not in _KG_TF_POW:
            return None
        operands, params = [x], (e,)
    elif op == "gelu":
        approx = bound.get("approximate", "none")
        if approx not in ("none", "tanh"):
            return None
        op, operands = ("gelu_tanh" if approx == "tanh" else "gelu"), [x]
    else:
        if bound:
            return None
        operands = [x]
    if not all(isinstance(a, torch.fx.Node) or _kg_tf_number(a) for a in operands):
        return None
    if not any(isinstance(a, torch.fx.Node) for a in operands):
        return None
    return op, tuple(operands), params


def _kg_tf_groups(gm, info):
    """Maximal single-output groups of pointwise nodes, each in graph order (its root, the only value used
    outside it, last). A producer joins a group when all its users are in the group, so no value leaves it
    but the root's and the group can be computed at the root's position."""
    nodes = list(gm.graph.nodes)
    owner, groups = set(), []
    for root in reversed(nodes):
        if root not in info or root in owner:
            continue
        members, grew = {root}, True
        while grew:
            grew = False
            for m in list(members):
                for a in info[m][1]:
                    if (isinstance(a, torch.fx.Node) and a in info and a not in members and a not in owner
                            and all(u in members for u in a.users)):
                        members.add(a)
                        grew = True
        owner |= members
        groups.append([n for n in nodes if n in members])
    return groups[::-1]


def _kg_tf_inputs(order, info):
    """The Nodes a group reads from outside it, in order of first use."""
    inside, seen = set(order), []
    for m in order:
        for a in info[m][1]:
            if isinstance(a, torch.fx.Node) and a not in inside and a not in seen:
                seen.append(a)
    return seen


def _kg_tf_program(order, info, inputs):
    refs = {n: f"i{k}" for k, n in enumerate(inputs)}
    instrs = []
    for j, m in enumerate(order):
        op, operands, params = info[m]
        instrs.append((op, tuple(refs[a] if isinstance(a, torch.fx.Node) else a for a in operands), params))
        refs[m] = f"t{j}"
    return tuple(instrs)


# ---------------------------------------------------------------- eager replay (the fallback)

_KG_TF_EAGER = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv, "neg": operator.neg,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu, "silu": F.silu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "abs": torch.abs, "clamp": torch.clamp, "pow": operator.pow, "square": torch.square,
}


def _kg_tf_eager(program, vals):
    """The program run op by op with torch: what the original subgraph computed."""
    temps = []
    for op, refs, params in program:
        args = [r if not isinstance(r, str) else (vals if r[0] == "i" else temps)[int(r[1:])] for r in refs]
        temps.append(_KG_TF_EAGER[op](*args, *params))
    return temps[-1]


# ---------------------------------------------------------------- kernel source generation

# accurate math on the GPU (libdevice, as torch's own kernels), numpy's in the interpreter
_KG_TF_MATH = {"exp": ("libdevice.exp", "tl.exp"), "log": ("libdevice.log", "tl.log"),
               "erf": ("libdevice.erf", "tl.erf"), "tanh": ("libdevice.tanh", "_kg_tf_tanh")}

_KG_TF_HEADER = '''import triton
import triton.language as tl
{libdevice}

@triton.jit
def _kg_tf_tanh(x):
    # the interpreter has no tanh: odd series below 0.25 (relative error < 1e-8), else (1-e)/(1+e), e=exp(-2|x|)
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    big = tl.div_rn(1.0 - e, 1.0 + e)
    x2 = x * x
    small = ax * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * (-0.05396825396825397
                                                                                       + x2 * 0.021869488536155203))))
    t = tl.where(ax < 0.25, small, big)
    return tl.where(x < 0.0, -t, t)

'''


def _kg_tf_expr(op, a, params, fn):
    """Triton expression of one instruction; a: operand expressions (names or literals), fn: math names."""
    x = a[0]
    if op in ("add", "sub", "mul"):
        return f"{x} {dict(add='+', sub='-', mul='*')[op]} {a[1]}"
    if op == "div":
        return f"tl.div_rn({x}, {a[1]})"
    if op == "neg":
        return f"-{x}"
    if op == "sigmoid":
        return f"tl.div_rn(1.0, 1.0 + {fn['exp']}(-{x}))"
    if op == "silu":
        return f"tl.div_rn({x}, 1.0 + {fn['exp']}(-{x}))"
    if op == "relu":
        return f"tl.where({x} < 0.0, 0.0, {x})"          # keeps NaN, as torch.relu
    if op == "gelu":
        return f"{x} * 0.5 * (1.0 + {fn['erf']}({x} * 0.7071067811865476))"
    if op == "gelu_tanh":
        return f"0.5 * {x} * (1.0 + {fn['tanh']}(0.7978845608028654 * ({x} + 0.044715 * ({x} * {x} * {x}))))"
    if op in ("exp", "log", "tanh"):
        return f"{fn[op]}({x})"
    if op == "sqrt":
        return f"tl.sqrt_rn({x})"
    if op == "rsqrt":
        return f"tl.div_rn(1.0, tl.sqrt_rn({x}))"
    if op == "abs":
        return f"tl.abs({x})"
    if op == "square":
        return f"{x} * {x}"
    if op == "clamp":                                    # min then max, NaN kept, as torch.clamp
        lo, hi = params
        y = x if lo is None else f"tl.where({x} < {float(lo)!r}, {float(lo)!r}, {x})"
        return y if hi is None else f"tl.where({y} > {float(hi)!r}, {float(hi)!r}, {y})"
    if op == "pow":
        e = params[0]
        return {2: f"{x} * {x}", 3: f"{x} * {x} * {x}", -1: f"tl.div_rn(1.0, {x})", 1: x,
                -2: f"tl.div_rn(1.0, {x} * {x})", 0.5: f"tl.sqrt_rn({x})",
                -0.5: f"tl.div_rn(1.0, tl.sqrt_rn({x}))"}[e]
    raise ValueError(f"no kernel code for {op}")


def _kg_tf_body(program, kinds, full_idx, col_idx, mask, col_mask, shape, indent="    "):
    """Loads of the operands by kind (0 output-shaped, 1 last-dim vector, 2 one-element tensor, 3 number),
    then one fp32 statement per instruction; returns (lines, name of the result, whether it is a block)."""
    fn = {k: v[1 if _KG_TF_INTERPRETED else 0] for k, v in _KG_TF_MATH.items()}
    lines, block = [], {}
    for k, kind in enumerate(kinds):
        if kind == 0:
            lines.append(f"v{k} = tl.load(a{k} + {full_idx}, mask={mask}, other=0.0).to(tl.float32)")
        elif kind == 1:
            lines.append(f"v{k} = tl.load(a{k} + {col_idx}, mask={col_mask}, other=0.0).to(tl.float32)")
        elif kind == 2:
            lines.append(f"v{k} = tl.load(a{k}).to(tl.float32)")
        elif kind == 4:                                  # already an fp32 value in registers (the accumulator)
            lines.append(f"v{k} = a{k}")
        else:                                            # a Python number: an fp32 scalar argument
            lines.append(f"v{k} = a{k}")
        block[f"i{k}"] = kind in (0, 1, 4)
    for j, (op, refs, params) in enumerate(program):
        a = [("v" + r[1:] if r[0] == "i" else r) if isinstance(r, str) else f"({float(r)!r})" for r in refs]
        lines.append(f"t{j} = {_kg_tf_expr(op, a, params, fn)}")
        block[f"t{j}"] = any(block.get(r, False) for r in refs if isinstance(r, str))
    res = f"t{len(program) - 1}"
    if not block[res]:
        lines.append(f"{res} = tl.zeros({shape}, dtype=tl.float32) + {res}")
    return [indent + ln for ln in lines], res


def _kg_tf_pointwise_source(program, kinds):
    args = "".join(f"a{k}, " for k in range(len(kinds)))
    body, res = _kg_tf_body(program, kinds, "offs", "offs % n_cols", "mask", "mask", "[BLOCK]")
    return "\n".join([
        "@triton.jit",
        f"def kg_tf_kernel(out_ptr, n_elements, n_cols, {args}BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < n_elements",
        *body,
        f"    tl.store(out_ptr + offs, {res}.to(out_ptr.dtype.element_ty), mask=mask)",
        ""])


def _kg_tf_gemm_source(program, kinds, precision):
    """out[M, N] = epilogue(a[M, K] @ b[K, N]); grouped tile order for L2 reuse, fp32 accumulator,
    masked K tail; rows and columns past the edge wrap (modulo) on load and are masked on store."""
    args = "".join(f"a{k}, " for k in range(1, len(kinds)))
    body, res = _kg_tf_body(program, kinds, "offs", "rn[None, :]", "mask", "rn[None, :] < N",
                            "[BLOCK_M, BLOCK_N]")
    return "\n".join([
        "@triton.jit",
        "def kg_tf_kernel(out_ptr, a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, "
        f"{args}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):",
        "    pid = tl.program_id(0)",
        "    num_pid_m = tl.cdiv(M, BLOCK_M)",
        "    num_pid_n = tl.cdiv(N, BLOCK_N)",
        "    in_group = GROUP_M * num_pid_n",
        "    first_m = (pid // in_group) * GROUP_M",
        "    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)",
        "    pid_m = first_m + ((pid % in_group) % group_m)",
        "    pid_n = (pid % in_group) // group_m",
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    rk = tl.arange(0, BLOCK_K)",
        "    a_ptrs = a_ptr + (rm % M)[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak",
        "    b_ptrs = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :].to(tl.int64) * stride_bn",
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "    for k in range(0, tl.cdiv(K, BLOCK_K)):",
        "        k_ok = rk < K - k * BLOCK_K",
        "        a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)",
        "        b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)",
        f"        acc = tl.dot(a, b, acc{f', input_precision={precision!r}' if precision else ''})",
        "        a_ptrs += BLOCK_K * stride_ak",
        "        b_ptrs += BLOCK_K * stride_bk",
        "    a0 = acc",
        "    offs = rm[:, None].to(tl.int64) * N + rn[None, :]",
        "    mask = (rm[:, None] < M) & (rn[None, :] < N)",
        *body,
        f"    tl.store(out_ptr + offs, {res}.to(out_ptr.dtype.element_ty), mask=mask)",
        ""])


def _kg_tf_row_source(program, kinds, row_op):
    """One program per row: the pointwise prologue computed as the row is loaded, then the row op
    (("softmax",) or ("layernorm", has_weight, has_bias)) in fp32, one store. Rows of up to BLOCK columns."""
    args = "".join(f"a{k}, " for k in range(len(kinds)))
    body, res = _kg_tf_body(program, kinds, "offs", "cols", "mask", "mask", "[BLOCK]")
    fn = "tl.exp" if _KG_TF_INTERPRETED else "libdevice.exp"
    if row_op[0] == "softmax":
        tail = [f"    x = tl.where(mask, {res}, -float('inf'))",
                "    e = tl.where(mask, " + fn + "(x - tl.max(x, axis=0)), 0.0)",
                "    y = e / tl.sum(e, axis=0)"]
    else:
        _, has_w, has_b = row_op
        tail = [f"    x = tl.where(mask, {res}, 0.0)",
                "    mean = tl.sum(x, axis=0) / n_cols",
                "    d = tl.where(mask, x - mean, 0.0)",
                "    y = tl.div_rn(d, tl.sqrt_rn(tl.sum(d * d, axis=0) / n_cols + eps))"]
        if has_w:
            tail.append("    y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
        if has_b:
            tail.append("    y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)")
    return "\n".join([
        "@triton.jit",
        f"def kg_tf_kernel(out_ptr, n_cols, w_ptr, b_ptr, eps, {args}BLOCK: tl.constexpr):",
        "    row = tl.program_id(0).to(tl.int64)",
        "    cols = tl.arange(0, BLOCK)",
        "    mask = cols < n_cols",
        "    offs = row * n_cols + cols",
        *body, *tail,
        "    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)",
        ""])


def _kg_tf_rowred_source(prog1, kinds1, red, prog2, kinds2):
    """One program per row: the first program's row summed (or averaged) to one value, which the second
    program reads as its operand of kind 4 (RMSNorm written out: x.pow(2).mean(-1) then x * rsqrt(.) * w)."""
    b1, r1 = _kg_tf_body(prog1, kinds1, "offs", "cols", "mask", "mask", "[BLOCK]")
    rename = lambda text: re.sub(r"\b([vta])(\d+)\b", r"p\1\2", text)  # noqa: E731 - the first body's names
    b1, r1 = [rename(line) for line in b1], rename(r1)
    rk = kinds2.index(4)
    b2, r2 = _kg_tf_body(prog2, kinds2, "offs", "cols", "mask", "mask", "[BLOCK]")
    args = "".join(f"pa{k}, " for k in range(len(kinds1))) + "".join(f"a{k}, " for k in range(len(kinds2)) if k != rk)
    scale = " / n_cols" if red == "mean" else ""
    return "\n".join([
        "@triton.jit",
        f"def kg_tf_kernel(out_ptr, n_cols, {args}BLOCK: tl.constexpr):",
        "    row = tl.program_id(0).to(tl.int64)",
        "    cols = tl.arange(0, BLOCK)",
        "    mask = cols < n_cols",
        "    offs = row * n_cols + cols",
        *b1,
        f"    a{rk} = tl.sum(tl.where(mask, {r1}, 0.0), axis=0){scale}",
        *b2,
        f"    tl.store(out_ptr + offs, {r2}.to(out_ptr.dtype.element_ty), mask=mask)",
        ""])


_KG_TF_KERNELS = {}


def _kg_tf_load(source):
    """Import generated source from a file named by its hash (a real file: @triton.jit reads the source)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    name = f"kg_tf_gen_{digest}"
    if name in sys.modules:
        return sys.modules[name].kg_tf_kernel
    folder = os.path.join(tempfile.gettempdir(), "kernelgate_triton_fusion")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".py")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(source)
    os.replace(tmp, path)                                # atomic: concurrent processes never see half a file
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.kg_tf_kernel


def kg_tf_source(program, kinds, precision=None, row_op=None):
    """The full generated module for a program: the pointwise kernel (precision None), the GEMM
    (precision: tl.dot's input_precision for fp32 operands, "" for 16-bit ones), a row kernel (row_op), or a
    row reduction between two programs (row_op ("reduce", sum|mean, program 2, kinds 2))."""
    libdevice = "" if _KG_TF_INTERPRETED else "from triton.language.extra import libdevice"
    if row_op is not None and row_op[0] == "reduce":
        body = _kg_tf_rowred_source(program, kinds, row_op[1], row_op[2], row_op[3])
    elif row_op is not None:
        body = _kg_tf_row_source(program, kinds, row_op)
    elif precision is None:
        body = _kg_tf_pointwise_source(program, kinds)
    else:
        body = _kg_tf_gemm_source(program, kinds, precision)
    return _KG_TF_HEADER.format(libdevice=libdevice) + body


def _kg_tf_kernel(program, kinds, precision=None, row_op=None):
    key = (program, kinds, precision, row_op)
    k = _KG_TF_KERNELS.get(key)
    if k is None:
        k = _kg_tf_load(kg_tf_source(program, kinds, precision, row_op))
        _KG_TF_KERNELS[key] = k
    return k


# ---------------------------------------------------------------- launchers

def _kg_tf_device_ok(t):
    return t.is_cuda or (_KG_TF_INTERPRETED and t.device.type == "cpu")


def _kg_tf_kinds(vals, shape, dtype, device):
    """Per operand: 0 shaped like the output and contiguous, 1 a contiguous vector along the last dim,
    2 one element, 3 a Python number; None when some operand fits none of these."""
    n_cols = shape[-1] if len(shape) else 1
    kinds = []
    for v in vals:
        if isinstance(v, (bool, int, float)):
            kinds.append(3)
            continue
        if not torch.is_tensor(v) or v.dtype != dtype or v.device != device or \
                (torch.is_grad_enabled() and v.requires_grad):
            return None
        if tuple(v.shape) == tuple(shape) and v.is_contiguous():
            kinds.append(0)
        elif v.numel() == 1 and v.dim() <= len(shape):
            kinds.append(2)
        elif v.dim() >= 1 and v.dim() <= len(shape) and v.shape[-1] == n_cols and v.numel() == n_cols \
                and v.stride(-1) == 1:
            kinds.append(1)
        else:
            return None
    return tuple(kinds)


def _kg_tf_launch(kernel, grid, device, *args, **meta):
    if device.type == "cuda" and device.index is not None and device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            kernel[grid](*args, **meta)
    else:
        kernel[grid](*args, **meta)


def _kg_tf_args(vals, kinds):
    return [float(v) if kind == 3 else v for v, kind in zip(vals, kinds)]


def _kg_tf_common(vals):
    """(first tensor, broadcast shape) when a generated kernel can take these operands (Triton present, tensors
    and plain numbers only, a supported dtype and device, shapes that broadcast), else None."""
    tensors = [v for v in vals if torch.is_tensor(v)]
    if triton is None or not tensors or not all(torch.is_tensor(v) or _kg_tf_number(v) for v in vals):
        return None
    t0 = tensors[0]
    if t0.dtype not in _KG_TF_DTYPES or not _kg_tf_device_ok(t0):
        return None
    try:
        return t0, torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        return None


def kg_tf_pointwise(program, cfg, *vals):
    """The program on vals by one generated kernel where it applies, else the original ops with torch.
    cfg: (BLOCK, num_warps)."""
    common = _kg_tf_common(vals)
    if common is None:
        return _kg_tf_eager(program, vals)
    t0, shape = common
    kinds = _kg_tf_kinds(vals, shape, t0.dtype, t0.device)
    if kinds is None or math.prod(shape) == 0:
        return _kg_tf_eager(program, vals)
    out = torch.empty(shape, dtype=t0.dtype, device=t0.device)
    n = out.numel()
    block, warps = cfg
    _kg_tf_launch(_kg_tf_kernel(program, kinds), (triton.cdiv(n, block),), t0.device, out, n,
                  shape[-1] if len(shape) else 1, *_kg_tf_args(vals, kinds), BLOCK=block, num_warps=warps)
    return out


def _kg_tf_with_bias(program, has_bias):
    """The program on (gemm result without bias, bias, operands...): bias added first, refs shifted."""
    if not has_bias:
        return program

    def shift(r):
        if not isinstance(r, str):
            return r
        k = int(r[1:])
        return f"t{k + 1}" if r[0] == "t" else ("t0" if k == 0 else f"i{k + 1}")
    return (("add", ("i0", "i1"), ()),) + tuple((op, tuple(shift(r) for r in refs), p) for op, refs, p in program)


def _kg_tf_gemm_eager(program, kind, x, w, bias, vals):
    y = F.linear(x, w, bias) if kind == "linear" else torch.matmul(x, w)
    return _kg_tf_eager(program, (y,) + tuple(vals))


_KG_TF_IDENTITY = (("mul", ("i0", 1.0), ()),)       # x * 1.0: exact for every value (-0, inf, NaN included)
_KG_TF_3X_MIN = 1 << 27      # multiply-adds below which a 3xTF32 Triton GEMM cannot pay for its launch (~5 us on cuBLAS)


def kg_tf_gemm(program, cfg, kind, x, w, bias, *vals):
    """program(gemm(x, w, bias), *vals), where gemm is F.linear ("linear": x @ w^T + bias) or torch.matmul
    ("matmul": x @ w) and program's input 0 is the GEMM's result.
    cfg ("library", BLOCK, num_warps): torch's GEMM without bias, then one kernel for bias + program.
    cfg ("triton", BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, fp32_precision): one Triton GEMM with
    bias + program applied to the accumulator; fp16/bf16 operands accumulate in fp32; fp32 operands take
    this path only when fp32_precision ("ieee", "tf32", "tf32x3") is set, else the library path."""
    if triton is None or not (torch.is_tensor(x) and torch.is_tensor(w)) or x.dtype != w.dtype \
            or x.dtype not in _KG_TF_DTYPES or x.device != w.device or not _kg_tf_device_ok(x) \
            or x.dim() < 1 or w.dim() != 2 or (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
        return _kg_tf_gemm_eager(program, kind, x, w, bias, vals)
    n_out, k_in = (w.shape[0], w.shape[1]) if kind == "linear" else (w.shape[1], w.shape[0])
    if x.shape[-1] != k_in or k_in == 0 or x.numel() == 0 or n_out == 0:
        return _kg_tf_gemm_eager(program, kind, x, w, bias, vals)
    shape = tuple(x.shape[:-1]) + (n_out,)
    full = _kg_tf_with_bias(program, bias is not None)
    opnds = ((bias,) if bias is not None else ()) + tuple(vals)
    rest = _kg_tf_kinds(opnds, shape, x.dtype, x.device)
    if rest is None:
        return _kg_tf_gemm_eager(program, kind, x, w, bias, vals)
    fp32_precision = cfg[6] if cfg[0] == "triton" else ""
    if fp32_precision == "tf32x3" and x.dtype == torch.float32 and x.numel() // k_in * n_out * k_in < _KG_TF_3X_MIN:
        if program == _KG_TF_IDENTITY:          # a small GEMM on its own: the reference's op, unchanged
            return F.linear(x, w, bias) if kind == "linear" else torch.matmul(x, w)
        cfg = ("library", 1024, 4)              # small: cuBLAS, then the fused epilogue
    if cfg[0] == "triton" and x.dim() >= 2 and (x.dtype != torch.float32 or fp32_precision):
        bm, bn, bk, warps, stages = cfg[1:6]
        x2 = x.reshape(-1, k_in)
        m = x2.shape[0]
        # stride of b[k, n]: w[n, k] for linear, w[k, n] for matmul
        sbk, sbn = (w.stride(1), w.stride(0)) if kind == "linear" else (w.stride(0), w.stride(1))
        while stages > 1 and (bm * bk + bk * bn) * x.element_size() * stages > _KG_TF_SMEM:
            stages -= 1
        out = torch.empty(shape, dtype=x.dtype, device=x.device)
        precision = fp32_precision if x.dtype == torch.float32 else ""    # 16-bit: fp32 accumulation either way
        kernel = _kg_tf_kernel(full, (4,) + rest, precision)
        grid = (triton.cdiv(m, bm) * triton.cdiv(n_out, bn),)
        _kg_tf_launch(kernel, grid, x.device, out, x2, w, m, n_out, k_in, x2.stride(0), x2.stride(1), sbk, sbn,
                      *_kg_tf_args(opnds, rest), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                      num_warps=warps, num_stages=stages)
        return out
    acc = F.linear(x, w) if kind == "linear" else torch.matmul(x, w)
    if tuple(acc.shape) != shape or not acc.is_contiguous():
        return _kg_tf_gemm_eager(program, kind, x, w, bias, vals)
    block, warps = (cfg[1], cfg[2]) if cfg[0] == "library" else (1024, 4)
    out = torch.empty_like(acc)
    n = out.numel()
    _kg_tf_launch(_kg_tf_kernel(full, (0,) + rest), (triton.cdiv(n, block),), x.device, out, n, n_out, acc,
                  *_kg_tf_args(opnds, rest), BLOCK=block, num_warps=warps)
    return out


# ---------------------------------------------------------------- rewrites (torch.fx)

def _kg_tf_info(gm):
    mods = dict(gm.named_modules())
    info = {}
    for node in gm.graph.nodes:
        c = _kg_tf_classify(node, mods)
        if c is not None:
            info[node] = c
    return mods, info


def _kg_tf_replace(gm, info, order, fn, args, dead=()):
    """Replace a group (root last) by one call; erase it and the extra dead nodes. Later groups that read
    the root read the new node: their entries in info are updated."""
    root = order[-1]
    with gm.graph.inserting_before(root):
        new = gm.graph.call_function(fn, args)
    root.replace_all_uses_with(new)
    for node in list(reversed(order)) + list(dead):
        gm.graph.erase_node(node)
        info.pop(node, None)
    for node, (op, operands, params) in info.items():
        if root in operands:
            info[node] = (op, tuple(new if a is root else a for a in operands), params)


def _kg_tf_finish(gm, n):
    if n:
        gm.graph.lint()
        gm.recompile()
    return n


def kg_rewrite_triton_pointwise(gm, block=1024, num_warps=4):
    """Every group of at least 2 pointwise ops -> one kg_tf_pointwise call (one generated kernel)."""
    if triton is None:
        return 0
    _, info = _kg_tf_info(gm)
    n = 0
    for order in _kg_tf_groups(gm, info):
        if len(order) < 2:
            continue
        inputs = _kg_tf_inputs(order, info)
        _kg_tf_replace(gm, info, order, kg_tf_pointwise,
                       (_kg_tf_program(order, info, inputs), (block, num_warps), *inputs))
        n += 1
    return _kg_tf_finish(gm, n)


_KG_TF_MATMULS = (torch.matmul, torch.mm, operator.matmul)


def _kg_tf_gemm_of(node, mods):
    """(kind, x, weight, bias) of a GEMM node; weight/bias are Nodes, None, or a module attribute path
    (str) for nn.Linear; else None."""
    if node.op == "call_module" and type(mods.get(node.target)) is torch.nn.Linear:
        if len(node.args) != 1 or node.kwargs:
            return None
        m = mods[node.target]
        return "linear", node.args[0], node.target + ".weight", (node.target + ".bias" if m.bias is not None else None)
    if node.op == "call_function" and node.target is F.linear:
        bound = dict(zip(("input", "weight", "bias"), node.args))
        bound.update(node.kwargs)
        if set(bound) - {"input", "weight", "bias"} or "input" not in bound or "weight" not in bound:
            return None
        return "linear", bound["input"], bound["weight"], bound.get("bias")
    if (node.op == "call_function" and node.target in _KG_TF_MATMULS) or \
            (node.op == "call_method" and node.target in ("matmul", "mm")):
        if len(node.args) != 2 or node.kwargs:
            return None
        return "matmul", node.args[0], node.args[1], None
    return None


def _kg_tf_attr(gm, path):
    obj = gm
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _kg_tf_known_fp32(gm, w):
    """Whether a GEMM's weight (module attribute path or Node) is a module tensor of dtype fp32."""
    if isinstance(w, torch.fx.Node):
        w = w.target if w.op == "get_attr" else None
    t = _kg_tf_attr(gm, w) if isinstance(w, str) else None
    return torch.is_tensor(t) and t.dtype == torch.float32


def _kg_tf_rewrite_gemms(gm, cfg, min_ops, fp32_weights=True, only_fp32=False):
    """Each GEMM whose users all lie in one pointwise group (bias + group of at least min_ops ops) -> one
    kg_tf_gemm call; fp32_weights False leaves GEMMs with a known fp32 weight alone, only_fp32 True takes
    only those."""
    mods, info = _kg_tf_info(gm)
    n = 0
    for order in _kg_tf_groups(gm, info):
        inputs = _kg_tf_inputs(order, info)
        for g in inputs:
            gemm = _kg_tf_gemm_of(g, mods)              # read now: an earlier rewrite may have changed its args
            if gemm is None or not all(u in order for u in g.users):
                continue
            kind, x, w, b = gemm
            if len(order) + (b is not None) < min_ops or (not fp32_weights and _kg_tf_known_fp32(gm, w)) \
                    or (only_fp32 and not _kg_tf_known_fp32(gm, w)):
                continue
            others = [a for a in inputs if a is not g]
            program = _kg_tf_program(order, info, [g] + others)
            with gm.graph.inserting_before(order[-1]):  # parameters read at every call, never copied
                w = gm.graph.get_attr(w) if isinstance(w, str) else w
                b = gm.graph.get_attr(b) if isinstance(b, str) else b
            _kg_tf_replace(gm, info, order, kg_tf_gemm, (program, cfg, kind, x, w, b, *others), dead=(g,))
            n += 1
            break
    return _kg_tf_finish(gm, n)


def kg_rewrite_triton_epilogue(gm, block=1024, num_warps=4):
    """Linear/matmul (+ bias) -> pointwise ops (bias and at least 2 ops in all): torch's GEMM without bias,
    then one generated kernel for bias + the ops."""
    if triton is None:
        return 0
    return _kg_tf_rewrite_gemms(gm, ("library", block, num_warps), 2)


def kg_rewrite_triton_gemm(gm, block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3,
                           fp32_precision=""):
    """Linear/matmul (+ bias) -> pointwise ops: one generated Triton GEMM with the epilogue in-kernel.
    Without fp32_precision, GEMMs with a known fp32 weight are left alone (the fp32 tensor-core formats
    are the contract's to allow; an IEEE fp32 Triton GEMM would not beat cuBLAS)."""
    if triton is None:
        return 0
    cfg = ("triton", block_m, block_n, block_k, num_warps, num_stages, fp32_precision)
    return _kg_tf_rewrite_gemms(gm, cfg, 1, bool(fp32_precision))


def kg_rewrite_triton_gemm_3xtf32(gm, block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3):
    """fp32 Linear/matmul (+ bias) (-> pointwise ops, or none) as one generated Triton GEMM whose products are split
    3xTF32 (a = a_hi + a_lo in tf32, a_hi*b_hi + a_hi*b_lo + a_lo*b_hi on tensor cores, fp32 accumulation):
    the error stays at the fp32 level, and the gate checks it like any other candidate's; no global flag
    changes, no lower-precision contract needed."""
    if triton is None:
        return 0
    cfg = ("triton", block_m, block_n, block_k, num_warps, num_stages, "tf32x3")
    n = _kg_tf_rewrite_gemms(gm, cfg, 1, True, only_fp32=True)          # with their epilogues
    return n + _kg_tf_finish(gm, _kg_tf_rewrite_bare_gemms(gm, cfg))    # then those without one


def _kg_tf_rewrite_bare_gemms(gm, cfg):
    """GEMMs with a known fp32 weight and no pointwise group after them (left by the epilogue pass) -> one
    kg_tf_gemm each, with the identity as its epilogue (the bias, if any, is added in-kernel)."""
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        gemm = _kg_tf_gemm_of(node, mods)
        if gemm is None or not _kg_tf_known_fp32(gm, gemm[2]):
            continue
        kind, x, w, b = gemm
        with gm.graph.inserting_before(node):
            w = gm.graph.get_attr(w) if isinstance(w, str) else w
            b = gm.graph.get_attr(b) if isinstance(b, str) else b
            new = gm.graph.call_function(kg_tf_gemm, (_KG_TF_IDENTITY, cfg, kind, x, w, b))
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        n += 1
    return n


# ---------------------------------------------------------------- row ops with a fused pointwise prologue

_KG_TF_MAX_ROW = 16384


def _kg_tf_row_eager(program, row_op, vals, w, b, eps):
    x = _kg_tf_eager(program, vals)
    if row_op[0] == "softmax":
        return torch.softmax(x, dim=-1)
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def kg_tf_row(program, row_op, w, b, eps, *vals):
    """softmax over the last dim / LayerNorm over the last dim of the program's result, by one generated
    kernel (the prologue computed as each row is loaded) where it applies, else with torch."""
    common = _kg_tf_common(vals)
    if common is None:
        return _kg_tf_row_eager(program, row_op, vals, w, b, eps)
    t0, shape = common
    kinds = _kg_tf_kinds(vals, shape, t0.dtype, t0.device)
    n_cols = shape[-1] if len(shape) else 0
    params_ok = all(p is None or (torch.is_tensor(p) and p.dtype == t0.dtype and p.device == t0.device
                                  and p.is_contiguous() and p.numel() == n_cols
                                  and not (torch.is_grad_enabled() and p.requires_grad)) for p in (w, b))
    if kinds is None or not params_ok or math.prod(shape) == 0 or n_cols > _KG_TF_MAX_ROW:
        return _kg_tf_row_eager(program, row_op, vals, w, b, eps)
    out = torch.empty(shape, dtype=t0.dtype, device=t0.device)
    block = triton.next_power_of_2(n_cols)
    warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    op = row_op if row_op[0] == "softmax" else ("layernorm", w is not None, b is not None)
    _kg_tf_launch(_kg_tf_kernel(program, kinds, None, op), (out.numel() // n_cols,), t0.device, out, n_cols,
                  w if w is not None else out, b if b is not None else out, float(eps),
                  *_kg_tf_args(vals, kinds), BLOCK=block, num_warps=warps)
    return out


def _kg_tf_row_op(node, mods):
    """(row_op, weight, bias, eps) when node is a softmax or LayerNorm over the last dim, else None;
    weight/bias are module attribute paths (str), Nodes or None."""
    if node.op == "call_module":
        m = mods.get(node.target)
        if type(m) is torch.nn.Softmax and m.dim == -1 and len(node.args) == 1:
            return ("softmax",), None, None, 0.0
        if type(m) is torch.nn.LayerNorm and len(m.normalized_shape) == 1 and len(node.args) == 1:
            w = node.target + ".weight" if m.weight is not None else None
            b = node.target + ".bias" if getattr(m, "bias", None) is not None else None
            return ("layernorm",), w, b, float(m.eps)
        return None
    if node.op in ("call_function", "call_method") and \
            getattr(node.target, "__name__", node.target) == "softmax" and not node.kwargs.get("dtype"):
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        return (("softmax",), None, None, 0.0) if dim == -1 and len(node.args) <= 2 else None
    if node.op == "call_function" and node.target is F.layer_norm:
        bound = dict(zip(("input", "normalized_shape", "weight", "bias", "eps"), node.args))
        bound.update(node.kwargs)
        shape = bound.get("normalized_shape")
        if not isinstance(shape, (tuple, list)) or len(shape) != 1 or not _kg_tf_number(bound.get("eps", 1e-5)):
            return None
        return ("layernorm",), bound.get("weight"), bound.get("bias"), float(bound.get("eps", 1e-5))
    return None


def kg_rewrite_triton_row(gm):
    """softmax / LayerNorm over the last dim whose input is a group of pointwise ops (used only there)
    -> one generated row kernel with the group computed as each row is loaded."""
    if triton is None:
        return 0
    mods, info = _kg_tf_info(gm)
    roots = {order[-1]: order for order in _kg_tf_groups(gm, info)}
    n = 0
    for node in list(gm.graph.nodes):
        row = _kg_tf_row_op(node, mods)
        if row is None or not node.args or node.args[0] not in roots:
            continue
        order = roots.pop(node.args[0])
        if len(node.args[0].users) != 1:
            continue
        row_op, w, b, eps = row
        inputs = _kg_tf_inputs(order, info)
        program = _kg_tf_program(order, info, inputs)
        with gm.graph.inserting_before(node):
            w = gm.graph.get_attr(w) if isinstance(w, str) else w
            b = gm.graph.get_attr(b) if isinstance(b, str) else b
            new = gm.graph.call_function(kg_tf_row, (program, row_op, w, b, eps, *inputs))
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        for m in reversed(order):
            gm.graph.erase_node(m)
            info.pop(m, None)
        n += 1
    return _kg_tf_finish(gm, n)


def _kg_tf_rowred_eager(prog1, red, prog2, rk, vals1, vals2):
    x = _kg_tf_eager(prog1, vals1)
    r = x.mean(dim=-1, keepdim=True) if red == "mean" else x.sum(dim=-1, keepdim=True)
    return _kg_tf_eager(prog2, list(vals2[:rk]) + [r] + list(vals2[rk:]))


def kg_tf_rowred(prog1, red, prog2, rk, n1, *vals):
    """prog2(..., reduce(prog1(vals1), last dim, keepdim), ...) by one generated row kernel where it applies,
    else with torch; vals = prog1's operands, then prog2's without the reduced value (its position rk)."""
    vals1, vals2 = vals[:n1], vals[n1:]
    common = _kg_tf_common(vals)
    if common is None:
        return _kg_tf_rowred_eager(prog1, red, prog2, rk, vals1, vals2)
    t0, shape = common
    k1, k2 = _kg_tf_kinds(vals1, shape, t0.dtype, t0.device), _kg_tf_kinds(vals2, shape, t0.dtype, t0.device)
    n_cols = shape[-1] if len(shape) else 0
    full = any(torch.is_tensor(v) and tuple(v.shape) == tuple(shape) for v in vals1)
    if k1 is None or k2 is None or not full or math.prod(shape) == 0 or n_cols > _KG_TF_MAX_ROW:
        return _kg_tf_rowred_eager(prog1, red, prog2, rk, vals1, vals2)
    kinds2 = k2[:rk] + (4,) + k2[rk:]
    out = torch.empty(shape, dtype=t0.dtype, device=t0.device)
    block = triton.next_power_of_2(n_cols)
    warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    kernel = _kg_tf_kernel(prog1, k1, None, ("reduce", red, prog2, kinds2))
    _kg_tf_launch(kernel, (out.numel() // n_cols,), t0.device, out, n_cols, *_kg_tf_args(vals1, k1),
                  *_kg_tf_args(vals2, k2), BLOCK=block, num_warps=warps)
    return out


def _kg_tf_reduction(node):
    """"sum" or "mean" when node reduces its input over the last dim keeping it (x.mean(-1, keepdim=True))."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op not in ("call_method", "call_function") or name not in ("sum", "mean") or len(node.args) > 2:
        return None
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    extra = set(node.kwargs) - {"dim", "keepdim"}
    return name if dim == -1 and node.kwargs.get("keepdim") is True and not extra else None


def kg_rewrite_triton_rowreduce(gm):
    """A sum/mean over the last dim (keepdim) of a pointwise group (or of a tensor), read only by one
    pointwise group -> one generated row kernel (RMSNorm written out, variance-style normalisations)."""
    if triton is None:
        return 0
    _, info = _kg_tf_info(gm)
    groups = _kg_tf_groups(gm, info)
    root_of = {order[-1]: order for order in groups}
    group_of = {m: order for order in groups for m in order}
    n = 0
    for node in list(gm.graph.nodes):
        red = _kg_tf_reduction(node)
        if red is None or not node.users or not isinstance(node.args[0], torch.fx.Node):
            continue
        src = node.args[0]
        g2 = group_of.get(next(iter(node.users)))
        if g2 is None or any(group_of.get(u) is not g2 for u in node.users) or group_of.get(src) is g2:
            continue
        if src in root_of and len(src.users) == 1 and root_of[src] is not g2:
            g1 = root_of[src]
            in1 = _kg_tf_inputs(g1, info)
            prog1 = _kg_tf_program(g1, info, in1)
        else:
            g1, in1, prog1 = [], [src], (("mul", ("i0", 1.0), ()),)       # the tensor itself (x * 1.0 is exact)
        in2 = _kg_tf_inputs(g2, info)
        rk = in2.index(node)
        prog2 = _kg_tf_program(g2, info, in2)
        rest = [a for a in in2 if a is not node]
        root = g2[-1]
        with gm.graph.inserting_before(root):
            new = gm.graph.call_function(kg_tf_rowred, (prog1, red, prog2, rk, len(in1), *in1, *rest))
        root.replace_all_uses_with(new)
        for m in list(reversed(g2)) + [node] + list(reversed(g1)):
            gm.graph.erase_node(m)
            info.pop(m, None)
        for order in (g1, g2):
            for m in order:
                group_of.pop(m, None)
            if order:
                root_of.pop(order[-1], None)
        n += 1
    return _kg_tf_finish(gm, n)


TRITON_FUSION_REWRITES = {
    "triton-rowreduce": kg_rewrite_triton_rowreduce,
    "triton-row": kg_rewrite_triton_row,
    "triton-pointwise": kg_rewrite_triton_pointwise,
    "triton-epilogue": kg_rewrite_triton_epilogue,
    "triton-gemm": kg_rewrite_triton_gemm,
    "triton-gemm-3xtf32": kg_rewrite_triton_gemm_3xtf32,
}

# Hopper-sized tiles: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), searched together
GEMM_CONFIGS = ((128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4), (64, 256, 32, 4, 4),
                (128, 64, 32, 4, 4))

VARIANTS = {
    "triton-pointwise": [{"block": 1024, "num_warps": 4}, {"block": 2048, "num_warps": 8}],
    "triton-epilogue": [{"block": 1024, "num_warps": 4}, {"block": 2048, "num_warps": 8}],
}


# fp32 operand tiles take twice the shared memory of 16-bit ones. Fastest first, from the H200 sweep
# (benchmarks/results/h200_gemm_3xtf32.json: 1.50-1.74x over cuBLAS fp32 on the suite's GEMM shapes)
GEMM_CONFIGS_F32 = ((128, 128, 64, 8, 3), (128, 64, 32, 4, 4), (128, 128, 32, 8, 3), (64, 128, 32, 4, 4),
                    (64, 64, 32, 4, 4))


def gemm_3xtf32_variants(ctx=None):
    return [{"block_m": bm, "block_n": bn, "block_k": bk, "num_warps": w, "num_stages": s}
            for bm, bn, bk, w, s in GEMM_CONFIGS_F32]


def gemm_variants(tf32):
    """Strategy variants of the in-kernel GEMM; tf32 when the contract allows it for fp32 operands."""
    return [{"block_m": bm, "block_n": bn, "block_k": bk, "num_warps": w, "num_stages": s,
             "fp32_precision": "tf32" if tf32 else ""} for bm, bn, bk, w, s in GEMM_CONFIGS]
