"""Generated Triton kernels (row softmax, LayerNorm forward) and the torch.fx rewrites that call them.

Like fx_rewrites.py, candidates embed this file's functions verbatim, so it stays self-contained and
imports without Triton. The launchers use a kernel only where it applies (a CUDA tensor, or any
device when the kernels were built by the interpreter, TRITON_INTERPRET=1 at import; the last
dimension; a row of at most 65536 elements; fp32/fp16/bf16; no autograd) and otherwise fall back
to torch. Rewrites pass module parameters as get_attr nodes, so load_state_dict is always seen.
"""

import torch
import torch.fx
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # the rewrites then apply nowhere, the launchers always fall back
    triton = None
try:                 # in the package; a candidate file holds fx_rewrites' functions above this code
    from .fx_rewrites import _kg_rewrite_attention, kg_sdpa
except ImportError:
    pass

_KG_TR_MAX_ROW = 65536
_KG_TR_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

if triton is not None:
    @triton.jit
    def _kg_softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)   # exp(x - max) as exp2, log2(e) scaled
        e = tl.where(mask, e, 0.0)
        y = e / tl.sum(e, axis=0)
        tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _kg_layernorm_kernel(out_ptr, in_ptr, w_ptr, b_ptr, in_stride, out_stride, n_cols, eps,
                             HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        var = tl.sum(d * d, axis=0) / n_cols
        y = d / tl.sqrt(var + eps)
        if HAS_W:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)

    _KG_TR_INTERPRETED = type(_kg_softmax_kernel).__name__ == "InterpretedFunction"
else:
    _KG_TR_INTERPRETED = False


def _kg_tr_usable(x, dim):
    """Whether the row kernels can take x reduced over dim."""
    if triton is None or not torch.is_tensor(x) or x.dtype not in _KG_TR_DTYPES or x.dim() == 0:
        return False
    if not (x.is_cuda or _KG_TR_INTERPRETED) or not isinstance(dim, int) or dim not in (-1, x.dim() - 1):
        return False
    if x.numel() == 0 or x.shape[-1] > _KG_TR_MAX_ROW:
        return False
    return not (torch.is_grad_enabled() and x.requires_grad)        # the kernels have no backward


def _kg_tr_rows(x):
    """x as a (rows, n) view or copy whose rows are contiguous, and an empty output like it."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    if x2.stride(1) != 1:
        x2 = x2.contiguous()
    return x2, torch.empty((x2.shape[0], n), dtype=x.dtype, device=x.device)


def _kg_tr_launch(kernel, x, grid, *args, **meta):
    """kernel[grid](...) on x's device; grid is a tuple, or a number of rows (one program each)."""
    grid = grid if isinstance(grid, tuple) else (grid,)
    if x.is_cuda and x.device.index is not None and x.device.index != torch.cuda.current_device():
        with torch.cuda.device(x.device):
            kernel[grid](*args, **meta)
    else:
        kernel[grid](*args, **meta)


def kg_triton_softmax(x, dim=-1, num_warps=4):
    """torch.softmax(x, dim) by a one-program-per-row Triton kernel where it applies, else torch."""
    if not _kg_tr_usable(x, dim):
        return torch.softmax(x, dim)
    x2, out = _kg_tr_rows(x)
    n = x2.shape[1]
    _kg_tr_launch(_kg_softmax_kernel, x, x2.shape[0], out, x2, x2.stride(0), out.stride(0), n,
                  BLOCK=triton.next_power_of_2(n), num_warps=num_warps)
    return out.view(x.shape)


def _kg_tr_param_ok(p, x):
    if p is None:
        return True
    return (torch.is_tensor(p) and p.dim() == 1 and p.shape[0] == x.shape[-1] and p.dtype == x.dtype
            and p.device == x.device and not (torch.is_grad_enabled() and p.requires_grad))


def kg_triton_layernorm(x, normalized_shape, weight=None, bias=None, eps=1e-5, num_warps=4):
    """F.layer_norm over the last dimension by a one-program-per-row Triton kernel, else F.layer_norm."""
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    if not (_kg_tr_usable(x, -1) and len(shape) == 1 and shape[0] == x.shape[-1]
            and _kg_tr_param_ok(weight, x) and _kg_tr_param_ok(bias, x)):
        return F.layer_norm(x, normalized_shape, weight, bias, eps)
    x2, out = _kg_tr_rows(x)
    n = x2.shape[1]
    w = weight.contiguous() if weight is not None else x2
    b = bias.contiguous() if bias is not None else x2
    _kg_tr_launch(_kg_layernorm_kernel, x, x2.shape[0], out, x2, w, b, x2.stride(0), out.stride(0), n,
                  float(eps), HAS_W=weight is not None, HAS_B=bias is not None,
                  BLOCK=triton.next_power_of_2(n), num_warps=num_warps)
    return out.view(x.shape)


# ---------------------------------------------------------------- rewrites (torch.fx)

def _kg_tr_bind(node, names):
    """The node's arguments by name (positional then keyword)."""
    bound = dict(zip(names, node.args))
    bound.update(node.kwargs)
    return bound


def _kg_tr_last_dim(inp, dim):
    """dim is -1, or the last dim of inp by shape propagation metadata when there is some."""
    if dim == -1:
        return True
    meta = getattr(inp, "meta", {}).get("tensor_meta")
    return isinstance(dim, int) and dim >= 0 and meta is not None and len(meta.shape) == dim + 1


def _kg_tr_softmax_input(node, mods):
    """The input of a softmax over the last dim with no dtype argument, else None."""
    if node.op == "call_module" and isinstance(mods.get(node.target), torch.nn.Softmax):
        a = _kg_tr_bind(node, ("input",))
        a["dim"] = mods[node.target].dim
    elif node.op == "call_function" and node.target is F.softmax:
        a = _kg_tr_bind(node, ("input", "dim", "_stacklevel", "dtype"))
    elif node.op == "call_function" and node.target is torch.softmax:
        a = _kg_tr_bind(node, ("input", "dim", "dtype"))
    elif node.op == "call_method" and node.target == "softmax":
        a = _kg_tr_bind(node, ("input", "dim", "dtype"))
    else:
        return None
    inp = a.get("input")
    if inp is None or a.get("dtype") is not None or not _kg_tr_last_dim(inp, a.get("dim")):
        return None
    return inp


def _kg_tr_replace(gm, node, fn, args):
    with gm.graph.inserting_before(node):
        new = gm.graph.call_function(fn, args)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)


def kg_rewrite_triton_softmax(gm, num_warps=4):
    """Softmax over the last dim (torch/F/method/nn.Softmax, no dtype) -> kg_triton_softmax."""
    if triton is None:
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        inp = _kg_tr_softmax_input(node, mods)
        if inp is not None:
            _kg_tr_replace(gm, node, kg_triton_softmax, (inp, -1, num_warps))
            n += 1
    if n:
        gm.graph.lint()
        gm.recompile()
    return n


def kg_rewrite_triton_layernorm(gm, num_warps=4):
    """nn.LayerNorm with a 1-D normalized_shape and F.layer_norm over one dim -> kg_triton_layernorm."""
    if triton is None:
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        m = mods.get(node.target) if node.op == "call_module" else None
        if isinstance(m, torch.nn.LayerNorm) and len(m.normalized_shape) == 1 and node.args:
            with gm.graph.inserting_before(node):      # parameters read at every call, never copied
                w = gm.graph.get_attr(node.target + ".weight") if m.weight is not None else None
                b = gm.graph.get_attr(node.target + ".bias") if getattr(m, "bias", None) is not None else None
            args = (node.args[0], tuple(m.normalized_shape), w, b, m.eps, num_warps)
        elif node.op == "call_function" and node.target in (F.layer_norm, torch.layer_norm):
            a = _kg_tr_bind(node, ("input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable"))
            ns = a.get("normalized_shape")
            if "input" not in a or not (isinstance(ns, (tuple, list)) and len(ns) == 1):
                continue
            args = (a["input"], ns, a.get("weight"), a.get("bias"), a.get("eps", 1e-5), num_warps)
        else:
            continue
        _kg_tr_replace(gm, node, kg_triton_layernorm, args)
        n += 1
    if n:
        gm.graph.lint()
        gm.recompile()
    return n


# ---------------------------------------------------------------- attention in one kernel (online softmax)

if triton is not None:
    @triton.jit
    def _kg_attn_kernel(Q, K, V, O, scale, H, SQ, SK,
                        sqz, sqh, sqm, sqd, skz, skh, skn, skd, svz, svh, svn, svd, soz, soh, som, sod,
                        DIVIDE: tl.constexpr, PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        D: tl.constexpr):
        pid_m = tl.program_id(0)
        zh = tl.program_id(1)
        z = (zh // H).to(tl.int64)
        h = (zh % H).to(tl.int64)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D)
        q = tl.load(Q + z * sqz + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                    mask=offs_m[:, None] < SQ, other=0.0)
        k_base = K + z * skz + h * skh
        v_base = V + z * svz + h * svh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        for start in range(0, SK, BLOCK_N):
            cols = start + offs_n
            kt = tl.load(k_base + cols[None, :] * skn + offs_d[:, None] * skd, mask=cols[None, :] < SK, other=0.0)
            s = tl.dot(q, kt, input_precision=PREC)
            if DIVIDE:
                s = s / scale
            else:
                s = s * scale
            s = tl.where(cols[None, :] < SK, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + cols[:, None] * svn + offs_d[None, :] * svd, mask=cols[:, None] < SK, other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PREC)
            m_i = m_new
        out = acc / l_i[:, None]
        tl.store(O + z * soz + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
                 out.to(O.dtype.element_ty), mask=offs_m[:, None] < SQ)


def _kg_attn_4d(t):
    """A [..., S, D] tensor as [Z, H, S, D] by views (at most 4 dims), else None."""
    if t.dim() == 4:
        return t
    if t.dim() == 3:
        return t.unsqueeze(0)
    if t.dim() == 2:
        return t.unsqueeze(0).unsqueeze(0)
    return None


def kg_triton_attention(q, k, v, scale, divide=False, block_m=64, block_n=64, num_warps=4, num_stages=2):
    """softmax((q @ k^T) * scale) @ v (or / scale) by one Triton kernel with an online softmax: the score
    matrix never leaves the chip. fp32 operands multiply as 3xTF32 (fp32-level error on tensor cores),
    16-bit ones on tensor cores with fp32 accumulation; softmax and accumulation in fp32. Anything else (a
    scale not known as a number, broadcast batch dims, head dims other than 16-128, autograd, CPU
    tensors without the interpreter) takes kg_sdpa's path."""
    ok = (triton is not None and all(torch.is_tensor(t) for t in (q, k, v))
          and isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale != 0
          and q.dtype == k.dtype == v.dtype and q.dtype in _KG_TR_DTYPES
          and q.device == k.device == v.device and (q.is_cuda or (_KG_TR_INTERPRETED and q.device.type == "cpu"))
          and 2 <= q.dim() <= 4 and q.dim() == k.dim() == v.dim()
          and q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and k.shape[-2] == v.shape[-2]
          and q.shape[-1] == k.shape[-1] == v.shape[-1] and q.shape[-1] in (16, 32, 64, 128)
          and q.shape[-2] > 0 and k.shape[-2] > 0
          and not (torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))))
    if not ok:
        return kg_sdpa(q, k, v, scale, divide)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    q4, k4, v4, o4 = (_kg_attn_4d(t) for t in (q, k, v, out))
    zs, hs, sq, d = q4.shape
    grid = (triton.cdiv(sq, block_m), zs * hs)
    prec = "tf32x3" if q.dtype == torch.float32 else "tf32"
    _kg_tr_launch(_kg_attn_kernel, q, grid, q4, k4, v4, o4, float(scale), hs, sq, k4.shape[2], *q4.stride(),
                  *k4.stride(), *v4.stride(), *o4.stride(), DIVIDE=bool(divide), PREC=prec, BLOCK_M=block_m,
                  BLOCK_N=block_n, D=d, num_warps=num_warps, num_stages=num_stages)
    return out


def kg_rewrite_triton_attention(gm, block_m=64, block_n=64, num_warps=4, num_stages=2):
    """The attention pattern kg_rewrite_sdpa matches -> kg_triton_attention (one kernel)."""
    if triton is None:
        return 0
    return _kg_rewrite_attention(gm, kg_triton_attention, (block_m, block_n, num_warps, num_stages))


TRITON_REWRITES = {
    "triton-softmax": kg_rewrite_triton_softmax,
    "triton-layernorm": kg_rewrite_triton_layernorm,
    "triton-attention": kg_rewrite_triton_attention,
}

VARIANTS = {
    "triton-softmax": [{"num_warps": w} for w in (4, 8, 16)],
    "triton-layernorm": [{"num_warps": w} for w in (4, 8)],
    "triton-attention": [{"block_m": bm, "block_n": bn, "num_warps": w, "num_stages": st}
                         for bm, bn, w, st in ((64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 3))],
}
