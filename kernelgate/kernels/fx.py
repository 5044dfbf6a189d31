"""The recognizer: which torch.fx nodes are pointwise ops, row ops, row reductions and GEMMs, the groups
they form, the programs (ir.py) that describe them, and the graph surgery every rewrite shares.

Pointwise: add/sub/mul/div with tensors or numbers, neg, sigmoid, tanh, relu, silu, gelu (both forms), exp,
log, sqrt, rsqrt, abs, square, clamp by numbers, pow by an exponent in ir._KG_POW; as functions, methods,
operators or modules. A *group* is a maximal set of them whose values are used only inside it but for its
root's (the last in graph order), so it can be computed at the root's position as one kernel. A rewrite
takes the groups a renderer can compute: `_kg_fx_info(gm, accepts)` filters the nodes first.

A runtime module (kernels/manifest.py): imports nothing of kernelgate.
"""

import math
import operator

import torch
import torch.fx
import torch.nn.functional as F

from .ir import _KG_POW

_KG_FX_FUNCTIONS = {
    operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub", operator.mul: "mul",
    torch.mul: "mul", operator.truediv: "div", torch.div: "div", torch.true_divide: "div", operator.neg: "neg",
    torch.neg: "neg", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
    torch.relu: "relu", F.relu: "relu", F.silu: "silu", F.gelu: "gelu", torch.exp: "exp", torch.log: "log",
    torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.abs: "abs", operator.abs: "abs", torch.clamp: "clamp",
    torch.clip: "clamp", operator.pow: "pow", torch.pow: "pow", torch.square: "square", F.hardswish: "hardswish",
    F.hardsigmoid: "hardsigmoid", F.leaky_relu: "leaky_relu", F.softplus: "softplus", F.mish: "mish",
    F.hardtanh: "hardtanh", F.relu6: "relu6",
}
_KG_FX_METHODS = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div", "neg": "neg",
    "sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "exp": "exp", "log": "log", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "abs": "abs", "clamp": "clamp", "clip": "clamp", "pow": "pow", "square": "square",
}
_KG_FX_MODULES = ((torch.nn.ReLU, "relu"), (torch.nn.Sigmoid, "sigmoid"), (torch.nn.Tanh, "tanh"),
                  (torch.nn.SiLU, "silu"), (torch.nn.GELU, "gelu"), (torch.nn.Hardswish, "hardswish"),
                  (torch.nn.Hardsigmoid, "hardsigmoid"), (torch.nn.LeakyReLU, "leaky_relu"),
                  (torch.nn.Softplus, "softplus"), (torch.nn.Mish, "mish"), (torch.nn.Hardtanh, "hardtanh"),
                  (torch.nn.ReLU6, "relu6"))
# recognized as another op of the table: hardtanh and relu6 are clamps (NaN kept, as torch's)
_KG_FX_AS = {"hardtanh": "clamp", "relu6": "clamp"}
# argument names after the input, and keyword arguments that may appear with their only accepted value
_KG_FX_SIGNATURES = {
    "add": (("other",), {"alpha": 1}), "sub": (("other",), {"alpha": 1}), "mul": (("other",), {}),
    "div": (("other",), {"rounding_mode": None}), "clamp": (("min", "max"), {}), "pow": (("exponent",), {}),
    "gelu": (("approximate",), {}), "relu": (("inplace",), {}), "silu": (("inplace",), {}),
    "hardswish": (("inplace",), {}), "hardsigmoid": (("inplace",), {}), "mish": (("inplace",), {}),
    "leaky_relu": (("negative_slope", "inplace"), {}), "softplus": (("beta", "threshold"), {}),
    "hardtanh": (("min_val", "max_val", "inplace"), {}), "relu6": (("inplace",), {}),
}


def _kg_fx_number(v):
    return isinstance(v, (int, float)) and (isinstance(v, bool) or math.isfinite(v))


def _kg_fx_bind(node, names):
    bound = dict(zip(names, node.args))
    bound.update(node.kwargs)
    return bound


def _kg_fx_classify(node, mods):
    """(op, operands, params) for a pointwise node, else None. Operands are Nodes or Python numbers,
    at least one a Node; params are the op's constants (clamp bounds, pow exponent)."""
    if node.op == "call_function":
        op = _KG_FX_FUNCTIONS.get(node.target)
        args, kwargs = list(node.args), dict(node.kwargs)
    elif node.op == "call_method":
        op = _KG_FX_METHODS.get(node.target)
        args, kwargs = list(node.args), dict(node.kwargs)
    elif node.op == "call_module":
        m = mods.get(node.target)
        op = next((name for cls, name in _KG_FX_MODULES if type(m) is cls), None)
        args = list(node.args)
        kwargs = {k: getattr(m, k) for k in _KG_FX_SIGNATURES.get(op, ((), {}))[0] if hasattr(m, k)}
    else:
        return None
    if op is None or not args:
        return None
    names, fixed = _KG_FX_SIGNATURES.get(op, ((), {}))
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
        if (lo is None and hi is None) or not all(v is None or _kg_fx_number(v) for v in (lo, hi)):
            return None
        operands, params = [x], (lo, hi)
    elif op == "pow":
        e = bound.get("exponent")
        if not _kg_fx_number(e) or isinstance(e, bool) or e not in _KG_POW:
            return None
        operands, params = [x], (e,)
    elif op in ("hardtanh", "relu6"):
        lo, hi = (bound.get("min_val", -1.0), bound.get("max_val", 1.0)) if op == "hardtanh" else (0.0, 6.0)
        if not (_kg_fx_number(lo) and _kg_fx_number(hi)) or isinstance(lo, bool) or isinstance(hi, bool) or lo > hi:
            return None
        op, operands, params = _KG_FX_AS[op], [x], (float(lo), float(hi))
    elif op == "leaky_relu":
        slope = bound.get("negative_slope", 0.01)
        if not _kg_fx_number(slope) or isinstance(slope, bool):
            return None
        operands, params = [x], (float(slope),)
    elif op == "softplus":
        beta, threshold = bound.get("beta", 1.0), bound.get("threshold", 20.0)
        if not all(_kg_fx_number(v) and not isinstance(v, bool) for v in (beta, threshold)) or beta == 0:
            return None
        operands, params = [x], (float(beta), float(threshold))
    elif op == "gelu":
        approx = bound.get("approximate", "none")
        if approx not in ("none", "tanh"):
            return None
        op, operands = ("gelu_tanh" if approx == "tanh" else "gelu"), [x]
    else:
        if bound:
            return None
        operands = [x]
    if not all(isinstance(a, torch.fx.Node) or _kg_fx_number(a) for a in operands):
        return None
    if not any(isinstance(a, torch.fx.Node) for a in operands):
        return None
    return op, tuple(operands), params


def _kg_fx_info(gm, accepts=None):
    """(modules by name, pointwise node -> (op, operands, params)); accepts(op, operands, params) keeps only
    the nodes a renderer computes as torch does."""
    mods = dict(gm.named_modules())
    info = {}
    for node in gm.graph.nodes:
        c = _kg_fx_classify(node, mods)
        if c is not None and (accepts is None or accepts(*c)):
            info[node] = c
    return mods, info


def _kg_fx_groups(gm, info):
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


def _kg_fx_inputs(order, info):
    """The Nodes a group reads from outside it, in order of first use."""
    inside, seen = set(order), []
    for m in order:
        for a in info[m][1]:
            if isinstance(a, torch.fx.Node) and a not in inside and a not in seen:
                seen.append(a)
    return seen


def _kg_fx_program(order, info, inputs):
    """The group as a program (ir.py) whose operand K is inputs[K]."""
    refs = {n: f"i{k}" for k, n in enumerate(inputs)}
    instrs = []
    for j, m in enumerate(order):
        op, operands, params = info[m]
        instrs.append((op, tuple(refs[a] if isinstance(a, torch.fx.Node) else a for a in operands), params))
        refs[m] = f"t{j}"
    return tuple(instrs)


# ---------------------------------------------------------------- graph surgery

def _kg_fx_attrs(gm, before, *refs):
    """get_attr nodes (inserted before `before`) for module attribute paths; Nodes and None as they are.
    Parameters are read at every call, never copied, so load_state_dict is always seen."""
    with gm.graph.inserting_before(before):
        return tuple(gm.graph.get_attr(r) if isinstance(r, str) else r for r in refs)


def _kg_fx_replace_node(gm, node, fn, args):
    """node -> one call of fn(*args)."""
    with gm.graph.inserting_before(node):
        new = gm.graph.call_function(fn, args)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)
    return new


def _kg_fx_replace(gm, info, order, fn, args, dead=()):
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


def _kg_fx_finish(gm, n):
    """After a rewrite changed n places: check and recompile the graph; returns n."""
    if n:
        gm.graph.lint()
        gm.recompile()
    return n


# ---------------------------------------------------------------- GEMMs, row ops, row reductions

_KG_FX_MATMULS = (torch.matmul, torch.mm, operator.matmul)


def _kg_fx_gemm_of(node, mods):
    """(kind, x, weight, bias) of a GEMM node; weight/bias are Nodes, None, or a module attribute path
    (str) for nn.Linear; else None."""
    if node.op == "call_module" and type(mods.get(node.target)) is torch.nn.Linear:
        if len(node.args) != 1 or node.kwargs:
            return None
        m = mods[node.target]
        return "linear", node.args[0], node.target + ".weight", (node.target + ".bias" if m.bias is not None else None)
    if node.op == "call_function" and node.target is F.linear:
        bound = _kg_fx_bind(node, ("input", "weight", "bias"))
        if set(bound) - {"input", "weight", "bias"} or "input" not in bound or "weight" not in bound:
            return None
        return "linear", bound["input"], bound["weight"], bound.get("bias")
    if (node.op == "call_function" and node.target in _KG_FX_MATMULS) or \
            (node.op == "call_method" and node.target in ("matmul", "mm")):
        if len(node.args) != 2 or node.kwargs:
            return None
        return "matmul", node.args[0], node.args[1], None
    return None


def _kg_fx_attr(gm, path):
    obj = gm
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _kg_fx_known_fp32(gm, w):
    """Whether a GEMM's weight (module attribute path or Node) is a module tensor of dtype fp32."""
    if isinstance(w, torch.fx.Node):
        w = w.target if w.op == "get_attr" else None
    t = _kg_fx_attr(gm, w) if isinstance(w, str) else None
    return torch.is_tensor(t) and t.dtype == torch.float32


def _kg_fx_row_op(node, mods):
    """(kind, input, arg, weight, bias, eps) when node is a softmax (kind "softmax", arg its int dim, no dtype)
    or a LayerNorm over one dim (kind "layernorm", arg the normalized shape as a tuple); weight/bias are
    module attribute paths (str), Nodes or None. Else None."""
    if node.op == "call_module":
        m = mods.get(node.target)
        if type(m) is torch.nn.Softmax and len(node.args) == 1 and not node.kwargs:
            kind, x, arg, w, b, eps = "softmax", node.args[0], m.dim, None, None, 0.0
        elif type(m) is torch.nn.LayerNorm and len(node.args) == 1 and not node.kwargs:
            w = node.target + ".weight" if m.weight is not None else None
            b = node.target + ".bias" if getattr(m, "bias", None) is not None else None
            kind, x, arg, eps = "layernorm", node.args[0], tuple(m.normalized_shape), float(m.eps)
        else:
            return None
    elif (node.op == "call_function" and node.target in (F.softmax, torch.softmax)) or \
            (node.op == "call_method" and node.target == "softmax"):
        names = ("input", "dim", "_stacklevel", "dtype") if node.target is F.softmax else ("input", "dim", "dtype")
        bound = _kg_fx_bind(node, names)
        if len(node.args) > len(names) or set(bound) - set(names) or bound.get("dtype") is not None:
            return None
        kind, x, arg, w, b, eps = "softmax", bound.get("input"), bound.get("dim"), None, None, 0.0
    elif node.op == "call_function" and node.target in (F.layer_norm, torch.layer_norm):
        names = ("input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable")
        bound = _kg_fx_bind(node, names)
        shape, eps = bound.get("normalized_shape"), bound.get("eps", 1e-5)
        if len(node.args) > len(names) or set(bound) - set(names) or not isinstance(shape, (tuple, list)) \
                or not _kg_fx_number(eps) or isinstance(eps, bool):
            return None
        kind, x, arg, w, b, eps = "layernorm", bound.get("input"), tuple(shape), bound.get("weight"), \
            bound.get("bias"), float(eps)
    else:
        return None
    if not isinstance(x, torch.fx.Node):
        return None
    if kind == "softmax" and (isinstance(arg, bool) or not isinstance(arg, int)):
        return None
    if kind == "layernorm" and len(arg) != 1:
        return None
    return kind, x, arg, w, b, eps


def _kg_fx_reduction(node):
    """"sum" or "mean" when node reduces its input over the last dim keeping it (x.mean(-1, keepdim=True))."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op not in ("call_method", "call_function") or name not in ("sum", "mean") or len(node.args) > 2:
        return None
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    extra = set(node.kwargs) - {"dim", "keepdim"}
    return name if dim == -1 and node.kwargs.get("keepdim") is True and not extra else None
