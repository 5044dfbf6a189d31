"""The worker's timed loop (kernelgate/sandbox/loop.py)."""
import torch

from kernelgate.sandbox import loop as timing


def test_timed_loop_takes_steps_one_at_a_time_and_reports_each():
    """The judge feeds the steps: the loop asks for the next one only after answering the last."""
    fed, seen = [], []

    def steps():
        for k in range(3):
            fed.append(k)
            assert len(seen) == k            # the previous iteration was answered before this step was read
            yield (0, 1.0, 10 + k)
    xs = [torch.randn(4, 4)]
    make = lambda j, s, seed: timing.fresh(xs, s, seed, [True], timing.rms(xs, [True]), "cpu")
    timing.timed_loop(lambda x: x * 2, make, steps(), "cpu", 0,
                      lambda i, inputs, out, ms: seen.append((i, bool(torch.equal(out, inputs[0] * 2)), ms >= 0)))
    assert fed == [0, 1, 2] and seen == [(0, True, True), (1, True, True), (2, True, True)]
