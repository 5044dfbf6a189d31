"""structure.py: the gate's inputs are the leaves of the workload's lists, tuples and dicts holding tensors."""
import copy

import pytest
import torch
import torch.nn as nn

from kernelgate import structure
from kernelgate.records import Contract, Domain, Vary


def test_flat_arguments_are_left_as_they_are():
    xs = [torch.ones(2), 3, [1, 2], {"k": 1.5}]            # containers without tensors are one leaf each
    assert structure.shape_of(xs) is None
    assert structure.flatten(xs, None) == xs and structure.unflatten(xs, None) == xs


def test_containers_holding_tensors_become_their_leaves_and_come_back():
    a, b, c, d = (torch.full((2,), float(i)) for i in range(4))
    xs = [a, {"p": b, "q": [c, 7]}, (d, "s")]
    shape = structure.shape_of(xs)
    leaves = structure.flatten(xs, shape)
    assert [id(x) for x in leaves if torch.is_tensor(x)] == [id(a), id(b), id(c), id(d)]
    assert leaves[3] == 7 and leaves[5] == "s"
    back = structure.unflatten(leaves, shape)
    assert back[1]["q"][0] is c and isinstance(back[2], tuple) and list(back[1]) == ["p", "q"]
    assert [list(r) for r in structure.spans(shape, 3)] == [[0], [1, 2, 3], [4, 5]]


def test_a_draw_with_another_structure_is_an_error():
    shape = structure.shape_of([[torch.ones(1), torch.ones(1)]])
    with pytest.raises(ValueError, match="changed structure"):
        structure.flatten([[torch.ones(1)]], shape)


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(2.0))

    def forward(self, feats, bias):
        return feats["x"] * self.w + feats["y"] + bias


def test_a_structured_model_takes_leaves_and_keeps_its_state_dict_through_copies():
    xs = [{"x": torch.ones(3), "y": torch.full((3,), 5.0)}, torch.ones(3)]
    shape = structure.shape_of(xs)
    m = structure.structured(Pair(), shape)
    leaves = structure.flatten(xs, shape)
    assert torch.equal(m(*leaves), torch.full((3,), 8.0))
    assert list(m.state_dict()) == ["w"]
    m64 = copy.deepcopy(m).to(torch.float64)
    m64.w.data.fill_(3.0)                       # the copy calls its own weights, not the original's
    assert torch.equal(m64(*[x.double() for x in leaves]), torch.full((3,), 9.0, dtype=torch.float64))
    assert torch.equal(m(*leaves), torch.full((3,), 8.0))


def test_the_contracts_input_indices_become_leaf_indices():
    from kernelgate.gate.task import flat_contract
    xs = [torch.ones(2), [torch.ones(2), torch.ones(2)], torch.ones(2)]
    shape = structure.shape_of(xs)
    c = Contract(domain=((1, Domain(0.0, 1.0)), (2, Domain(-1.0, 1.0))), vary=(Vary((0, 2), 0, (4,)),))
    f = flat_contract(c, shape, 3)
    assert [i for i, _ in f.domain] == [1, 2, 3] and f.vary[0].inputs == (0, 3)
    assert flat_contract(c, None, 3) is c
