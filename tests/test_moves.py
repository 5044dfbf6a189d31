"""moves.py: inputs as the oracle moves them (fp64 a chunk at a time, one ulp, one element of a batch)."""
import torch

from kernelgate.moves import batch_axis, batch_moved, problems


def test_one_ulp_moves_every_float_element_one_unit_and_leaves_the_rest():
    """The ill-conditioned trial's moved inputs (gate/session.py `ill`): each float element one unit in the last
    place of its dtype up or down, infinities, NaN and integer tensors as they were, the largest finite value never to infinity."""
    from kernelgate.moves import one_ulp
    big = torch.finfo(torch.float32).max
    x = torch.tensor([1.0, -3.5, 0.0, float("inf"), float("nan"), big, 1e-30] * 40)
    y = one_ulp(x, "cpu", 7)
    up = torch.nextafter(x, torch.full_like(x, float("inf")))
    down = torch.nextafter(x, torch.full_like(x, float("-inf")))
    finite = torch.isfinite(x)
    assert bool(((y == up) | (y == down))[finite].all()) and bool(torch.isfinite(y[finite]).all())
    assert bool((y[finite] != x[finite]).all())
    assert bool((y != up)[finite].any()) and bool((y != down)[finite].any())       # both ways
    assert torch.equal(y[torch.isinf(x)], x[torch.isinf(x)]) and bool(torch.isnan(y[torch.isnan(x)]).all())
    ids = torch.arange(5)
    assert one_ulp(ids, "cpu", 7) is not None and torch.equal(one_ulp(ids, "cpu", 7), ids)
    assert torch.equal(one_ulp(x, "cpu", 7)[finite], y[finite])           # the draw is the seed's
    h = torch.randn(64).half()
    assert bool(((one_ulp(h, "cpu", 1) - h).abs() > 0).all()) and one_ulp(h, "cpu", 1).dtype == torch.float16


def test_batch_moved_copies_the_inputs_and_moves_one_element_of_the_batched_float_ones():
    """oracle.Oracle.separable: element j along every float input's first dimension of the batch's length, moved by
    noise of its own scale (never an affine change: one-hot rows doubled stay singular); the rest bit-identical
    copies."""
    M, b, ids, w = torch.randn(6, 3, 4), torch.zeros(6, 3), torch.arange(6), torch.randn(5, 3)
    s = torch.randn(2, 6)                                          # batched along its second dimension
    xs = [M, b, ids, w, s, 2.5]
    same = batch_moved(xs, "cpu")
    assert all(torch.equal(x, y) and x is not y for x, y in zip(xs[:5], same[:5])) and same[5] == 2.5
    moved = batch_moved(xs, "cpu", 6, 4)
    for x, y in zip((M, b, s.T), (moved[0], moved[1], moved[4].T)):
        assert torch.equal(torch.cat([x[:4], x[5:]]), torch.cat([y[:4], y[5:]]))
        assert bool((x[4] != y[4]).all())                         # zeros moved too (scale at least 1)
    assert torch.equal(moved[2], ids) and torch.equal(moved[3], w)   # integers and another length kept
    assert torch.equal(M, xs[0])                                  # the caller's inputs untouched
    assert batch_axis(M, 6) == 0 and batch_axis(s, 6) == 1 and batch_axis(ids, 6) is None
    assert batch_axis(w, 6) is None and batch_axis(2.5, 6) is None
    assert not torch.equal(batch_moved(xs, "cpu", 6, 4)[0], moved[0])     # a fresh secret draw each time


def test_problems_are_the_outputs_dimensions_and_blocks_of_an_inputs_length():
    """The ways Oracle.separable tries: along each dimension of the output, and blocks of its flattened elements
    one per element of an input's dimension (a batch's solutions returned flattened)."""
    xs = [torch.randn(64, 8, 12), torch.randn(64, 8), torch.arange(5)]
    ways = problems((512,), xs)
    assert [n for n, _ in ways] == [512, 8, 64]                    # the integer input's 5 is no batch
    t = torch.arange(512.0)
    assert torch.equal(ways[2][1](t)[3], t[24:32])
    cols = problems((8, 64), xs)
    assert [n for n, _ in cols] == [8, 64]                         # the dimensions; no blocks of their lengths
    x = torch.randn(8, 64)
    assert torch.equal(cols[1][1](x)[5], x[:, 5])
