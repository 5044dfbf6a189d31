"""The previous judged call's tensors, read again after the next call (kernelgate/sandbox/history.py)."""
import torch

from kernelgate.sandbox import handle
from kernelgate.sandbox.history import Earlier


def _clean(t):
    return None


def _held(xs, outs):
    e = Earlier()
    e.keep(xs, handle.snapshot(xs), outs)
    return e


def test_nothing_changed_is_no_problem_and_the_first_call_has_nothing_to_check():
    assert Earlier().check([torch.ones(3)], [torch.ones(3)], _clean) is None
    x, y = torch.randn(4, 3), torch.randn(4)
    e = _held([x], [y])
    assert e.check([torch.randn(4, 3)], [torch.randn(4)], _clean) is None


def test_an_earlier_input_written_later_is_an_input_mutation():
    x = torch.randn(4, 3)
    e = _held([x], [torch.randn(4)])
    x.mul_(0.5)
    err = e.check([torch.randn(4, 3)], [torch.randn(4)], _clean)
    assert err["error"] == "input_mutated" and "previous call" in err["message"]


def test_an_input_buffer_written_again_by_the_judge_is_not_a_change():
    """The next call's inputs placed into the same buffer (a slot reused): new values there are the caller's."""
    x = torch.randn(4, 3)
    e = _held([x], [torch.randn(4)])
    x.copy_(torch.randn(4, 3))
    assert e.check([x], [torch.randn(4)], _clean) is None


def test_an_earlier_output_written_later_is_aliasing():
    y = torch.randn(5)
    e = _held([torch.randn(5)], [y])
    y.mul_(0.5)
    assert e.check([torch.randn(5)], [torch.randn(5)], _clean)["error"] == "aliasing"


def test_an_output_in_the_memory_of_an_earlier_held_output_is_aliasing():
    y = torch.randn(5)
    e = _held([torch.randn(5)], [y])
    err = e.check([torch.randn(5)], [y[1:]], _clean)
    assert err["error"] == "aliasing" and "memory of an output of the previous call" in err["message"]


def test_in_place_outputs_in_reused_input_buffers_are_no_problem():
    """An in-place op returns its input: the next call's output lives in the same (reused) buffer, rightly."""
    x = torch.randn(6)
    e = _held([x], [x])
    x.copy_(torch.randn(6))
    assert e.check([x], [x], _clean) is None


def test_a_tampered_held_tensor_is_refused_before_it_is_read():
    y = torch.randn(5)
    e = _held([torch.randn(5)], [y])
    err = e.check([torch.randn(5)], [torch.randn(5)], lambda t: "attribute dict" if t is y else None)
    assert err["error"] == "introspection"


def test_take_gives_up_what_is_held():
    e = _held([torch.randn(2)], [torch.randn(2)])
    assert e.take() is not None and e.held is None and e.take() is None
