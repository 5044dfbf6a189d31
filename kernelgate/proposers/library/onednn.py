"""CPU rewrites through oneDNN (torch.ops.mkldnn): Conv2d / Linear with a folded eval batch norm and an activation
as one oneDNN call with the weight pre-packed for the input's shape, in channels-last. Like fx_rewrites.py,
candidates embed this file's functions verbatim (after fx_rewrites' own, whose helpers it uses), so it stays
self-contained; the weights it derives are fx_rewrites._kg_derived values, never stale.
"""
import torch
import torch.fx
import torch.nn.functional as F

try:                 # in the package; a candidate file holds fx_rewrites' functions above this code
    from .fx_rewrites import _kg_derived, _kg_recording, _kg_users, kg_finish
except ImportError:
    pass


def _kg_act_ref(y, attr, scalars, algorithm):
    """The activation a oneDNN post-op `attr` stands for, as the reference computes it."""
    if attr == "none":
        return y
    if attr == "gelu":
        return F.gelu(y, approximate=algorithm or "none")
    if attr == "leaky_relu":
        return F.leaky_relu(y, scalars[0])
    if attr == "hardtanh":
        return F.hardtanh(y, scalars[0], scalars[1])
    return {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "swish": F.silu,
            "hardswish": F.hardswish}[attr](y)


#: post-ops oneDNN computes exactly as torch does (piecewise linear)
_KG_EXACT_POST = ("none", "relu", "leaky_relu", "hardtanh")


def _kg_onednn():
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise")


def kg_onednn_layer(x, layer, attr, scalars, algorithm, bn=None):
    """act(bn(layer(x))) (bn optional: an eval-mode batch norm folded into the weights) as one oneDNN call,
    the weight folded and pre-packed for this input shape (derived, never stale: _kg_derived). On the CPU in
    fp32 with nothing for autograd to record and the batch norm in eval mode with running statistics; the
    reference's modules otherwise."""
    w = layer.weight
    conv = isinstance(layer, torch.nn.Conv2d)
    if (x.device.type != "cpu" or x.dtype != torch.float32 or w.dtype != torch.float32 or not _kg_onednn()
            or (conv and x.dim() != 4) or (not conv and x.dim() < 2) or _kg_recording(x, layer, bn)
            or (bn is not None and (bn.training or bn.running_mean is None or bn.running_var is None))):
        y = layer(x)
        return _kg_act_ref(bn(y) if bn is not None else y, attr, scalars, algorithm)
    rows = x.numel() // x.shape[-1] if not conv else 0
    sources = (w, layer.bias) + ((bn.weight, bn.bias, bn.running_mean, bn.running_var) if bn is not None else ())

    def pack():
        wt, b = w, layer.bias
        if bn is not None:
            inv = torch.rsqrt(bn.running_var.double() + bn.eps)
            g = bn.weight.double() * inv if bn.weight is not None else inv
            wt = (w.double() * g.reshape((-1,) + (1,) * (w.dim() - 1))).to(w.dtype)
            b0 = layer.bias.double() if layer.bias is not None else torch.zeros_like(g)
            b = ((b0 - bn.running_mean.double()) * g + (bn.bias.double() if bn.bias is not None else 0.0)).to(w.dtype)
        if conv:
            wt = torch.ops.mkldnn._reorder_convolution_weight(
                wt.contiguous(), list(layer.padding), list(layer.stride), list(layer.dilation), layer.groups,
                list(x.shape))
        return wt, b
    key = ("onednn", id(layer), id(bn), tuple(x.shape) if conv else rows)
    wt, b = _kg_derived(key, sources, pack)
    # only exact post-ops are fused; oneDNN's own GELU / sigmoid / tanh are approximations (a GELU one measured
    # 3.56e-5 against the 3.48e-5 the gate allowed on extreme values): those run in torch after the call
    post = attr if attr in _KG_EXACT_POST else "none"
    if conv:
        # oneDNN's fast path is channels-last (1.5x NCHW's for a 3x3 conv of 1 MiB on a 2-core AVX-512 CPU); the
        # output in the memory format the reference's conv gives for this input
        fmt = torch.channels_last if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous() \
            else torch.contiguous_format
        y = torch.ops.mkldnn._convolution_pointwise(x.contiguous(memory_format=torch.channels_last), wt, b,
                                                    list(layer.padding), list(layer.stride), list(layer.dilation),
                                                    layer.groups, post, scalars if post == attr else [], "")
    else:
        x2 = x.reshape(rows, x.shape[-1])
        y = torch.ops.mkldnn._linear_pointwise(x2 if x2.is_contiguous() else x2.contiguous(), wt, b, post,
                                               (scalars or [None]) if post == attr else [None], "none")
        y = y.reshape(*x.shape[:-1], y.shape[-1])
    if post != attr:
        y = _kg_act_ref(y, attr, scalars, algorithm)
    return y.contiguous(memory_format=fmt) if conv else y


def _kg_act_of(node, mods):
    """(oneDNN post-op, scalars, algorithm) of an activation node applied to its single argument, or None."""
    if node.op == "call_module":
        m = mods.get(node.target)
        for cls, attr in ((torch.nn.ReLU, "relu"), (torch.nn.Sigmoid, "sigmoid"), (torch.nn.Tanh, "tanh"),
                          (torch.nn.SiLU, "swish"), (torch.nn.Hardswish, "hardswish")):
            if type(m) is cls:
                return attr, [], ""
        if type(m) is torch.nn.GELU:
            return "gelu", [], m.approximate
        if type(m) is torch.nn.LeakyReLU:
            return "leaky_relu", [float(m.negative_slope)], ""
        return None
    if node.op not in ("call_function", "call_method") or len(node.args) != 1:
        return None
    name = getattr(node.target, "__name__", node.target) if node.op == "call_function" else node.target
    kw = {k: v for k, v in node.kwargs.items() if k != "inplace"}
    if name in ("relu", "relu_", "sigmoid", "tanh", "silu", "hardswish") and not kw:
        return {"silu": "swish", "relu_": "relu"}.get(name, name), [], ""
    if name == "gelu" and set(kw) <= {"approximate"} and kw.get("approximate", "none") in ("none", "tanh"):
        return "gelu", [], kw.get("approximate", "none")
    return None


def kg_channels_last(x):
    """A 4-D tensor in channels-last memory format (anything else as it is)."""
    return x.contiguous(memory_format=torch.channels_last) if torch.is_tensor(x) and x.dim() == 4 else x


def kg_contiguous(out):
    """Outputs back in the default memory format (4-D tensors, in a tuple or list too)."""
    if torch.is_tensor(out):
        return out.contiguous() if out.dim() == 4 else out
    if isinstance(out, (tuple, list)):
        return type(out)(kg_contiguous(o) for o in out)
    return out


def kg_rewrite_onednn(gm, channels_last=False):
    """Conv2d (zero padding) with an eval-mode BatchNorm2d after it (or fold-bn's kg_conv_bn) and an activation
    oneDNN fuses (relu, gelu, sigmoid, tanh, silu, hardswish, leaky_relu), each optional, or Linear with such an
    activation, each used only by the next: one kg_onednn_layer call (CPU). With `channels_last`, 4-D inputs
    are converted once at the graph's entry and 4-D outputs back at its exit, so the layers in between run in
    oneDNN's own layout (each kg_onednn_layer otherwise converts its input and output: 0.39 + 0.17 ms around a
    1.4 ms conv of 1 MiB on a 2-core CPU)."""
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        if node not in gm.graph.nodes:
            continue
        bn_attr = None
        if node.op == "call_module" and type(mods.get(node.target)) in (torch.nn.Conv2d, torch.nn.Linear):
            layer = mods[node.target]
            if len(node.args) != 1 or node.kwargs:
                continue
            x, layer_attr = node.args[0], node.target
        elif node.op == "call_function" and getattr(node.target, "__name__", "") == "kg_conv_bn":
            x, conv_node, bn_node = node.args
            layer = mods.get(conv_node.target) if getattr(conv_node, "op", None) == "get_attr" else None
            if type(layer) is not torch.nn.Conv2d:
                continue
            layer_attr, bn_attr = conv_node.target, bn_node.target
        else:
            continue
        if isinstance(layer, torch.nn.Conv2d) and (layer.padding_mode != "zeros" or isinstance(layer.padding, str)):
            continue
        last, chain = node, [node]
        users = _kg_users(last)
        if bn_attr is None and isinstance(layer, torch.nn.Conv2d) and len(users) == 1 and \
                users[0].op == "call_module" and type(mods.get(users[0].target)) is torch.nn.BatchNorm2d and \
                mods[users[0].target].track_running_stats:
            bn_attr, last = users[0].target, users[0]
            chain.append(last)
            users = _kg_users(last)
        spec = _kg_act_of(users[0], mods) if len(users) == 1 else None
        if spec is not None and users[0].args[0] is last:
            last = users[0]
            chain.append(last)
        elif isinstance(layer, torch.nn.Linear):
            continue                  # a Linear alone is one GEMM call already
        else:
            spec = ("none", [], "")
        with gm.graph.inserting_before(last):
            args = (x, gm.graph.get_attr(layer_attr), *spec)
            if bn_attr is not None:
                args = args + (gm.graph.get_attr(bn_attr),)
            new = gm.graph.call_function(kg_onednn_layer, args)
        last.replace_all_uses_with(new)
        for c in reversed(chain):
            gm.graph.erase_node(c)
        gm.graph.eliminate_dead_code()
        n += 1
    if n and channels_last:
        for node in list(gm.graph.nodes):
            if node.op == "placeholder" and node.users:
                with gm.graph.inserting_after(node):
                    cl = gm.graph.call_function(kg_channels_last, (node,))
                node.replace_all_uses_with(cl, delete_user_cb=lambda user: user is not cl)
            elif node.op == "output":
                with gm.graph.inserting_before(node):
                    back = gm.graph.call_function(kg_contiguous, (node.args[0],))
                node.args = (back,)
    return kg_finish(gm, n)


ONEDNN_REWRITES = {
    "onednn": kg_rewrite_onednn,
}
