"""Pallas launchers: torch tensors in, a Pallas kernel (pallas_render.py) on them through DLPack, a torch tensor
out; the reference's torch ops where a kernel does not apply.

Tensors cross to JAX and back by DLPack, without copies (jax.dlpack.from_dlpack / torch.from_dlpack; JAX itself
copies an input whose address it cannot take, a view at an odd offset). A kernel runs interpreted
(`interpret=True`: JAX's Pallas interpreter, XLA ops) for CPU tensors or with KG_PALLAS_INTERPRET=1, compiled for
the GPU (JAX picks the lowering) for CUDA tensors when this JAX has a GPU backend. It applies to one floating dtype
(fp32/fp16/bf16), contiguous operands shaped like the output, vectors along its last dim, one-element tensors
or numbers; no autograd. Anything else replays the original ops. Each jitted call is kept per (template,
shapes, dtype, parameters). In interpret mode every grid step copies the output once, so blocks grow there
until a grid has at most _KG_PL_INTERPRET_STEPS steps a dimension (what is computed does not change).

A runtime module (kernels/manifest.py): imports nothing of kernelgate; imports without JAX.
"""

import math
import os

import torch
import torch.nn.functional as F

from .fx import _kg_fx_number
from .ir import _kg_ir_eval
from .pallas_render import (_kg_pl_gemm_kernel, _kg_pl_jax, _kg_pl_pointwise_kernel, _kg_pl_row_kernel,
                            kg_pallas_available)

KG_PALLAS_NO_JAX = ("the pallas language needs JAX: pip install 'kernelgate[pallas]' (on an NVIDIA GPU with CUDA 13: "
                    "pip install 'jax[cuda13]')")

_KG_PL_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
_KG_PL_INTERPRET_STEPS = 8       # grid steps a dimension in interpret mode (each step copies the output)
_KG_PL_MAX_ROW = 16384           # a row kernel's block on the GPU
_KG_PL_ROW_ELEMS = 4096          # elements a row program takes on the GPU (rows x padded row)

_KG_PL_CALLS = {}                # key -> jitted pallas_call
_KG_PL_GPU = []                  # [whether this JAX has a GPU backend], once asked


def _kg_pl_interpret(t):
    return t.device.type == "cpu" or os.environ.get("KG_PALLAS_INTERPRET", "") == "1"


def _kg_pl_device_ok(t):
    """CPU tensors (interpreted), CUDA tensors when JAX has a GPU backend (or KG_PALLAS_INTERPRET=1)."""
    if t.device.type == "cpu":
        return True
    if t.device.type != "cuda":
        return False
    if not _KG_PL_GPU:
        try:
            _KG_PL_GPU.append(bool(_kg_pl_jax().jax.devices("gpu")))
        except RuntimeError:
            _KG_PL_GPU.append(False)
    return _KG_PL_GPU[0]


def _kg_pl_ok(t, dtype=None):
    """A non-empty contiguous tensor of a kernel dtype (the given one) on a device a kernel takes, no autograd."""
    return (torch.is_tensor(t) and t.dtype in _KG_PL_DTYPES and (dtype is None or t.dtype == dtype)
            and t.numel() > 0 and t.is_contiguous() and not (torch.is_grad_enabled() and t.requires_grad)
            and kg_pallas_available() and _kg_pl_device_ok(t))


def _kg_pl_p2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def _kg_pl_fit(blocks, sizes, interpret):
    """Blocks (powers of 2) grown in interpret mode until each grid dimension has at most _KG_PL_INTERPRET_STEPS
    steps."""
    if not interpret:
        return tuple(blocks)
    return tuple(max(b, _kg_pl_p2(-(-s // _KG_PL_INTERPRET_STEPS))) for b, s in zip(blocks, sizes))


#: XLA takes a buffer only at an address that is a multiple of 16 bytes on the GPU (a view at an odd offset, the
#: gate's layout trial, crashed a port on the H100: "Address of buffer 1 must be a multiple of 10"); torch's
#: allocators give 64 or more
_KG_PL_ALIGN = 64


def kg_pl_to_jax(t):
    """A torch tensor as a JAX array on the same memory (DLPack; detached: autograd is not needed here, the
    launchers checked, and torch exports no tensor that requires grad); a copy where the view starts at an
    address XLA refuses."""
    t = t.detach()
    if t.data_ptr() % _KG_PL_ALIGN:
        t = t.clone()
    return _kg_pl_jax().jax.dlpack.from_dlpack(t)


def kg_pl_to_torch(a):
    """A JAX array as a torch tensor on the same memory (DLPack)."""
    return torch.from_dlpack(a)


def _kg_pl_run(key, build, out_shape, dtype, grid, interpret, tensors):
    """The jitted pallas_call of the kernel build() makes (kept under key) on the tensors; a torch tensor."""
    j = _kg_pl_jax()
    fn = _KG_PL_CALLS.get(key)
    if fn is None:
        call = j.pl.pallas_call(build(), out_shape=j.jax.ShapeDtypeStruct(out_shape, j.jnp.dtype(_KG_PL_DTYPES[dtype])),
                                grid=grid, interpret=interpret)
        fn = _KG_PL_CALLS[key] = j.jax.jit(call)
    return kg_pl_to_torch(fn(*[kg_pl_to_jax(t) for t in tensors]))


def _kg_pl_kinds(vals, shape, dtype, device):
    """Per operand: 0 shaped like the output, 1 a vector along its last dim, 2 one element, 3 a Python number;
    None when some operand fits none of these (or is not a kernel's tensor)."""
    kinds = []
    for v in vals:
        if _kg_fx_number(v):
            kinds.append(3)
        elif not _kg_pl_ok(v, dtype) or v.device != device:
            return None
        elif tuple(v.shape) == tuple(shape):
            kinds.append(0)
        elif v.numel() == 1 and v.dim() <= len(shape):
            kinds.append(2)
        elif len(shape) and 1 <= v.dim() <= len(shape) and v.numel() == v.shape[-1] == shape[-1]:
            kinds.append(1)
        else:
            return None
    return tuple(kinds)


def _kg_pl_flat(vals, kinds, rows, cols):
    """The tensor operands as the kernel takes them: kind 0 as [R, C], kinds 1 and 2 as vectors (views)."""
    return [v.view(rows, cols) if k == 0 else v.view(-1) for v, k in zip(vals, kinds) if k != 3]


def kg_pl_pointwise(program, cfg, *vals):
    """The program on vals by one Pallas kernel where it applies, else the original ops with torch. cfg: (BLOCK,)
    elements a program."""
    tensors = [v for v in vals if torch.is_tensor(v)]
    if not tensors or not _kg_pl_ok(tensors[0]) or not all(torch.is_tensor(v) or _kg_fx_number(v) for v in vals):
        return _kg_ir_eval(program, vals)
    t0 = tensors[0]
    try:
        shape = tuple(torch.broadcast_shapes(*(t.shape for t in tensors)))
    except RuntimeError:
        return _kg_ir_eval(program, vals)
    kinds = _kg_pl_kinds(vals, shape, t0.dtype, t0.device)
    if kinds is None or 0 not in kinds:
        return _kg_ir_eval(program, vals)
    total = math.prod(shape)
    cols = shape[-1] if 1 in kinds else total
    rows = total // cols
    bc = min(_kg_pl_p2(cols), _kg_pl_p2(cfg[0]))
    br = min(_kg_pl_p2(rows), max(1, _kg_pl_p2(cfg[0]) // bc))
    interpret = _kg_pl_interpret(t0)
    br, bc = _kg_pl_fit((br, bc), (rows, cols), interpret)
    numbers = tuple(float(v) if k == 3 else None for v, k in zip(vals, kinds))
    key = ("pointwise", program, kinds, numbers, rows, cols, t0.dtype, br, bc, interpret)
    out = _kg_pl_run(key, lambda: _kg_pl_pointwise_kernel(program, kinds, numbers, (br, bc)), (rows, cols),
                     t0.dtype, (-(-rows // br), -(-cols // bc)), interpret, _kg_pl_flat(vals, kinds, rows, cols))
    return out.view(shape)


# ---------------------------------------------------------------- row ops: softmax, LayerNorm, RMSNorm

def _kg_pl_row(row_op, x, w, b, eps):
    """The row kernel on x [..., n] (weight / bias vectors of n or None), or None where it does not apply."""
    n = x.shape[-1] if _kg_pl_ok(x) else 0
    interpret = n and _kg_pl_interpret(x)
    if not n or (not interpret and n > _KG_PL_MAX_ROW) or \
            not all(p is None or (_kg_pl_ok(p, x.dtype) and p.device == x.device and p.numel() == n) for p in (w, b)):
        return None
    rows = x.numel() // n
    block = _kg_pl_p2(n)
    (rows_per,) = _kg_pl_fit((min(_kg_pl_p2(rows), max(1, _KG_PL_ROW_ELEMS // block)),), (rows,), interpret)
    has_w, has_b = w is not None, b is not None
    key = ("row", row_op, has_w, has_b, float(eps), rows, n, x.dtype, rows_per, interpret)
    tensors = [x.view(rows, n)] + [p.view(-1) for p in (w, b) if p is not None]
    out = _kg_pl_run(key, lambda: _kg_pl_row_kernel(row_op, has_w, has_b, float(eps), rows_per, block), (rows, n),
                     x.dtype, (-(-rows // rows_per),), interpret, tensors)
    return out.view(x.shape)


def kg_pl_softmax(x, dim=-1):
    """torch.softmax(x, dim) over the last dim by the Pallas row kernel where it applies, else torch."""
    y = _kg_pl_row("softmax", x, None, None, 0.0) if torch.is_tensor(x) and dim in (-1, x.dim() - 1) else None
    return torch.softmax(x, dim) if y is None else y


def _kg_pl_last_dim(x, normalized_shape):
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    return torch.is_tensor(x) and x.dim() >= 1 and shape == (x.shape[-1],)


def kg_pl_layernorm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """F.layer_norm over the last dim by the Pallas row kernel where it applies, else F.layer_norm."""
    y = _kg_pl_row("layernorm", x, weight, bias, eps) if _kg_pl_last_dim(x, normalized_shape) else None
    return F.layer_norm(x, normalized_shape, weight, bias, eps) if y is None else y


def kg_pl_rmsnorm(x, normalized_shape, weight=None, eps=None):
    """F.rms_norm over the last dim (eps None: the dtype's machine epsilon, as torch) by the Pallas row kernel
    where it applies, else F.rms_norm."""
    ok = _kg_pl_last_dim(x, normalized_shape) and x.dtype in _KG_PL_DTYPES
    y = _kg_pl_row("rmsnorm", x, weight, None, torch.finfo(x.dtype).eps if eps is None else eps) if ok else None
    return F.rms_norm(x, normalized_shape, weight, eps) if y is None else y


# ---------------------------------------------------------------- GEMM + epilogue

def _kg_pl_gemm_eager(program, kind, x, w, bias, vals):
    y = F.linear(x, w, bias) if kind == "linear" else torch.matmul(x, w)
    return _kg_ir_eval(program, (y,) + tuple(vals))


def kg_pl_gemm(program, cfg, kind, x, w, bias, *vals):
    """program(gemm(x, w, bias), *vals), where gemm is F.linear ("linear": x @ w^T + bias) or torch.matmul
    ("matmul": x @ w, w 2-D) and the program's input 0 is the GEMM's result: one Pallas kernel with the bias and
    the program applied to the fp32 accumulator tile, where it applies; else with torch. cfg: (block_m, block_n,
    block_k). fp32 products at full precision."""
    if not (_kg_pl_ok(x) and _kg_pl_ok(w, x.dtype) and w.device == x.device and w.dim() == 2
            and (bias is None or (_kg_pl_ok(bias, x.dtype) and bias.device == x.device))):
        return _kg_pl_gemm_eager(program, kind, x, w, bias, vals)
    n_out, k_in = (w.shape[0], w.shape[1]) if kind == "linear" else (w.shape[1], w.shape[0])
    shape = tuple(x.shape[:-1]) + (n_out,)
    if x.shape[-1] != k_in or (bias is not None and tuple(bias.shape) != (n_out,)):
        return _kg_pl_gemm_eager(program, kind, x, w, bias, vals)
    kinds = _kg_pl_kinds(vals, shape, x.dtype, x.device)
    if kinds is None:
        return _kg_pl_gemm_eager(program, kind, x, w, bias, vals)
    m = x.numel() // k_in
    interpret = _kg_pl_interpret(x)
    bm, bn, bk = (_kg_pl_p2(c) for c in cfg)
    bm, bn, bk = _kg_pl_fit((min(bm, _kg_pl_p2(m)), min(bn, _kg_pl_p2(n_out)), min(bk, _kg_pl_p2(k_in))),
                            (m, n_out, k_in), interpret)
    numbers = tuple(float(v) if k == 3 else None for v, k in zip(vals, kinds))
    precise = x.dtype == torch.float32
    has_bias = bias is not None
    key = ("gemm", program, kinds, numbers, kind, has_bias, m, n_out, k_in, x.dtype, bm, bn, bk, interpret)
    tensors = [x.view(m, k_in), w] + ([bias] if has_bias else []) + _kg_pl_flat(vals, kinds, m, n_out)
    out = _kg_pl_run(key, lambda: _kg_pl_gemm_kernel(program, kinds, numbers, kind, has_bias, (bm, bn, bk), precise),
                     (m, n_out), x.dtype, (-(-m // bm), -(-n_out // bn)), interpret, tensors)
    return out.view(shape)
