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


def _sigs(m):
    from kernelgate.sandbox import jobs
    return history.state_sigs(jobs.state_of(m), 7, _clean)


def test_swapped_or_frozen_parameter_objects_are_changes_named_in_the_message():
    m = torch.nn.Linear(4, 3)
    before = _sigs(m)
    m.weight = torch.nn.Parameter(m.weight.detach().clone())         # the same values, a new object
    after = _sigs(m)
    assert after != before and "replaced the parameter object 'weight'" in history.state_change(before, after)
    assert "replaced" in history.objects_change(before, after)
    m2 = torch.nn.Linear(4, 3)
    before = _sigs(m2)
    m2.bias.requires_grad_(False)
    assert "requires_grad of 'bias' (True -> False)" in history.state_change(before, _sigs(m2))
    m3 = torch.nn.Linear(4, 3)
    before = _sigs(m3)
    with torch.no_grad():
        m3.weight.mul_(2)                     # new values in the same objects: a load, not an object change
    assert history.objects_change(before, _sigs(m3)) is None
    assert "changed the module's 'weight'" in history.state_change(before, _sigs(m3))


def test_the_reference_parameters_must_be_parameters_with_their_requires_grad():
    m = torch.nn.Linear(4, 3)
    assert history.param_fault(_sigs(m), {"weight": True, "bias": True}) is None
    m.bias.requires_grad_(False)
    assert "requires_grad=False" in history.param_fault(_sigs(m), {"weight": True, "bias": True})

    class AsBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("weight", torch.ones(3))
    assert "a buffer of the module's" in history.param_fault(_sigs(AsBuffer()), {"weight": True})
    own = torch.nn.Linear(4, 3)                     # a layout of its own (other names): all must require grad
    assert history.param_fault(_sigs(own), {"w_t": True}) is None
    own.weight.requires_grad_(False)
    assert "every one of the reference's" in history.param_fault(_sigs(own), {"w_t": True})
    assert history.param_fault({"error": "introspection"}, {"weight": True}) is None


def test_state_dict_must_give_back_what_was_loaded_rounded_to_the_module_dtype():
    from kernelgate.sandbox import jobs
    m = torch.nn.Linear(4, 3)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    assert history.roundtrip_fault(jobs.state_dict_of(m), state, 7, _clean) is None
    half = torch.nn.Linear(4, 3).to(torch.bfloat16)
    half.load_state_dict(state)                                      # stored rounded: still what was loaded
    assert history.roundtrip_fault(jobs.state_dict_of(half), state, 7, _clean) is None

    class Transposed(torch.nn.Linear):
        def state_dict(self, *a, **k):
            sd = super().state_dict(*a, **k)
            sd["weight"] = sd["weight"].t().contiguous().reshape(sd["weight"].shape).flip(0)
            return sd
    t = Transposed(4, 3)
    t.load_state_dict(state)
    assert "other values under 'weight'" in history.roundtrip_fault(jobs.state_dict_of(t), state, 7, _clean)
    other = {**state, "extra": torch.ones(1)}                        # keys of its own: loaded back instead
    assert history.own_keys(jobs.state_dict_of(m), other) and not history.own_keys(jobs.state_dict_of(m), state)
    assert history.roundtrip_fault(jobs.state_dict_of(m), other, 7, _clean) is None
    assert "mapping" in history.roundtrip_fault(None, state, 7, _clean)


def test_a_module_of_its_own_layout_must_load_its_own_checkpoint_back_unchanged():
    from kernelgate.sandbox import jobs

    class Own(torch.nn.Module):                    # its state_dict hands out the weight negated, read back as it is
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))

        def state_dict(self, *a, **k):
            return {"w_saved": -self.w.detach()}

        def _load_from_state_dict(self, sd, prefix, *rest):
            with torch.no_grad():
                self.w.copy_(sd.pop(prefix + "w_saved", self.w))
    m = Own()
    before = _sigs(m)
    jobs.reload(m)
    assert _sigs(m) != before                       # what the worker compares (worker.py, `_caller`)


def test_a_planted_grad_is_a_change_of_the_state():
    m = torch.nn.Linear(4, 3)
    before = _sigs(m)
    m.weight.grad = torch.ones_like(m.weight)
    assert ".grad of 'weight'" in history.state_change(before, _sigs(m))
