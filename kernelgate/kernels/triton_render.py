"""The Triton renderer: a program (ir.py) and its operand kinds -> the source of one @triton.jit kernel.

Kernels: pointwise (a flat grid over the output), GEMM with the program as its epilogue on the accumulator
tile, a row op (softmax / LayerNorm) with the program as its prologue, and a row reduction between two
programs. Every kernel computes in fp32 and stores in the output's dtype. Operand kinds: 0 shaped like the
output (contiguous), 1 a vector along the last dim, 2 a one-element tensor, 3 a Python number (an fp32
scalar argument), 4 an fp32 value already in registers (a GEMM's accumulator, a reduced row).

A runtime module (kernels/manifest.py): imports nothing of kernelgate; imports without Triton.
"""

import re

from .ir import _KG_TRITON, _kg_ir_code

try:
    import triton
except ImportError:  # no kernels then: the rewrites apply nowhere, the launchers always fall back
    triton = None

if triton is not None:
    @triton.jit
    def _kg_tf_probe(x):
        pass

    _KG_TF_INTERPRETED = type(_kg_tf_probe).__name__ == "InterpretedFunction"
else:
    _KG_TF_INTERPRETED = False

# accurate math on the GPU (libdevice, as torch's own kernels), numpy's in the interpreter
_KG_TF_MATH = {"exp": ("libdevice.exp", "tl.exp"), "log": ("libdevice.log", "tl.log"),
               "erf": ("libdevice.erf", "tl.erf"), "tanh": ("libdevice.tanh", "_kg_tf_tanh"),
               "log1p": ("libdevice.log1p", "_kg_tf_log1p")}

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


@triton.jit
def _kg_tf_log1p(x):
    # the interpreter has no log1p: log(u) * x / (u - 1) with u = 1 + x rounded (exact where u - 1 is x), x itself
    # where u rounds to 1, u where it is infinite
    u = 1.0 + x
    d = u - 1.0
    r = tl.where(d == 0.0, x, tl.log(u) * tl.div_rn(x, tl.where(d == 0.0, 1.0, d)))
    return tl.where(u == float("inf"), u, r)

'''


def _kg_tf_body(program, kinds, full_idx, col_idx, mask, col_mask, shape, indent="    "):
    """Loads of the operands by kind, then one fp32 statement per instruction; returns (lines, name of the
    result)."""
    fn = {k: v[1 if _KG_TF_INTERPRETED else 0] for k, v in _KG_TF_MATH.items()}
    lines, block = [], {}
    for k, kind in enumerate(kinds):
        if kind == 0:
            lines.append(f"v{k} = tl.load(a{k} + {full_idx}, mask={mask}, other=0.0).to(tl.float32)")
        elif kind == 1:
            lines.append(f"v{k} = tl.load(a{k} + {col_idx}, mask={col_mask}, other=0.0).to(tl.float32)")
        elif kind == 2:
            lines.append(f"v{k} = tl.load(a{k}).to(tl.float32)")
        else:                                            # 3: a Python number, 4: an fp32 value in registers
            lines.append(f"v{k} = a{k}")
        block[f"i{k}"] = kind in (0, 1, 4)
    for j, (op, refs, params) in enumerate(program):
        a = [("v" + r[1:] if r[0] == "i" else r) if isinstance(r, str) else f"({float(r)!r})" for r in refs]
        lines.append(f"t{j} = {_kg_ir_code(op, a, params, _KG_TRITON, lambda v: repr(float(v)), **fn)}")
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
