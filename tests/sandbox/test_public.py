"""sandbox/public.py: the process-wide state a forward may not change (red teams 39 and 40)."""
import functools
import random
import sys
import types
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelgate.sandbox import public


def _swap(obj, name, value):
    """Sets obj.name (a new member where it had none of its own); returns the undo."""
    own = name in vars(obj)
    old = vars(obj).get(name)

    def undo():
        if own:
            setattr(obj, name, old)
        else:
            delattr(obj, name)
    setattr(obj, name, value)
    return undo


def test_a_rebound_function_is_named_and_put_back_is_no_change():
    before = public.snapshot()
    undo = [_swap(F, "relu", lambda x, inplace=False: x), _swap(nn.ReLU, "forward", lambda self, x: x)]
    try:
        assert public.changed(before) == ["torch.nn.functional.relu", "torch.nn.modules.activation.ReLU.forward"]
    finally:
        for u in undo:
            u()
    assert public.changed(before) == []


@pytest.mark.parametrize("where, name, expect", [
    (torch.linalg, "vector_norm", "torch.linalg.vector_norm"),
    (nn.init, "kaiming_uniform_", "torch.nn.init.kaiming_uniform_"),
    (nn.Module, "eval", "torch.nn.Module.eval"),
    (random, "shuffle", "random.shuffle"),
    (torch.nn.modules.batchnorm._BatchNorm, "forward", "torch.nn.modules.batchnorm._BatchNorm.forward"),
    (torch.optim.SGD, "zero_grad", "torch.optim.sgd.SGD.zero_grad (new)"),
    (torch.Tensor, "softmax", "torch.Tensor.softmax (new)"),     # shadows the C method of the same name
    (torch.nn, "Linear", "torch.nn.Linear"),
    (torch.nn.modules.linear, "F", "torch.nn.modules.linear:F"),          # a module's globals (red team 42)
    (sys.modules["torch.optim.adam"], "adam", "torch.optim.adam:adam"),
])
def test_red_team_40s_process_wide_changes_are_named(where, name, expect):
    before = public.snapshot()
    undo = _swap(where, name, lambda *a, **k: None)
    try:
        assert public.changed(before) == [expect]
    finally:
        undo()
    assert public.changed(before) == []


def test_global_module_hooks_and_raising_warning_filters_are_named():
    before = public.snapshot()
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
    try:
        assert public.changed(before) == ["torch.nn.modules.module._global_forward_hooks"]
    finally:
        handle.remove()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # a library quieting warnings changes no result
        assert public.changed(before) == []
        warnings.simplefilter("error")                  # a caller's warning now raises
        assert public.changed(before) == ["warnings.filters"]
    assert public.changed(before) == []


def test_a_wrapper_of_the_candidates_is_a_change_even_dressed_as_torchs():
    before = public.snapshot()
    seed = torch.manual_seed
    undo = _swap(torch, "manual_seed", functools.wraps(seed)(lambda s: seed(0)))
    try:
        assert public.changed(before) == ["torch.manual_seed"]
    finally:
        undo()
    relu6_wrapped = getattr(F.relu6, "__wrapped__", None)
    F.relu6.__wrapped__ = torch.relu                    # red team 40: `__wrapped__` naming the original
    undo = _swap(torch, "relu", F.relu6)
    try:
        assert public.changed(before) == ["torch.relu"]
    finally:
        undo()
        if relu6_wrapped is None:
            del F.relu6.__wrapped__
        else:
            F.relu6.__wrapped__ = relu6_wrapped
    if seed.__closure__:                                # torch's own wrapper code, the candidate's function inside
        forged = types.FunctionType(seed.__code__, seed.__globals__, "sigmoid", None,
                                    tuple(types.CellType(torch.tanh if c.cell_contents is not True else True)
                                          for c in seed.__closure__))
        undo = _swap(torch, "sigmoid", forged)
        try:
            assert public.changed(before) == ["torch.sigmoid"]
        finally:
            undo()


@pytest.mark.slow
def test_what_torch_compile_and_optimizers_change_is_not_a_change():
    """TorchDynamo wraps torch.manual_seed on import, nn.Module.__init__ and the optimizers' methods on a compile;
    an optimizer's first construction hooks its class's step: all torch's own wrappers around the same functions."""
    before = public.snapshot()
    m = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
    for opt in (torch.optim.SGD, torch.optim.Adam, torch.optim.LBFGS):
        opt(m.parameters())
    torch.compile(m)(torch.randn(2, 8))
    for opt in (torch.optim.SGD, torch.optim.AdamW):
        o = opt(m.parameters())
        m(torch.randn(2, 8)).sum().backward()
        o.step()
    torch.manual_seed(0)
    assert public.changed(before) == []
