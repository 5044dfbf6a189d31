"""The worker's jobs on the candidate's model (kernelgate/sandbox/jobs.py)."""
import pytest
import torch

from kernelgate.sandbox import jobs


class _Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.ones(3))
        self.tied = self.fc                      # the same parameters under two names in the state_dict


def test_a_quiet_load_writes_every_tensor_and_moves_no_version():
    """Red team 29: parameters changed only through load_state_dict, which moves version counters, so a weight
    cache keyed on versions passed; every other trial's load leaves them where they were, as a `.data` write
    (an EMA update) does."""
    m = _Norm()
    state = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
    state["tied.weight"], state["tied.bias"] = state["fc.weight"], state["fc.bias"]
    before = {k: v._version for k, v in [*m.named_parameters(), *m.named_buffers()]}
    jobs.load(m, state, "cpu", quiet=True)
    assert all(torch.equal(m.state_dict()[k], v) for k, v in state.items())
    assert {k: v._version for k, v in [*m.named_parameters(), *m.named_buffers()]} == before
    jobs.load(m, {k: v + 1 for k, v in state.items()}, "cpu")
    assert m.fc.weight._version > before["fc.weight"]


def test_a_quiet_load_takes_the_modules_own_conversions_and_ignores_its_state_dict():
    """Red team 30: the quiet path was taken only where the candidate's own state_dict() matched the state, so an
    override switched it off; now every load goes through load_state_dict and the versions go back after."""
    class Sly(_Norm):
        def state_dict(self, *a, **k):
            return dict(super().state_dict(*a, **k), dummy=torch.zeros(1))

    class Converted(torch.nn.Module):              # keeps the weight transposed, converted by a load hook
        def __init__(self):
            super().__init__()
            self.w_t = torch.nn.Parameter(torch.zeros(4, 3))

        def _load_from_state_dict(self, sd, prefix, *rest):
            sd[prefix + "w_t"] = sd.pop(prefix + "fc.weight").t().contiguous()
            super()._load_from_state_dict(sd, prefix, *rest)
    m = Sly()
    state = {k: torch.randn_like(v) for k, v in _Norm().state_dict().items()}
    v0 = m.fc.weight._version
    jobs.load(m, state, "cpu", quiet=True)
    assert torch.equal(m.fc.weight, state["tied.weight"]) and m.fc.weight._version == v0
    c = Converted()
    w = torch.randn(3, 4)
    jobs.load(c, {"fc.weight": w}, "cpu", quiet=True)
    assert torch.equal(c.w_t, w.t()) and c.w_t._version == 0


def test_a_quiet_load_with_other_keys_is_load_state_dict_and_its_strict_error():
    m = _Norm()
    state = dict(m.state_dict(), extra=torch.ones(1))
    with pytest.raises(jobs.BuildFailure, match="strict"):
        jobs.load(m, state, "cpu", quiet=True)
