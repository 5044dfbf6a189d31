"""The graph helpers of the low-precision strategies (precision.py, precision_int8.py): node matching on torch.fx
graphs traced with buffers kept live, casts and their dtypes, column-major weight copies.

Candidates embed this file verbatim before precision_int8.py and precision.py (precision.source()), after
fx_rewrites.py, so it imports without Triton and defines only `kg_lp_*` / `_kg_lp_*` / `_KG_LP_*` names.
"""

import torch
import torch.fx

_KG_LP_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_KG_LP_FLOATS = {"float": torch.float32, "double": torch.float64, "half": torch.float16, "bfloat16": torch.bfloat16,
                 "int": torch.int32, "long": torch.int64}

try:
    kg_trace, kg_finish, _kg_derived  # noqa: B018 - embedded in a candidate after fx_rewrites.py: its helpers
except NameError:
    from .fx_rewrites import _kg_derived, kg_finish, kg_trace  # noqa: F401 - kg_finish: the rewrites' helper
kg_lp_trace = kg_trace      # buffers stay get_attr nodes (see fx_rewrites.kg_trace)


def _kg_lp_is(node, *names):
    """Whether node calls a function or method with one of these names (operator.matmul is 'matmul')."""
    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_function":
        return getattr(node.target, "__name__", "") in names
    if node.op == "call_method":
        return node.target in names
    return False


def _kg_lp_attr(gm, node):
    """The tensor a get_attr node refers to, else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    obj = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
    return obj if torch.is_tensor(obj) else None


def _kg_lp_cast(node):
    """(source, dtype) if node is a dtype cast: x.to(d), x.to(dtype=d), x.float(), x.type(d), ...; dtype may be a
    torch.dtype or a Node computing one (e.g. `self.scale.dtype`). Else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_method" or not node.args:
        return None
    if node.target in _KG_LP_FLOATS and len(node.args) == 1 and not node.kwargs:
        return node.args[0], _KG_LP_FLOATS[node.target]
    if node.target in ("to", "type"):
        rest = [a for a in node.args[1:]]
        dt = node.kwargs.get("dtype", rest[0] if len(rest) == 1 else None)
        extra = set(node.kwargs) - {"dtype"}
        if dt is not None and not extra and (isinstance(dt, torch.dtype) or isinstance(dt, torch.fx.Node)):
            return node.args[0], dt
    return None


def _kg_lp_static_dtype(gm, node):
    """The dtype of node's value when the graph alone says it (a buffer, a cast to a constant dtype), else None."""
    t = _kg_lp_attr(gm, node)
    if t is not None:
        return t.dtype
    c = _kg_lp_cast(node)
    if c is not None and isinstance(c[1], torch.dtype):
        return c[1]
    return None


def _kg_lp_transposed(node):
    """x if node is x.t() / x.T / x.mT / x.transpose of the last two dims of a matrix, else None."""
    if _kg_lp_is(node, "t") and len(node.args) == 1:
        return node.args[0]
    if _kg_lp_is(node, "transpose") and len(node.args) == 3 and tuple(node.args[1:]) in ((0, 1), (1, 0), (-2, -1),
                                                                                         (-1, -2)):
        return node.args[0]
    if node.op == "call_function" and node.target is getattr and len(node.args) == 2 and node.args[1] in ("T", "mT"):
        return node.args[0]
    return None


def _kg_lp_matmul(node):
    """(a, b, b_is_transposed_weight) for a @ b, torch.matmul, torch.mm, or F.linear(a, w) without bias."""
    if _kg_lp_is(node, "matmul", "mm") and len(node.args) == 2 and not node.kwargs:
        return node.args[0], node.args[1], False
    if _kg_lp_is(node, "linear") and node.op == "call_function":
        bias = node.kwargs.get("bias", node.args[2] if len(node.args) > 2 else None)
        if bias is None and len(node.args) >= 2:
            return node.args[0], node.args[1], True
    return None


def _kg_lp_colmajor(w, transpose):
    """(w.t() if transpose else w) as a column-major (K, N) matrix: a view when it is one, else a copy cached
    with fx_rewrites' _kg_derived (checked against w at every call, contents included, so writes through
    `w.data` are seen too; the copy itself is what w is compared with)."""
    m = w.t() if transpose else w
    if m.t().is_contiguous():
        return m
    return _kg_derived(("lp-colmajor", id(w), transpose), (w,), lambda: m.t().contiguous().t(),
                       lambda c: (c.t() if transpose else c,))


def _kg_lp_probe(dtype):
    """A one-element tensor of dtype: type promotion against it is promotion against a dimensioned tensor."""
    return torch.empty((1,), dtype=dtype)


def _kg_lp_erase_dead(gm, nodes):
    """Erase the listed call nodes that have no users left, repeatedly."""
    nodes = [x for x in nodes if isinstance(x, torch.fx.Node) and x.op in ("call_function", "call_method")]
    changed = True
    while changed:
        changed = False
        for x in nodes:
            if x in gm.graph.nodes and not x.users:
                gm.graph.erase_node(x)
                changed = True
