"""kernelgate/native.py: the harness's C mixes give the torch forms' values bit for bit, load only from the
judge's bytes, and leave everything on the torch forms where they cannot load."""
import os
import subprocess
import sys

import pytest
import torch

from kernelgate import digest, native
from kernelgate.sandbox import loop

needs_cc = pytest.mark.skipif(native.compiler() is None, reason="no C compiler")


@pytest.fixture(scope="module")
def loaded():
    data = native.ensure()
    if data is None:
        pytest.skip("the native library did not build here")
    return data


@needs_cc
def test_digests_equal_the_torch_forms_bit_for_bit(loaded):
    g = torch.Generator().manual_seed(3)
    for n in (1, 7, 4096, (1 << 15) + 3, 300_001):
        x = torch.randn(n, generator=g)
        w = digest.words(x)
        assert native.digest_words(w) == digest._digest_torch(w)
        for key in (0, 1, -1, (1 << 62) - 5, 0x7FFFFFFFFFFFFFFF, 123456789):
            assert native.positional_words(w, digest._wrap(key)) == digest._positional_torch(w, key), (n, key)
    # what digest() and positional() return now is the C loop's, and it still sees one ulp and one swap
    x = torch.randn(1000, generator=g, dtype=torch.float64)      # one value a word: a swap of two words
    y = x.clone()
    y[10], y[11] = x[11], x[10]
    assert digest.digest(x) == digest.digest(y) and digest.positional(x, 9) != digest.positional(y, 9)


@needs_cc
def test_fresh_inputs_are_the_same_with_and_without_the_library(loaded):
    x = [None, None, torch.arange(6)]
    scal = [True, True, False]
    code = ("import torch, sys; from kernelgate.sandbox import loop; from kernelgate import native;"
            "x=[torch.randn(64, 33, generator=torch.Generator().manual_seed(1)),"
            " torch.randn(5, generator=torch.Generator().manual_seed(2)).double(), torch.arange(6)];"
            "s=[True, True, False]; out=loop.fresh(x, 1.1, 4242, s, loop.rms(x, s), 'cpu');"
            "assert not native.active(); torch.save(out, sys.argv[1])")
    x[0] = torch.randn(64, 33, generator=torch.Generator().manual_seed(1))
    x[1] = torch.randn(5, generator=torch.Generator().manual_seed(2)).double()
    with_lib = loop.fresh(x, 1.1, 4242, scal, loop.rms(x, scal), "cpu")
    assert native.active()
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kg_native_{os.getpid()}.pt")
    try:
        subprocess.run([sys.executable, "-c", code, path], check=True, timeout=120)
        without = torch.load(path)
    finally:
        if os.path.exists(path):
            os.remove(path)
    assert all(torch.equal(a, b) for a, b in zip(with_lib, without))


def test_only_bytes_load_and_bad_bytes_are_refused():
    code = ("from kernelgate import native; import sys;"
            "assert not native.load(None) and not native.load(b'') and not native.load(b'not a library');"
            "assert not native.active();"
            "import torch; w = torch.arange(4);"
            "assert native.digest_words(w) is None and native.positional_words(w, 0) is None;"
            "assert not native.fresh_floats(torch.empty(4), torch.empty(4), 1, 2, 1.0, 1.0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_without_a_compiler_nothing_is_built_and_the_torch_forms_serve():
    env = dict(os.environ, CC="", PATH="/nonexistent")
    code = ("import sys; from kernelgate import native, digest; import torch;"
            "assert native.compiler() is None and native.ensure() is None and not native.active();"
            "x = torch.randn(100); assert digest.digest(x) == digest._digest_torch(digest.words(x))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)


@needs_cc
def test_a_library_whose_arithmetic_differs_is_not_used():
    """The load checks the library against Python integers: a build of other arithmetic stays unused."""
    code = ("from kernelgate import native; src = native.SOURCE.replace('v >> 29', 'v >> 28');"
            "native.SOURCE = src; data = native.build(); assert data;"
            "assert not native.load(data) and not native.active()")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@needs_cc
@pytest.mark.slow
def test_a_worker_uses_the_library_from_the_judges_bytes(loaded):
    """The worker opens the bytes the judge sends with its prime (no file of its own), and without them it
    stays on the torch forms."""
    from kernelgate.sandbox import Worker
    with Worker() as w:
        assert w.request({"op": "prime", "device": "cpu", "native": loaded}, timeout=120)["native"] is True
    with Worker() as w:
        assert w.request({"op": "prime", "device": "cpu"}, timeout=120)["native"] is False


@needs_cc
def test_the_fused_fresh_input_equals_the_torch_ops_bit_for_bit(loaded):
    """kg_fresh_floats rounds each product and sum to float32 on its own, as the separate torch ops do, on every
    length (the vector body and the tails) and scale."""
    g = torch.Generator().manual_seed(11)
    for n in (1, 5, 8, 15, 4095, 4096, 4099, 100_003):
        x = torch.randn(n, generator=g) * 3
        for seed, s, r in ((1, 1.0, 1.0), (77, 0.75, 0.3), (2 ** 61 + 5, 1.3299, 17.5)):
            a, b = loop._noise_ab(seed)
            c = loop.UNIT * loop.NOISE * r
            want = loop.cpu_noise_bytes(n, seed).float().sub_(loop.MID).mul_(c).add_(torch.mul(x, s))
            got = torch.full((n,), float("nan"))
            assert native.fresh_floats(got, x, a, b, c, s)
            assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (n, seed, s)
    assert not native.fresh_floats(torch.empty(4), torch.empty(5), 1, 2, 1.0, 1.0)
    assert not native.fresh_floats(torch.empty(4).double(), torch.empty(4).double(), 1, 2, 1.0, 1.0)


@needs_cc
@pytest.mark.slow
def test_a_call_set_on_the_pointers_class_sends_the_harness_to_the_torch_forms():
    """Red team 51: the pointers' class is reachable (`_CFuncPtr.__subclasses__()`) and a `__call__` set there runs
    instead of the C function, with no audit event; the harness's functions then serve the torch forms."""
    code = ("import ctypes, torch; from kernelgate import native, digest; d = native.ensure(); assert d;"
            "x = torch.randn(1000); want = digest._positional_torch(digest.words(x), 5);"
            "assert native.positional_words(digest.words(x), 5) == want;"
            "[setattr(c, '__call__', lambda self, *a: 0) for c in ctypes._CFuncPtr.__subclasses__()"
            " if c.__name__ == '_FuncPtr'];"
            "assert native.positional_words(digest.words(x), 5) is None and native.digest_words(digest.words(x)) is None;"
            "assert not native.fresh_floats(torch.empty(4), torch.empty(4), 1, 2, 1.0, 1.0);"
            "assert digest.positional(x, 5) == want and digest.digest(x) == digest._digest_torch(digest.words(x))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
