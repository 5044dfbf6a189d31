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


def _kg_tr_launch(kernel, x, rows, *args, **meta):
    if x.is_cuda and x.device.index is not None and x.device.index != torch.cuda.current_device():
        with torch.cuda.device(x.device):
            kernel[(rows,)](*args, **meta)
    else:
        kernel[(rows,)](*args, **meta)


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


TRITON_REWRITES = {
    "triton-softmax": kg_rewrite_triton_softmax,
    "triton-layernorm": kg_rewrite_triton_layernorm,
}

VARIANTS = {
    "triton-softmax": [{"num_warps": w} for w in (4, 8, 16)],
    "triton-layernorm": [{"num_warps": w} for w in (4, 8)],
}
