"""Algebraic rewrites above the kernel: identities that remove work rather than do it faster.

The kept triangle of a matrix product (tril/triu of a matmul) needs only the products inside it: computed by row
blocks over the columns kept, about half the GEMM's work.

A linear map whose output features are summed or averaged, through feature-wise scales and shifts, is one
matrix-vector product: sum_j (a_j * (x @ W^T)_j + c_j) = x @ (a @ W) + sum(c). The GEMM's work (batch x in x
out) becomes a pass over W and one over x. Every decision that depends on shapes and dtypes is taken at the
call, on the tensors it gets; where any of them does not hold, or autograd records, the reference's own ops
run. Nothing is cached: the vector is formed from the weights at every call, so it is never stale.

A convolution whose output is summed or averaged over spatial dims, through channel-wise scales and shifts, is a
smaller convolution: the sum over the outputs along a dim is, for each kernel offset, that offset's weights times
the sum of the input positions they read, so each reduced dim of the input becomes one sum per kernel offset,
moved into the channels (a global average pool after a convolution is a grouped matrix product). The work along
a dim of o outputs shrinks o-fold; the input is read once per kernel offset. Plain and transposed, 1-3 spatial
dims, any stride, padding, dilation, output padding and groups; the same call-time checks and fallback.

Candidates embed this file's functions verbatim after fx_rewrites' (library.py), as they do triton_kernels'.
"""

import math
import operator

import torch
import torch.fx
import torch.nn.functional as F

try:                 # in the package; a candidate file holds fx_rewrites' functions above this code
    from .fx_rewrites import _kg_recording, _kg_users, kg_finish
except ImportError:
    pass

_KG_ALG_FUNCTIONS = {operator.mul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div",
                     torch.true_divide: "div", operator.add: "add", torch.add: "add", operator.sub: "sub",
                     torch.sub: "sub"}
_KG_ALG_METHODS = {"mul": "mul", "div": "div", "true_divide": "div", "add": "add", "sub": "sub"}
_KG_ALG_MATMULS = (torch.matmul, torch.mm, operator.matmul)


def _kg_alg_steps(y, steps):
    """The reference's mul/div/add/sub steps on y, each (op, operand, side) with side 1 where the operand comes first."""
    for op, a, side in steps:
        if op == "mul":
            y = y * a if side == 0 else a * y
        elif op == "div":
            y = y / a
        elif op == "add":
            y = y + a if side == 0 else a + y
        else:
            y = y - a if side == 0 else a - y
    return y


def _kg_alg_chain(x, w, b, kind, steps, dim, keepdim, mean):
    """The reference's own ops: the GEMM, the feature-wise steps, the reduction."""
    y = _kg_alg_steps(F.linear(x, w, b) if kind == "linear" else torch.matmul(x, w), steps)
    return y.mean(dim, keepdim=keepdim) if mean else y.sum(dim, keepdim=keepdim)


def _kg_alg_number(op, a):
    """Whether a step's operand that is no tensor is a finite number (and a non-zero divisor)."""
    return not isinstance(a, bool) and isinstance(a, (int, float)) and math.isfinite(a) and not (op == "div" and a == 0)


def _kg_alg_ok(x, w, b, kind, steps, dim):
    """Whether the identity holds exactly as torch broadcasts here: 2-D weights of x's dtype and device, the
    reduction over the last (feature) dim, each operand a finite number (a non-zero divisor) or a tensor of x's
    dtype that varies along the features alone (one value, or the features' count along its last dim)."""
    if not (torch.is_tensor(x) and torch.is_tensor(w)) or not x.is_floating_point() or x.dim() < 1 \
            or w.dim() != 2 or w.dtype != x.dtype or w.device != x.device or x.numel() == 0:
        return False
    k, n = (w.shape[1], w.shape[0]) if kind == "linear" else (w.shape[0], w.shape[1])
    if x.shape[-1] != k or n == 0:
        return False
    if b is not None and (not torch.is_tensor(b) or b.dtype != x.dtype or b.device != x.device
                          or b.dim() != 1 or b.shape[0] != n):
        return False
    if isinstance(dim, (tuple, list)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    if isinstance(dim, bool) or not isinstance(dim, int) or not (-x.dim() <= dim < x.dim()) \
            or dim % x.dim() != x.dim() - 1:
        return False
    for op, a, side in steps:
        if torch.is_tensor(a):
            if a.dtype != x.dtype or a.device != x.device or a.dim() > x.dim() \
                    or not (a.numel() == 1 or (a.shape[-1] == n and a.numel() == n)):
                return False
            if op == "div" and not bool((a != 0).all()):
                return False
        elif not _kg_alg_number(op, a):
            return False
    return True


def kg_reduced_linear(x, w, b, kind, steps, dim, keepdim, mean):
    """reduce(steps(gemm(x, w, b)), dim) over the output features as x @ v + c: gemm is F.linear ("linear",
    w [out, in]) or torch.matmul ("matmul", w [in, out]); steps are (op, operand, side) with op mul, div, add
    or sub and side 1 where the operand comes first; reduce is a sum, or a mean with `mean`. v = a @ W and
    c = sum(c_j), where each output feature is a_j * (x @ W^T)_j + c_j after the steps, are formed in the
    input's dtype at every call. The reference's ops where autograd records or the identity does not hold
    (kg_alg_ok)."""
    tensors = [a for _, a, _ in steps if torch.is_tensor(a)]
    if _kg_recording(x, w, b, *tensors) or not _kg_alg_ok(x, w, b, kind, steps, dim):
        return _kg_alg_chain(x, w, b, kind, steps, dim, keepdim, mean)
    n = w.shape[0] if kind == "linear" else w.shape[1]
    scale, shift = 1.0, (b if b is not None else 0.0)
    for op, a, side in steps:
        a = a.reshape(-1) if torch.is_tensor(a) else float(a)
        if op == "mul":
            scale, shift = scale * a, shift * a
        elif op == "div":
            scale, shift = scale / a, shift / a
        elif op == "add":
            shift = shift + a
        elif side == 0:
            shift = shift - a
        else:
            scale, shift = -scale, a - shift
    if torch.is_tensor(scale) and scale.numel() == n:
        v = scale @ w if kind == "linear" else w @ scale
    else:
        v = (w.sum(0) if kind == "linear" else w.sum(1)) * scale
    if torch.is_tensor(shift):
        c = shift.sum() if shift.numel() == n else shift.reshape(()) * n
    else:
        c = shift * n
    if mean:
        v, c = v / n, c / n
    out = torch.matmul(x, v.reshape(-1)) + c
    return out.unsqueeze(-1) if keepdim else out


def _kg_alg_gemm(node, mods):
    """(kind, x, w, b) of a GEMM node, w and b Nodes (or None): an nn.Linear call (its parameters read with
    get_attr), F.linear, or a matmul whose second operand is anything (a transposed weight W.T, W.t(),
    W.transpose(0, 1) is W read as "linear")."""
    if node.op == "call_module" and type(mods.get(node.target)) is torch.nn.Linear:
        if len(node.args) != 1 or node.kwargs:
            return None
        return "linear", node.args[0], node.target + ".weight", \
            (node.target + ".bias" if mods[node.target].bias is not None else None)
    if node.op == "call_function" and node.target is F.linear:
        if node.kwargs or not 2 <= len(node.args) <= 3:
            return None
        return "linear", node.args[0], node.args[1], node.args[2] if len(node.args) == 3 else None
    if (node.op == "call_function" and node.target in _KG_ALG_MATMULS) or \
            (node.op == "call_method" and node.target in ("matmul", "mm")):
        if len(node.args) != 2 or node.kwargs:
            return None
        x, w = node.args
        if isinstance(w, torch.fx.Node) and len(_kg_users(w)) == 1 and (
                (w.op == "call_function" and w.target is getattr and w.args[1:] in (("T",), ("mT",)))
                or (w.op == "call_method" and w.target == "t" and len(w.args) == 1)
                or (w.op == "call_method" and w.target == "transpose" and len(w.args) == 3
                    and set(w.args[1:]) in ({0, 1}, {-1, -2}))):
            return "linear", x, w.args[0], None
        return "matmul", x, w, None
    return None


def _kg_alg_step(node):
    """mul, div, add or sub for those ops (operator's, torch's or the tensor methods), else None."""
    if node.op == "call_function":
        return _KG_ALG_FUNCTIONS.get(node.target)
    return _KG_ALG_METHODS.get(node.target) if node.op == "call_method" else None


def _kg_alg_reduction(node):
    """(input, dim, keepdim, mean) of torch.sum/torch.mean/x.sum/x.mean over one given dim, else None."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op == "call_function" and node.target not in (torch.sum, torch.mean):
        return None
    if node.op not in ("call_method", "call_function") or name not in ("sum", "mean"):
        return None
    names = ("input", "dim", "keepdim")
    if len(node.args) > 3 or set(node.kwargs) - set(names[1:]):
        return None
    bound = dict(zip(names, node.args))
    bound.update(node.kwargs)
    dim, keepdim = bound.get("dim"), bound.get("keepdim", False)
    if dim is None or isinstance(keepdim, torch.fx.Node) or isinstance(dim, torch.fx.Node):
        return None
    return bound.get("input"), dim, bool(keepdim), name == "mean"


def _kg_alg_walk(y, mods, depth=0, terminal=None):
    """(start node, steps from it on, the step nodes) when y is a GEMM (or what `terminal` recognises), or a
    mul/div/add/sub of a value that walks back to one and a number or a Node, each value on the way used once;
    else None."""
    if depth > 16 or len(_kg_users(y)) != 1:
        return None
    if (terminal or _kg_alg_gemm)(y, mods) is not None:
        return y, [], []
    op = _kg_alg_step(y)
    if op is None or len(y.args) != 2 or y.kwargs:
        return None
    for side in (0, 1):
        prev, a = y.args[side], y.args[1 - side]
        if not isinstance(prev, torch.fx.Node) or (op == "div" and side == 1) or a is prev:
            continue
        found = _kg_alg_walk(prev, mods, depth + 1, terminal)
        if found is not None:
            gemm, steps, chain = found
            return gemm, steps + [(op, a, side)], chain + [y]
    return None


def _kg_alg_reduce_rewrite(gm, terminal, call):
    """Every sum or mean whose input walks back (through mul/div/add/sub by operands from before the start, each
    value used once on the way) to a node `terminal` recognises, replaced by `call(graph, start, steps,
    reduction)`'s node (None: left as it is); the steps and the start are erased."""
    mods = dict(gm.named_modules())
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    n = 0
    for node in list(gm.graph.nodes):
        red = _kg_alg_reduction(node)
        if red is None or not isinstance(red[0], torch.fx.Node):
            continue
        found = _kg_alg_walk(red[0], mods, terminal=terminal)
        if found is None:
            continue
        y, steps, chain = found
        # an operand must not depend on the start: a parameter, an input, or a value computed before it
        if any(isinstance(a, torch.fx.Node) and a.op not in ("get_attr", "placeholder") and order[a] > order[y]
               for _, a, _ in steps):
            continue
        with gm.graph.inserting_before(node):
            new = call(gm.graph, y, mods, tuple(steps), red)
        if new is None:
            continue
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        for dead in list(reversed(chain)) + [y]:
            gm.graph.erase_node(dead)
        gm.graph.eliminate_dead_code()
        n += 1
    return kg_finish(gm, n)


def _kg_alg_linear_call(graph, y, mods, steps, red):
    kind, x, w, b = _kg_alg_gemm(y, mods)
    w = graph.get_attr(w) if isinstance(w, str) else w
    b = graph.get_attr(b) if isinstance(b, str) else b
    return graph.call_function(kg_reduced_linear, (x, w, b, kind, steps, red[1], red[2], red[3]))


def kg_rewrite_reduce_linear(gm):
    """A GEMM whose output features are summed or averaged (one dim), through mul/div/add/sub by operands
    from before the GEMM, each value used once on the way: kg_reduced_linear."""
    return _kg_alg_reduce_rewrite(gm, _kg_alg_gemm, _kg_alg_linear_call)


# ---------------------------------------------------------------- a convolution summed over its positions

_KG_CONV_MODULES = {torch.nn.Conv1d: ("conv", 1), torch.nn.Conv2d: ("conv", 2), torch.nn.Conv3d: ("conv", 3),
                    torch.nn.ConvTranspose1d: ("convT", 1), torch.nn.ConvTranspose2d: ("convT", 2),
                    torch.nn.ConvTranspose3d: ("convT", 3)}
_KG_CONV_FNS = {("conv", 1): F.conv1d, ("conv", 2): F.conv2d, ("conv", 3): F.conv3d,
                ("convT", 1): F.conv_transpose1d, ("convT", 2): F.conv_transpose2d, ("convT", 3): F.conv_transpose3d}


def _kg_conv_call(x, w, b, kind, stride, padding, dilation, out_pad, groups):
    """The convolution itself (N spatial dims: w's dims less two; none: a grouped matrix product)."""
    n = w.dim() - 2
    if n == 0:                       # w [out, in/g] ("conv") or [in, out/g] ("convT")
        xg, wg = x.reshape(x.shape[0], groups, -1), w.reshape(groups, w.shape[0] // groups, -1)
        y = torch.einsum("bgi,goi->bgo" if kind == "conv" else "bgi,gio->bgo", xg, wg).reshape(x.shape[0], -1)
        return y + b if b is not None else y
    if kind == "conv":
        return _KG_CONV_FNS[kind, n](x, w, b, stride, padding, dilation, groups)
    return _KG_CONV_FNS[kind, n](x, w, b, stride, padding, out_pad, groups, dilation)


def _kg_conv_gemm(x, w, kind, stride, padding, dilation, out_pad, groups):
    """The convolution of float64 x (1-2 spatial dims) as one batched matrix product: plain through unfold
    (im2col), transposed through fold (col2im: the products of each input position with every kernel offset, summed
    where they land). cuBLAS's float64 GEMMs use the tensor cores; cuDNN's float64 convolutions do not (through
    cuDNN's float64 transposed convolution the rewrite took twice the float32 reference's time on an H100; the GEMM
    form is not measured on a GPU yet). None where fold cannot
    express it (an output padding of a stride or more)."""
    n = w.dim() - 2
    if n == 1:                           # a 1-D convolution as a 2-D one over a dim of one
        x, w = x.unsqueeze(-2), w.unsqueeze(-2)
        stride, padding, dilation, out_pad = (1, *stride), (0, *padding), (1, *dilation), (0, *out_pad)
    ks, nb, g = tuple(w.shape[2:]), x.shape[0], groups
    if kind == "conv":                   # w [out, in/g, kh, kw]; cols [B, in * kh * kw, L]
        cols = F.unfold(x, ks, dilation=dilation, padding=padding, stride=stride)
        o = [_kg_conv_out(x.shape[2 + j], ks[j], stride[j], padding[j], dilation[j], 0, kind) for j in range(2)]
        if g == 1:
            y = torch.matmul(w.reshape(w.shape[0], -1), cols)
        else:
            y = torch.einsum("gok,bgkl->bgol", w.reshape(g, w.shape[0] // g, -1),
                             cols.reshape(nb, g, -1, cols.shape[-1]))
        y = y.reshape(nb, w.shape[0], *o)
    else:                                # w [in, out/g, kh, kw]; cols [B, out * kh * kw, H * W]
        if any(out_pad[j] >= stride[j] for j in range(2)):
            return None
        o = [_kg_conv_out(x.shape[2 + j], ks[j], stride[j], padding[j], dilation[j], out_pad[j], kind)
             for j in range(2)]
        if g == 1:
            cols = torch.matmul(w.reshape(w.shape[0], -1).t(), x.reshape(nb, x.shape[1], -1))
        else:
            cols = torch.einsum("gcok,bgcl->bgokl", w.reshape(g, x.shape[1] // g, w.shape[1], -1),
                                x.reshape(nb, g, x.shape[1] // g, -1)).reshape(nb, -1, x.shape[2] * x.shape[3])
        y = F.fold(cols, o, ks, dilation=dilation, padding=padding, stride=stride)
    return y.squeeze(-2) if n == 1 else y


def _kg_conv_chain(x, w, b, kind, stride, padding, dilation, out_pad, groups, steps, dims, keepdim, mean):
    """The reference's own ops: the convolution, the channel-wise steps, the reduction."""
    y = _kg_alg_steps(_kg_conv_call(x, w, b, kind, stride, padding, dilation, out_pad, groups), steps)
    return y.mean(dims, keepdim=keepdim) if mean else y.sum(dims, keepdim=keepdim)


def _kg_conv_out(i, k, s, p, d, op, kind):
    """An output size along one spatial dim."""
    if kind == "conv":
        return (i + 2 * p - d * (k - 1) - 1) // s + 1
    return (i - 1) * s - 2 * p + d * (k - 1) + op + 1


def _kg_conv_dims(dims, n):
    """The reduced dims as sorted spatial indices (0..n-1), or None: one or more distinct spatial dims of the
    output (dim 2 on), given as an int or a tuple/list of ints."""
    ds = list(dims) if isinstance(dims, (tuple, list)) else [dims]
    if not ds or any(isinstance(d, bool) or not isinstance(d, int) for d in ds):
        return None
    nd = n + 2
    ds = [d % nd if -nd <= d < nd else -1 for d in ds]
    if any(d < 2 for d in ds) or len(set(ds)) != len(ds):
        return None
    return sorted(d - 2 for d in ds)


def _kg_conv_ok(x, w, b, kind, stride, padding, dilation, out_pad, groups, steps, dims):
    """The output's shape where the identity holds exactly as torch computes here, else None: a batched
    floating x, weights of x's dtype and device, a 1-D bias of the output channels, integer geometry (zero
    padding), the reduction over spatial dims only, and every operand a finite number (a non-zero divisor) or
    a tensor of x's dtype that is constant along the reduced dims and broadcasts to the output's shape."""
    if not (torch.is_tensor(x) and torch.is_tensor(w)) or not x.is_floating_point() or w.dtype != x.dtype \
            or w.device != x.device or x.numel() == 0:
        return None
    n = w.dim() - 2
    if n < 1 or x.dim() != n + 2 or not all(isinstance(v, tuple) and len(v) == n and
                                           all(isinstance(e, int) and not isinstance(e, bool) for e in v)
                                           for v in (stride, padding, dilation, out_pad)):
        return None
    if not isinstance(groups, int) or groups < 1 or x.shape[1] % groups or \
            min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(out_pad) < 0:
        return None
    c_out = w.shape[0] if kind == "conv" else w.shape[1] * groups
    if (kind == "conv" and (w.shape[1] * groups != x.shape[1] or w.shape[0] % groups)) or \
            (kind == "convT" and w.shape[0] != x.shape[1]):
        return None
    if b is not None and (not torch.is_tensor(b) or b.dtype != x.dtype or b.device != x.device
                          or b.dim() != 1 or b.shape[0] != c_out):
        return None
    sizes = [_kg_conv_out(x.shape[2 + j], w.shape[2 + j], stride[j], padding[j], dilation[j], out_pad[j], kind)
             for j in range(n)]
    if min(sizes) < 1:
        return None
    red = _kg_conv_dims(dims, n)
    if red is None:
        return None
    shape = (x.shape[0], c_out, *sizes)
    for op, a, side in steps:
        if torch.is_tensor(a):
            if a.dtype != x.dtype or a.device != x.device or a.dim() > len(shape):
                return None
            try:
                if tuple(torch.broadcast_shapes(shape, a.shape)) != shape:
                    return None
            except RuntimeError:
                return None
            lead = len(shape) - a.dim()
            if any(j + 2 - lead >= 0 and a.shape[j + 2 - lead] != 1 for j in red):
                return None
            if op == "div" and not bool((a != 0).all()):
                return None
        elif not _kg_alg_number(op, a):
            return None
    return shape


def _kg_conv_fold(x, j, k, s, p, d, o, kind):
    """x's spatial dim j (tensor dim 2 + j) turned into k sums, one per kernel offset: the input positions whose
    products with that offset's weights land on one of the o output positions along it, each summed (in x's
    dtype: torch's sums are pairwise, about as accurate as the reference's own mean)."""
    dim, i = 2 + j, x.shape[2 + j]
    parts = []
    for t in range(k):
        if kind == "conv":              # output q reads input q*s + t*d - p
            start = t * d - p
            lo, hi = max(0, -(start // s)), min(o - 1, (i - 1 - start) // s)
            first, step = start + lo * s, s
        else:                            # input q lands on output q*s - p + t*d
            lo, hi = max(0, -((t * d - p) // s)), min(i - 1, (o - 1 + p - t * d) // s)
            first, step = lo, 1
        if lo > hi:                      # this offset's weights meet no input inside the reduced outputs
            parts.append(torch.zeros_like(x.narrow(dim, 0, 1)))
            continue
        idx = [slice(None)] * x.dim()
        idx[dim] = slice(first, first + (hi - lo) * step + 1, step)
        parts.append(x[tuple(idx)].sum(dim, keepdim=True))
    return torch.cat(parts, dim)


def kg_reduced_conv(x, w, b, kind, stride, padding, dilation, out_pad, groups, steps, dims, keepdim, mean):
    """reduce(steps(conv(x, w, b)), dims) over spatial dims of a convolution ("conv") or a transposed one
    ("convT"), through channel-wise mul/div/add/sub steps ((op, operand, side), side 1 where the operand comes
    first) constant along the reduced dims; reduce is a sum, or a mean with `mean`. By linearity, the sum over
    the output positions along a dim is a sum over kernel offsets of that offset's weights times the sum of the
    input positions it reads for them: each reduced dim of x becomes its kernel offsets' sums, which move into
    the input channels (each group's channels stay together), the weights' reduced kernel dims likewise, and
    what is left is a convolution over the other spatial dims (a grouped matrix product where none is left):
    the work of a dim of o outputs shrinks o-fold. The bias counts once per reduced position, and so does each
    step's added operand. The reference's ops where autograd records or the identity does not hold.

    The convolution left is in float64, rounded to x's dtype at the end: a sum of o outputs in one float32
    convolution output errs about sqrt(o) times the reference's mean of o rounded outputs (on an H100 a
    ConvTranspose3d averaged over 32 depths erred 1.5x the gate's bound); that convolution is o times smaller.
    The sums themselves stay in x's dtype (in float64 they took 8x as long on the CPU)."""
    tensors = [a for _, a, _ in steps if torch.is_tensor(a)]
    shape = None if _kg_recording(x, w, b, *tensors) else \
        _kg_conv_ok(x, w, b, kind, stride, padding, dilation, out_pad, groups, steps, dims)
    if shape is None:
        return _kg_conv_chain(x, w, b, kind, stride, padding, dilation, out_pad, groups, steps, dims, keepdim, mean)
    n = w.dim() - 2
    red = _kg_conv_dims(dims, n)
    keep = [j for j in range(n) if j not in red]
    dtype, w = x.dtype, w.double()
    b = b.double() if b is not None else None
    steps = [(op, a.double() if torch.is_tensor(a) else a, side) for op, a, side in steps]
    count = 1
    for j in red:
        count *= shape[2 + j]
        x = _kg_conv_fold(x, j, w.shape[2 + j], stride[j], padding[j], dilation[j], shape[2 + j], kind)
    x = x.double()
    # x: [B, C_in, (k_j for reduced j, the kept sizes) in spatial order] -> the reduced offsets beside C_in
    nb, c_in = x.shape[0], x.shape[1]
    x = x.permute(0, 1, *[2 + j for j in red], *[2 + j for j in keep])
    x = x.reshape(nb, -1, *[x.shape[2 + len(red) + m] for m in range(len(keep))])
    if kind == "conv":                  # w [out, in/g, k...] -> [out, in/g * prod(k_red), k_keep...]
        w2 = w.permute(0, 1, *[2 + j for j in red], *[2 + j for j in keep])
        w2 = w2.reshape(w.shape[0], -1, *[w.shape[2 + j] for j in keep])
    else:                                # w [in, out/g, k...] -> [in * prod(k_red), out/g, k_keep...]
        w2 = w.permute(0, *[2 + j for j in red], 1, *[2 + j for j in keep])
        w2 = w2.reshape(-1, w.shape[1], *[w.shape[2 + j] for j in keep])
    pick = (lambda v: tuple(v[j] for j in keep))
    geo = (pick(stride), pick(padding), pick(dilation), pick(out_pad), groups)
    # on a GPU as a GEMM (cuDNN's float64 convolutions are slow); on the CPU the float64 convolution itself (MKL's
    # im2col path, 0.38 ms against the GEMM form's 1.7 ms for a 24 -> 16 channel 3x3 over 32x32 on one core)
    y = _kg_conv_gemm(x, w2, kind, *geo) if keep and x.is_cuda else None
    if y is None:
        y = _kg_conv_call(x, w2, None, kind, *geo)
    y = y.reshape(nb, y.shape[1], *[1 if j in red else y.shape[2 + keep.index(j)] for j in range(n)])
    if b is not None:
        y = y + (b * count).reshape(-1, *([1] * n))
    for op, a, side in steps:
        if op == "mul":
            y = y * a if side == 0 else a * y
        elif op == "div":
            y = y / a
        elif op == "add":
            y = y + a * count if side == 0 else a * count + y
        else:
            y = y - a * count if side == 0 else a * count - y
    if mean:
        y = y / count
    y = y.to(dtype)
    return y if keepdim else y.squeeze([2 + j for j in red])


def _kg_conv_module(node, mods):
    """(kind, x, weight, bias, stride, padding, dilation, output padding, groups) of a call of an nn.ConvNd or
    nn.ConvTransposeNd module with zero padding given as numbers or "valid" (the parameters as get_attr targets;
    bias None where it has none), else None."""
    if node.op != "call_module":
        return None
    m = mods.get(node.target)
    spec = _KG_CONV_MODULES.get(type(m))
    if spec is None or len(node.args) != 1 or node.kwargs or m.padding_mode != "zeros":
        return None
    kind, n = spec
    pad = m.padding
    if isinstance(pad, str):
        if pad != "valid":
            return None
        pad = (0,) * n
    geo = [tuple(int(v) for v in g) for g in (m.stride, pad, m.dilation,
                                              m.output_padding if kind == "convT" else (0,) * n)]
    if any(len(g) != n for g in geo):
        return None
    return (kind, node.args[0], node.target + ".weight", node.target + ".bias" if m.bias is not None else None,
            *geo, int(m.groups))


def _kg_conv_reduce_call(graph, y, mods, steps, red):
    kind, x, w, b, stride, padding, dilation, out_pad, groups = _kg_conv_module(y, mods)
    dims = tuple(red[1]) if isinstance(red[1], (list, tuple)) else red[1]
    if _kg_conv_dims(dims, mods[y.target].weight.dim() - 2) is None:
        return None
    w = graph.get_attr(w)
    b = graph.get_attr(b) if b is not None else None
    return graph.call_function(kg_reduced_conv, (x, w, b, kind, stride, padding, dilation, out_pad, groups, steps,
                                                 dims, red[2], red[3]))


def kg_rewrite_reduce_conv(gm):
    """A convolution module's output summed or averaged over spatial dims, through mul/div/add/sub by operands
    from before the convolution, each value used once on the way: kg_reduced_conv."""
    return _kg_alg_reduce_rewrite(gm, _kg_conv_module, _kg_conv_reduce_call)


# ---------------------------------------------------------------- the kept triangle of a matrix product

_KG_ALG_TRI_ROWS = 16          # row blocks: the products computed cover about (blocks + 1) / (2 blocks) of the GEMM


def _kg_alg_tri_chain(a, b, lower, diagonal):
    y = torch.matmul(a, b)
    return torch.tril(y, diagonal) if lower else torch.triu(y, diagonal)


def kg_tri_matmul(a, b, lower, diagonal=0):
    """tril(a @ b, diagonal) (or triu with lower False) computing only the products the kept triangle needs: the
    output in row blocks, each block's product over the columns the triangle keeps there (the library's own
    GEMM, so each element is the same dot product), then the triangle taken. The reference's ops for anything
    but 2-D floating matrices of one dtype and device, and where autograd records."""
    if _kg_recording(a, b) or not (torch.is_tensor(a) and torch.is_tensor(b)) or a.dim() != 2 or b.dim() != 2 \
            or not a.is_floating_point() or a.dtype != b.dtype or a.device != b.device or a.shape[1] != b.shape[0] \
            or isinstance(diagonal, bool) or not isinstance(diagonal, int) or a.shape[0] < 2 * _KG_ALG_TRI_ROWS:
        return _kg_alg_tri_chain(a, b, lower, diagonal)
    m, n = a.shape[0], b.shape[1]
    out = torch.zeros(m, n, dtype=a.dtype, device=a.device)
    step = -(-m // _KG_ALG_TRI_ROWS)
    for r0 in range(0, m, step):
        r1 = min(m, r0 + step)
        c0, c1 = (0, min(n, r1 + diagonal)) if lower else (max(0, r0 + diagonal), n)
        if c1 > c0:
            torch.mm(a[r0:r1], b[:, c0:c1], out=out[r0:r1, c0:c1])
    return out.tril_(diagonal) if lower else out.triu_(diagonal)


def _kg_alg_tri(node):
    """(input, lower, diagonal) of torch.tril/torch.triu/x.tril()/x.triu() with a literal diagonal, else None."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op == "call_function" and node.target not in (torch.tril, torch.triu):
        return None
    if node.op not in ("call_method", "call_function") or name not in ("tril", "triu") or len(node.args) > 2 \
            or set(node.kwargs) - {"diagonal"}:
        return None
    diagonal = node.kwargs.get("diagonal", node.args[1] if len(node.args) > 1 else 0)
    if isinstance(diagonal, bool) or not isinstance(diagonal, int) or not node.args:
        return None
    return node.args[0], name == "tril", diagonal


def kg_rewrite_triangular_matmul(gm):
    """tril/triu of a matmul of two values (the product used there only): kg_tri_matmul."""
    n = 0
    for node in list(gm.graph.nodes):
        tri = _kg_alg_tri(node)
        if tri is None or not isinstance(tri[0], torch.fx.Node):
            continue
        y = tri[0]
        if len(_kg_users(y)) != 1 or y.kwargs or len(y.args) != 2 or not (
                (y.op == "call_function" and y.target in _KG_ALG_MATMULS)
                or (y.op == "call_method" and y.target in ("matmul", "mm"))):
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(kg_tri_matmul, (y.args[0], y.args[1], tri[1], tri[2]))
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        gm.graph.erase_node(y)
        n += 1
    return kg_finish(gm, n)


ALGEBRA_REWRITES = {
    "reduce-linear": kg_rewrite_reduce_linear,
    "reduce-conv": kg_rewrite_reduce_conv,
    "triangular-matmul": kg_rewrite_triangular_matmul,
}
