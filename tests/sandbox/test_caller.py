"""sandbox/caller.py: a caller's ordinary code, the same bits before and after a forward (red team 41)."""
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kernelgate.sandbox import caller, sensors


def _sig(seed):
    return caller.signature(caller.probe(seed), 5, sensors._unclean)


def test_the_probe_is_the_same_bits_each_time_and_another_seed_is_not():
    a = _sig(11)
    assert isinstance(a, list) and len(a) > 100
    assert _sig(11) == a and _sig(12) != a


def test_the_probe_puts_the_global_generators_back():
    torch.manual_seed(3)
    random.seed(3)
    np.random.seed(3)
    before = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    caller.probe(5)
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert (np.random.get_state()[1] == before[2]).all()


@pytest.mark.parametrize("where, name, value", [
    (F, "_in_projection_packed", None),
    (torch._C._nn, "silu", lambda x, *a, **k: x),
    (torch.optim.SGD.__init__, "__kwdefaults__", None),
])
def test_changes_no_snapshot_names_change_what_the_caller_computes(where, name, value):
    """A private helper, torch._C._nn, and a mutable default changed in place (red team 41)."""
    a = _sig(7)
    if name == "__kwdefaults__":
        d = torch.optim.SGD.__init__.__kwdefaults__
        old = d["maximize"]
        d["maximize"] = True
        try:
            assert _sig(7) != a
        finally:
            d["maximize"] = old
    else:
        old = getattr(where, name)
        if name == "_in_projection_packed":
            value = (lambda orig: lambda *a, **kw: (lambda q, k, v: (q * 0.5, k, v))(*orig(*a, **kw)))(old)
        setattr(where, name, value)
        try:
            assert _sig(7) != a
        finally:
            setattr(where, name, old)
    assert _sig(7) == a


def test_saved_tensor_hooks_left_on_the_thread_change_the_gradients():
    a = _sig(9)
    torch._C._autograd._push_saved_tensors_default_hooks(lambda t: t, lambda t: t * 0.5)
    try:
        try:
            changed = _sig(9) != a
        except RuntimeError:          # or the caller's code fails outright
            changed = True
        assert changed
    finally:
        torch._C._autograd._pop_saved_tensors_default_hooks()
    assert _sig(9) == a
