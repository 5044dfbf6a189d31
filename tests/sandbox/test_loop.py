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


def test_cpu_noise_is_unit_variance_deterministic_and_no_shift_of_another_seeds():
    """The CPU's noise (a keyed integer mix, about an eighth of randn's cost): mean 0, variance 1, the same
    bits for the same seed, and one seed's values are neither equal to, nor a shift of, a neighbouring
    seed's (a linear layer could otherwise precompute the noise's part of its output)."""
    n = 1 << 16
    a, again, b = timing.cpu_noise(n, 1234567), timing.cpu_noise(n, 1234567), timing.cpu_noise(n, 1234568)
    assert torch.equal(a, again) and a.dtype == torch.float32 and a.shape == (n,)
    assert abs(float(a.mean())) < 0.02 and abs(float(a.std()) - 1.0) < 0.02
    assert len(torch.unique(timing.cpu_noise_bytes(n, 99))) == 256         # every byte value occurs
    for k in range(0, 9):                                                    # seed + 1 is no shift of seed
        c = torch.corrcoef(torch.stack([a[k:], b[:n - k]]))[0, 1]
        assert abs(float(c)) < 0.03, k
    high = timing.cpu_noise(n, 1234567 + (1 << 31))                          # the seed's high bits count too
    assert abs(float(torch.corrcoef(torch.stack([a, high]))[0, 1])) < 0.03
    assert timing.cpu_noise(3, 5).shape == (3,) and timing.cpu_noise(0, 5).numel() == 0


def test_fresh_inputs_on_the_cpu_carry_noise_of_the_set_size_per_input():
    """Each input gets its own noise (no two inputs of an iteration share it), of NOISE times its RMS."""
    x = torch.randn(256, 256)
    xs = [x, x.clone()]
    r = timing.rms(xs, [True, True])
    a, b = timing.fresh(xs, 1.0, 77, [True, True], r, "cpu")
    na, nb = a - x, b - x
    assert not torch.equal(na, nb)
    assert abs(float(na.std()) / (timing.NOISE * r[0]) - 1) < 0.05
    h = timing.fresh([x.half()], 1.0, 77, [True], timing.rms([x.half()], [True]), "cpu")[0]
    assert h.dtype == torch.float16 and bool(torch.isfinite(h).all())


def test_inputs_with_a_declared_domain_move_inside_it_every_iteration():
    """A declared domain's input gets fresh values inside the domain each iteration (no two alike, no pool entry
    repeated), bit for bit again from the same seed; bounded, half-bounded either way, and low-precision dtypes."""
    g = torch.Generator().manual_seed(0)
    cases = [([-1.0, 1.0], torch.rand(64, 32, generator=g) * 2 - 1), ([0.0, float("inf")], torch.rand(64, 32, generator=g) * 5),
             ([float("-inf"), 2.0], 2 - torch.rand(64, 32, generator=g) * 3), ([0.0, 1.0], torch.rand(64, 32, generator=g).half())]
    for dom, x in cases:
        ok = [dom]
        r = timing.rms([x], ok)
        a = timing.fresh([x], 1.2, 11, ok, r, "cpu")[0]
        b = timing.fresh([x], 1.2, 12, ok, r, "cpu")[0]
        again = timing.fresh([x], 1.2, 11, ok, r, "cpu")[0]
        assert a.dtype == x.dtype and torch.equal(a, again) and not torch.equal(a, b) and not torch.equal(a, x)
        for y in (a, b):
            assert bool((y >= dom[0]).all()) and bool((y <= dom[1]).all()), dom
            assert float((y.float() - x.float()).abs().mean()) > 1e-3, dom


def test_inputs_drawn_afresh_keep_nothing_of_the_pool_entrys_arrangement():
    """BOOTSTRAP: the entry's own values at fresh positions, scaled and noised (the values' distribution kept: a
    positive input stays positive); FRESH: values at the entry's RMS times the scale, continuous on the CPU (no
    256-level grid a candidate could tabulate a function on: red team 58). Both rebuilt bit for bit from the seed
    (float32 through the C pass, float16 through torch's ops), uncorrelated with the entry and each other."""
    x = torch.rand(128, 64) * 3 + 0.5
    for xs in (x, x.half()):
        for mark in (timing.BOOTSTRAP, timing.FRESH):
            ok = [mark]
            r = timing.rms([xs], ok)
            a, b = (timing.fresh([xs], 1.2, seed, ok, r, "cpu")[0] for seed in (5, 6))
            assert a.dtype == xs.dtype and torch.equal(a, timing.fresh([xs], 1.2, 5, ok, r, "cpu")[0])
            af, bf, xf = a.float().flatten(), b.float().flatten(), xs.float().flatten()
            assert abs(float(af.pow(2).mean().sqrt()) / (1.2 * r[0]) - 1) < 0.05
            for u, v in ((af, xf), (af, bf)):
                corr = float(torch.corrcoef(torch.stack([u, v - v.mean()]))[0, 1])
                assert abs(corr) < 0.05, (mark, corr)
            if mark == timing.BOOTSTRAP:
                assert float(af.min()) > 0                        # the entry's values (0.5 or more), scaled, noised
            elif xs.dtype == torch.float32:
                assert af.unique().numel() > 4000                 # continuous, not 256 levels
    d = torch.rand(64, 32) * 0.1 + 0.2
    y = timing.fresh([d], 1.0, 9, [[0.0, 1.0, timing.BOOTSTRAP]], [0.0], "cpu")[0]
    assert bool((y >= 0).all()) and bool((y <= 1).all())
    assert abs(float(torch.corrcoef(torch.stack([y.flatten(), d.flatten()]))[0, 1])) < 0.2


def test_the_timing_pool_varies_declared_domains_and_copies_integers_the_reference_refuses_redrawn():
    from types import SimpleNamespace

    from kernelgate.gate.task import timing_pool
    from kernelgate.records import Contract, Domain
    xs = [torch.rand(4, 4), torch.rand(4, 4), torch.arange(4), torch.rand(4)]
    task = SimpleNamespace(inputs=lambda seed: [x.clone() for x in xs],
                           oracle=SimpleNamespace(resampled={2: False}, drawn_fresh={}), contract=Contract(
        domain=((1, Domain(-1.0, 1.0)), (3, Domain(float("-inf"), float("inf"))))))
    pool, scalable = timing_pool(task, 2, torch.Generator().manual_seed(0))
    assert len(pool) == 2 and scalable == [True, [-1.0, 1.0], False, True]


def test_a_masked_draw_is_its_bytes_only_with_its_steps_seed():
    """The workload's own draws reach the worker masked by the seed of the step that calls them (red team 66 read a
    batch's draws from its own memory before the clock): `fresh` with that seed gives back every bit, layout and
    dtype (a transposed input comes back contiguous), another seed gives other bytes, and the pool holds no byte
    run of the input."""
    from kernelgate.sandbox import loop
    xs = [torch.randn(16, 33), torch.arange(12).reshape(3, 4), torch.rand(7) > 0.5, torch.randn(5, 6).t(),
          torch.randn(3, 2, dtype=torch.complex64), torch.tensor(2.5), 7]
    seed = 0x1234_5678_9ABC
    sent = [loop.masked(x, seed, k) if isinstance(x, torch.Tensor) else (x, False) for k, x in enumerate(xs)]
    pool, marks = [s[0] for s in sent], [s[1] for s in sent]
    got = loop.fresh(pool, 1.0, seed, marks, [0.0] * len(xs), "cpu")
    for x, y in zip(xs, got):
        if isinstance(x, torch.Tensor):
            assert y.dtype == x.dtype and y.shape == x.shape and y.is_contiguous()
            assert torch.equal(y, x.contiguous())
        else:
            assert y == x
    wrong = loop.fresh(pool, 1.0, seed + 1, marks, [0.0] * len(xs), "cpu")
    assert not torch.equal(wrong[0], xs[0]) and not torch.equal(wrong[1], xs[1])
    raw = xs[0].numpy().tobytes()
    assert raw[:64] not in pool[0].numpy().tobytes()


def test_the_cpu_keystream_is_an_extendable_output_hash_of_the_seed():
    """Known bytes of a masked draw (a workload's zeros, pads, high bytes of small integers) must not give the rest
    away: on the CPU the keystream is SHAKE-128 of the seed, not `cpu_noise_bytes` (whose a*i + b under an
    invertible mix gives a and b from two known words)."""
    import hashlib
    from kernelgate.sandbox import loop
    want = hashlib.shake_128(b"kernelgate draw " + (12345).to_bytes(8, "little")).digest(100)
    assert bytes(loop.keystream(100, 12345, "cpu").tolist()) == want
    assert not torch.equal(loop.keystream(100, 12346, "cpu"), loop.keystream(100, 12345, "cpu"))
    assert loop.keystream(0, 1, "cpu").numel() == 0


def test_a_list_of_tensors_is_masked_tensor_by_tensor():
    """Red team 69: tensors inside a list, tuple or dict argument reached the worker in plain. Each is masked with a
    seed of its own place; `fresh` with the step's seed gives the structure back bit for bit."""
    from kernelgate.sandbox import loop
    x = [torch.randn(64), (torch.arange(5), 3.5), {"a": torch.rand(3, 3) > 0.5, "b": "tag"}]
    seed = 987654321
    sent, mark = loop.masked_tree(x, seed, 1)
    assert mark and mark[loop.MASKED] == loop.TREE and mark["dtypes"] == ["float32", "int64", "bool"]
    assert x[0].numpy().tobytes()[:32] not in sent[0].numpy().tobytes()
    back = loop.fresh([torch.zeros(1), sent], 1.0, seed, [False, mark], [0.0, 0.0], "cpu")[1]
    assert torch.equal(back[0], x[0]) and torch.equal(back[1][0], x[1][0]) and back[1][1] == 3.5
    assert isinstance(back[1], tuple) and torch.equal(back[2]["a"], x[2]["a"]) and back[2]["b"] == "tag"
    assert loop.masked_tree([1.0, 2], seed, 0) == ([1.0, 2], False)
