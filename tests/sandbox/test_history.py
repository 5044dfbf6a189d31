"""Earlier judged calls' tensors, read again later (kernelgate/sandbox/history.py)."""
import torch

from kernelgate.sandbox import history
from kernelgate.sandbox.history import Earlier


def _clean(t):
    return None


def _held(xs, outs):
    e = Earlier()
    e.keep(xs, outs)
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


def test_an_input_buffer_written_again_by_the_judge_is_let_go():
    """The next call's inputs placed into the same buffer (a slot reused): new values there are the caller's."""
    x = torch.randn(4, 3)
    e = _held([x], [torch.randn(4)])
    x.copy_(torch.randn(4, 3))
    assert e.check([x], [torch.randn(4)], _clean) is None
    e.keep([x], [torch.randn(4)])
    assert e.check([torch.randn(4, 3)], [torch.randn(4)], _clean, deep=True) is None


def test_an_earlier_output_written_later_is_aliasing():
    y = torch.randn(5)
    e = _held([torch.randn(5)], [y])
    y.mul_(0.5)
    assert e.check([torch.randn(5)], [torch.randn(5)], _clean)["error"] == "aliasing"


def test_writes_several_calls_back_are_found_after_the_trials():
    """Red team 36: inputs and outputs written two or more calls back; the previous call's alone were read."""
    x0, y0 = torch.randn(5), torch.randn(5)
    e = _held([x0], [y0])
    for _ in range(3):
        e.keep([torch.randn(5)], [torch.randn(5)])
    x0.zero_()
    assert e.check([torch.randn(5)], [torch.randn(5)], _clean) is None      # only the previous call, per call
    err = e.check([], [], _clean, deep=True)
    assert err["error"] == "input_mutated" and "4 calls back" in err["message"]
    x0.copy_(torch.randn(5))
    e = _held([x0], [y0])
    e.keep([torch.randn(5)], [torch.randn(5)])
    y0.zero_()
    assert e.check([], [], _clean, deep=True)["error"] == "aliasing"


def test_an_output_in_the_memory_of_any_held_output_is_aliasing():
    """A memo handing back the previous output, and a ring of output buffers (red team 36: 16 of them)."""
    ring = [torch.randn(5) for _ in range(4)]
    e = Earlier()
    for k in range(4):
        assert e.check([torch.randn(5)], [ring[k]], _clean) is None
        e.keep([torch.randn(5)], [ring[k]])
    err = e.check([torch.randn(5)], [ring[0][1:]], _clean)
    assert err["error"] == "aliasing" and "memory of an earlier call's output" in err["message"]


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


def test_what_is_held_is_bounded_and_can_be_given_up(monkeypatch):
    e = Earlier()
    for _ in range(history.DEPTH + 3):
        e.keep([torch.randn(2)], [torch.randn(2)])
    assert len(e.held) == history.DEPTH
    monkeypatch.setattr(history, "HOLD_BYTES", 100)
    e.keep([torch.randn(2)], [torch.randn(40)])       # 160 bytes of output: the older calls let go
    assert len(e.held) == 1
    assert e.take() is not None and e.held == [] and e.take() is None


def test_calls_let_go_past_the_depth_are_read_a_last_time():
    """Red team 36's older outputs were written just before a run of calls pushed them out of the held window."""
    y0 = torch.randn(5)
    e = _held([torch.randn(5)], [y0])
    y0.zero_()
    err = None
    for _ in range(history.DEPTH):
        err = err or e.keep([torch.randn(5)], [torch.randn(5)])
    assert err is not None and err["error"] == "aliasing" and len(e.held) == history.DEPTH
    assert e.let_go() and e.let_go() == []


def test_a_reordering_of_a_held_tensors_words_is_a_change():
    """Red team 37: the digest summed the words' mixes whatever their order, so reversing a held output's (or the
    caller's weights') words went unseen. The signature depends on where each word lies, under a secret key."""
    y = torch.randn(64, 8)
    e = Earlier(key=12345)
    e.keep([torch.randn(4)], [y])
    words = y.view(-1).view(torch.int64)
    words.copy_(words.flip(0))
    err = e.check([torch.randn(4)], [torch.randn(4)], _clean)
    assert err is not None and err["error"] == "aliasing"


def test_state_signatures_cover_parameters_and_buffers():
    from kernelgate.sandbox import jobs
    m = torch.nn.BatchNorm1d(4).eval()
    sigs = history.state_sigs(jobs.state_of(m), 7, _clean)
    assert [s[0] for s in sigs] == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    m.running_var.zero_()
    assert history.state_sigs(jobs.state_of(m), 7, _clean) != sigs
    assert history.state_sigs(jobs.state_of(m), 7, lambda t: "no")["error"] == "introspection"
    m.register_buffer("workspace", torch.zeros(3), persistent=False)      # not the caller's: may change
    assert "workspace" not in [s[0] for s in history.state_sigs(jobs.state_of(m), 7, _clean)]
    conv = torch.nn.Conv2d(3, 8, 3)
    before = history.state_sigs(jobs.state_of(conv), 7, _clean)
    conv.to(memory_format=torch.channels_last)        # laid out anew, the same values: not a change
    assert history.state_sigs(jobs.state_of(conv), 7, _clean) == before
