"""The Pallas renderer: programs (ir.py) and row ops -> JAX Pallas kernel bodies (Python closures JAX traces).

Kernels take whole arrays as refs (no BlockSpecs) and address their block with `pl.ds` slices and masks, as a
Triton kernel does, so one body serves both Pallas paths: JAX's interpreter (CPU, KG_PALLAS_INTERPRET=1) and
its GPU lowering (Triton, chosen by JAX with no compiler_params). Block sizes are powers of 2 (the Triton
lowering needs them); masked lanes read `other` and are never stored. Every kernel computes in fp32 and
stores in the output's dtype. Templates:
- pointwise: a program over the flattened output, one block of BLOCK elements per program;
- row: softmax / LayerNorm / RMSNorm over the last dim, ROWS rows of one padded block each per program;
- GEMM: out[M, N] = epilogue(x[M, K] @ w), a (block_m, block_n) tile per program, a loop over K in block_k
  steps (the K tail masked to 0), the bias and the program applied to the fp32 accumulator before the store.
Operand kinds (as triton_render.py): 0 shaped like the output (contiguous), 1 a vector along the last dim,
2 a one-element tensor, 3 a Python number (a constant of the kernel), 4 the fp32 accumulator (GEMM).

A runtime module (kernels/manifest.py): imports nothing of kernelgate; imports without JAX (JAX is imported at
the first kernel, after XLA_PYTHON_CLIENT_PREALLOCATE=false is set so that JAX takes no GPU memory up front).
"""

import importlib.util
import os

_KG_PL_MODS = []                 # [namespace of jax modules], once imported


def kg_pallas_available():
    """Whether JAX (with Pallas) can be imported here; does not import it."""
    return importlib.util.find_spec("jax") is not None


class _KG_PL_Jax:
    """jax, jax.numpy, jax.lax, pallas and pallas' Triton-style load/store/dot, imported together."""

    def __init__(self):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        import jax.dlpack
        import jax.numpy as jnp
        from jax import lax
        from jax.experimental import pallas as pl
        from jax.experimental.pallas import triton as plgpu
        self.jax, self.jnp, self.lax, self.pl, self.plgpu = jax, jnp, lax, pl, plgpu


def _kg_pl_jax():
    if not _KG_PL_MODS:
        _KG_PL_MODS.append(_KG_PL_Jax())
    return _KG_PL_MODS[0]


_KG_PL_ERFC = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
               0.37409196, 1.00002368, -1.26551223)


def _kg_pl_erfc(j, z):
    """erfc(z) for z >= 0 from exp and a Chebyshev fit in t = 1 / (1 + z/2) (relative error under 1.2e-7): JAX's
    Triton lowering has no erf. GELU through it errs 3.8e-7 at most against fp64, torch's fp32 GELU 1.2e-6."""
    t = 1.0 / (1.0 + 0.5 * z)
    p = _KG_PL_ERFC[0]
    for c in _KG_PL_ERFC[1:]:
        p = p * t + c
    return t * j.jnp.exp(p - z * z)


def _kg_pl_op(j, op, a, params):
    """One IR instruction on fp32 JAX values (a: the operands), computed as torch computes it."""
    jnp = j.jnp
    if op == "add":
        return a[0] + a[1]
    if op == "sub":
        return a[0] - a[1]
    if op == "mul":
        return a[0] * a[1]
    if op == "div":
        return a[0] / a[1]
    if op == "neg":
        return -a[0]
    x = a[0]
    if op == "sigmoid":
        return 1.0 / (1.0 + jnp.exp(-x))
    if op == "silu":
        return x / (1.0 + jnp.exp(-x))
    if op == "relu":
        return jnp.where(x < 0.0, 0.0, x)                  # NaN kept, as torch.relu
    if op == "gelu":                 # 1 + erf(x / sqrt 2) through erfc, on both sides of 0
        c = _kg_pl_erfc(j, jnp.abs(x) * 0.7071067811865476)
        return x * 0.5 * jnp.where(x < 0.0, c, 2.0 - c)
    if op == "gelu_tanh":
        return 0.5 * x * (1.0 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))
    if op == "leaky_relu":
        return jnp.where(x > 0.0, x, x * float(params[0]))
    if op == "softplus":
        beta, threshold = float(params[0]), float(params[1])
        return jnp.where(x * beta > threshold, x, jnp.log1p(jnp.exp(x * beta)) / beta)
    if op == "mish":
        return x * jnp.tanh(jnp.log1p(jnp.exp(x)))
    if op in ("hardswish", "hardsigmoid"):
        t = x + 3.0
        t = jnp.where(t < 0.0, 0.0, jnp.where(t > 6.0, 6.0, t))
        return (x * t if op == "hardswish" else t) / 6.0
    if op in ("exp", "log", "tanh", "sqrt", "abs"):
        return getattr(jnp, op)(x)
    if op == "rsqrt":
        return 1.0 / jnp.sqrt(x)
    if op == "square":
        return x * x
    if op == "clamp":
        lo, hi = params                                      # lower bound first, NaN kept (torch.clamp)
        if lo is not None:
            x = jnp.where(x < lo, float(lo), x)
        if hi is not None:
            x = jnp.where(x > hi, float(hi), x)
        return x
    if op == "pow":
        e = params[0]
        return {2: lambda: x * x, 3: lambda: x * x * x, -1: lambda: 1.0 / x, -2: lambda: 1.0 / (x * x),
                0.5: lambda: jnp.sqrt(x), -0.5: lambda: 1.0 / jnp.sqrt(x), 1: lambda: x}[e]()
    raise ValueError(f"no Pallas form for op {op!r}")


def _kg_pl_program(j, program, vals, shape):
    """The program on fp32 values (vals[k]: operand k, a block or a number); the result as a block of `shape`."""
    temps = []
    for op, refs, params in program:
        args = [(vals if r[0] == "i" else temps)[int(r[1:])] if isinstance(r, str) else float(r) for r in refs]
        temps.append(_kg_pl_op(j, op, args, params))
    return j.jnp.broadcast_to(j.jnp.asarray(temps[-1], j.jnp.float32), shape)


def _kg_pl_operand(j, ref, kind, number, rows, cols, mask, col_mask):
    """Operand of a 2-D block: rows/cols index the output [R, C] (a pl.ds each); kind 0 is [R, C], 1 a [C]
    vector, 2 one element, 3 the number."""
    if kind == 0:
        return j.plgpu.load(ref.at[rows, cols], mask=mask, other=0.0).astype(j.jnp.float32)
    if kind == 1:
        return j.plgpu.load(ref.at[cols], mask=col_mask, other=0.0).astype(j.jnp.float32)[None, :]
    if kind == 2:
        return j.plgpu.load(ref.at[j.pl.ds(0, 1)]).astype(j.jnp.float32)[None, :]
    return number


def _kg_pl_pointwise_kernel(program, kinds, numbers, block):
    """Pointwise body over the output as [R, C] (C: the last dim when some operand is a vector along it, else
    R = 1 and C the element count); grid (cdiv(R, ROWS), cdiv(C, COLS)), block = (ROWS, COLS). refs: the
    tensor operands (kinds 0, 1, 2) in order, then the output."""
    br, bc = block
    j = _kg_pl_jax()

    def kernel(*refs):
        ins, out = iter(refs[:-1]), refs[-1]
        n_rows, n_cols = out.shape
        i, k = j.pl.program_id(0), j.pl.program_id(1)
        row_mask = i * br + j.jnp.arange(br) < n_rows
        col_mask = k * bc + j.jnp.arange(bc) < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        rows, cols = j.pl.ds(i * br, br), j.pl.ds(k * bc, bc)
        vals = [_kg_pl_operand(j, None if kind == 3 else next(ins), kind, numbers[n], rows, cols, mask, col_mask)
                for n, kind in enumerate(kinds)]
        y = _kg_pl_program(j, program, vals, (br, bc))
        j.plgpu.store(out.at[rows, cols], y.astype(out.dtype), mask=mask)
    return kernel


def _kg_pl_row_kernel(row_op, has_w, has_b, eps, rows_per, block):
    """Row body: x [R, n] -> softmax / layernorm / rmsnorm of each row; grid (cdiv(R, ROWS),), each program
    ROWS rows of one masked block of BLOCK >= n columns. refs: x, [weight], [bias], out."""
    j = _kg_pl_jax()
    jnp = j.jnp

    def kernel(*refs):
        x_ref, out = refs[0], refs[-1]
        w_ref = refs[1] if has_w else None
        b_ref = refs[1 + has_w] if has_b else None
        n_rows, n = x_ref.shape
        i = j.pl.program_id(0)
        col_mask = jnp.arange(block) < n
        mask = (i * rows_per + jnp.arange(rows_per) < n_rows)[:, None] & col_mask[None, :]
        rows, cols = j.pl.ds(i * rows_per, rows_per), j.pl.ds(0, block)
        if row_op == "softmax":
            x = j.plgpu.load(x_ref.at[rows, cols], mask=mask, other=-float("inf")).astype(jnp.float32)
            e = jnp.where(mask, jnp.exp(x - jnp.max(x, axis=1, keepdims=True)), 0.0)
            y = e / jnp.sum(e, axis=1, keepdims=True)        # one division per element (torch: e * (1/s))
        else:
            x = j.plgpu.load(x_ref.at[rows, cols], mask=mask, other=0.0).astype(jnp.float32)
            if row_op == "layernorm":
                d = jnp.where(mask, x - jnp.sum(x, axis=1, keepdims=True) / n, 0.0)
            else:                                            # rmsnorm
                d = x
            y = d / jnp.sqrt(jnp.sum(d * d, axis=1, keepdims=True) / n + eps)
            if has_w:
                y = y * j.plgpu.load(w_ref.at[cols], mask=col_mask, other=0.0).astype(jnp.float32)[None, :]
            if has_b:
                y = y + j.plgpu.load(b_ref.at[cols], mask=col_mask, other=0.0).astype(jnp.float32)[None, :]
        j.plgpu.store(out.at[rows, cols], y.astype(out.dtype), mask=mask)
    return kernel


def _kg_pl_gemm_kernel(program, kinds, numbers, kind, has_bias, blocks, precise):
    """GEMM body: out[M, N] = program(x[M, K] @ b + bias, operands...), b = w^T (kind "linear", w [N, K]) or w
    ("matmul", w [K, N]); grid (cdiv(M, block_m), cdiv(N, block_n)); fp32 accumulation, the K tail masked to 0;
    precise: fp32 products at full precision (no TF32). kinds/numbers: the program's operands after input 0
    (the accumulator). refs: x, w, [bias], the tensor operands, out."""
    bm, bn, bk = blocks
    j = _kg_pl_jax()
    jnp, lax = j.jnp, j.lax
    precision = lax.Precision.HIGHEST if precise else None

    def kernel(*refs):
        x_ref, w_ref, out = refs[0], refs[1], refs[-1]
        b_ref = refs[2] if has_bias else None
        ins = iter(refs[2 + has_bias:-1])
        m_total, k_total = x_ref.shape
        n_total = out.shape[1]
        i, jn = j.pl.program_id(0), j.pl.program_id(1)
        row_mask = i * bm + jnp.arange(bm) < m_total
        col_mask = jn * bn + jnp.arange(bn) < n_total
        rows, cols = j.pl.ds(i * bm, bm), j.pl.ds(jn * bn, bn)

        def step(k, acc):
            k_mask = k * bk + jnp.arange(bk) < k_total
            ks = j.pl.ds(k * bk, bk)
            a = j.plgpu.load(x_ref.at[rows, ks], mask=row_mask[:, None] & k_mask[None, :], other=0.0)
            if kind == "linear":
                b = j.plgpu.load(w_ref.at[cols, ks], mask=col_mask[:, None] & k_mask[None, :], other=0.0)
                return acc + j.plgpu.dot(a, b, trans_b=True, precision=precision)
            b = j.plgpu.load(w_ref.at[ks, cols], mask=k_mask[:, None] & col_mask[None, :], other=0.0)
            return acc + j.plgpu.dot(a, b, precision=precision)

        acc = lax.fori_loop(0, j.pl.cdiv(k_total, bk), step, jnp.zeros((bm, bn), jnp.float32))
        if has_bias:
            acc = acc + j.plgpu.load(b_ref.at[cols], mask=col_mask, other=0.0).astype(jnp.float32)[None, :]
        mask = row_mask[:, None] & col_mask[None, :]
        vals = [acc] + [_kg_pl_operand(j, None if kd == 3 else next(ins), kd, numbers[n], rows, cols, mask, col_mask)
                        for n, kd in enumerate(kinds)]
        y = _kg_pl_program(j, program, vals, (bm, bn))
        j.plgpu.store(out.at[rows, cols], y.astype(out.dtype), mask=mask)
    return kernel
