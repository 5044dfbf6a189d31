"""Triton launchers: a program on its operands by one generated kernel where it applies, else with torch.

A kernel applies to CUDA tensors, or tensors on any device when the kernels are interpreted
(TRITON_INTERPRET=1 when triton was first imported); one floating dtype (fp32/fp16/bf16); operands shaped
like the output and contiguous, vectors along the last dim, one-element tensors or numbers; no autograd.
Anything else replays the original ops (ir._kg_ir_eval). A kernel is generated at its first use per
(program, operand kinds, variant) and kept.

A runtime module (kernels/manifest.py): imports nothing of kernelgate; imports without Triton.
"""

import importlib.util
import math
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

from .cache import _kg_cache_load
from .fx import _kg_fx_number
from .ir import _KG_IR_IDENTITY, _kg_ir_eval
from .triton_render import _KG_TF_INTERPRETED, kg_tf_source

try:
    import triton
except ImportError:  # the launchers always fall back
    triton = None

_KG_TF_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_KG_TF_SMEM = 200 * 1024          # shared-memory budget for the GEMM's pipelined tiles (H100/H200: 227 KiB)
_KG_TF_MAX_ROW = 16384
_KG_TF_3X_MIN = 1 << 27          # multiply-adds below which a 3xTF32 GEMM cannot pay for its launch (~5 us on cuBLAS)

_KG_TF_KERNELS = {}


def _kg_tf_module(name, source):
    """Generated source imported from its own file (a real file: @triton.jit reads the source), written
    atomically (concurrent processes never see half a file) in the temp directory; cache.py names it."""
    if name in sys.modules:
        return sys.modules[name]
    folder = os.path.join(tempfile.gettempdir(), "kernelgate_kernels")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".py")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(source)
    os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _kg_tf_kernel(program, kinds, precision=None, row_op=None):
    """The generated kernel for a program, its operand kinds and variant (kg_tf_source), built once."""
    key = (program, kinds, precision, row_op)
    k = _KG_TF_KERNELS.get(key)
    if k is None:
        k = _kg_cache_load("kg_tf_gen_", kg_tf_source(program, kinds, precision, row_op), _kg_tf_module).kg_tf_kernel
        _KG_TF_KERNELS[key] = k
    return k


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
    if triton is None or not tensors or not all(torch.is_tensor(v) or _kg_fx_number(v) for v in vals):
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
        return _kg_ir_eval(program, vals)
    t0, shape = common
    kinds = _kg_tf_kinds(vals, shape, t0.dtype, t0.device)
    if kinds is None or math.prod(shape) == 0:
        return _kg_ir_eval(program, vals)
    out = torch.empty(shape, dtype=t0.dtype, device=t0.device)
    n = out.numel()
    block, warps = cfg
    _kg_tf_launch(_kg_tf_kernel(program, kinds), (triton.cdiv(n, block),), t0.device, out, n,
                  shape[-1] if len(shape) else 1, *_kg_tf_args(vals, kinds), BLOCK=block, num_warps=warps)
    return out


# ---------------------------------------------------------------- GEMM + epilogue

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
    return _kg_ir_eval(program, (y,) + tuple(vals))


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
        if program == _KG_IR_IDENTITY:          # a small GEMM on its own: the reference's op, unchanged
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


# ---------------------------------------------------------------- row ops with a fused pointwise prologue

def _kg_tf_row_eager(program, row_op, vals, w, b, eps):
    x = _kg_ir_eval(program, vals)
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


def _kg_tf_rowred_eager(prog1, red, prog2, rk, vals1, vals2):
    x = _kg_ir_eval(prog1, vals1)
    r = x.mean(dim=-1, keepdim=True) if red == "mean" else x.sum(dim=-1, keepdim=True)
    return _kg_ir_eval(prog2, list(vals2[:rk]) + [r] + list(vals2[rk:]))


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
