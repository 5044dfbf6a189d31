"""The worker's attribution of threads (kernelgate/sandbox/sensors.py): torch's own threads are allowed, the candidate's are not."""
import os
import threading

import torch

from kernelgate.sandbox import sensors as worker


def _module(name: str, src: str, filename: str = "<test>", **names):
    g = {"__name__": name, "threading": threading, **names}
    exec(compile(src, filename, "exec"), g)
    return g


TORCH_FILE = os.path.join(os.path.dirname(torch.__file__), "_inductor", "fake.py")   # code that lives in torch


def test_a_library_between_torch_and_the_thread_is_attributed_to_torch():
    lib = _module("somelib._monitor", "def start():\n    t = threading.Thread(target=lambda: None)\n"
                                      "    t.start()\n    return t\n")
    inductor = _module("torch._inductor.fake", "def via():\n    return start()\n", TORCH_FILE, start=lib["start"])
    cand = _module("kernelgate_candidate", "def direct():\n    return start()\n"
                                           "def through_torch():\n    return via()\n",
                   start=lib["start"], via=inductor["via"])
    t1 = cand["through_torch"]()        # candidate -> torch -> library -> Thread.start: torch's
    t2 = cand["direct"]()               # candidate -> library -> Thread.start: the candidate's
    t3 = lib["start"]()                 # neither on the stack: the first frame outside the plumbing
    for t in (t1, t2, t3):
        t.join()
    assert worker._THREAD_ORIGIN[t1] == "torch._inductor.fake" and worker._torch_owned(t1)
    assert worker._THREAD_ORIGIN[t2] == "kernelgate_candidate" and not worker._torch_owned(t2)
    assert worker._THREAD_ORIGIN[t3] == "somelib._monitor" and not worker._torch_owned(t3)


def test_a_module_that_only_calls_itself_torch_is_not_torch():
    """exec(..., {"__name__": "torch._inductor.x"}) from the candidate's file: the code lives elsewhere."""
    lib = _module("somelib._monitor", "def start():\n    t = threading.Thread(target=lambda: None)\n"
                                      "    t.start()\n    return t\n")
    forged = _module("torch._inductor.async_compile", "def via():\n    return start()\n", "/tmp/cand.py",
                     start=lib["start"])
    cand = _module("kernelgate_candidate", "def go():\n    return via()\n", via=forged["via"])
    t = cand["go"]()
    t.join()
    assert worker._THREAD_ORIGIN[t] == "kernelgate_candidate" and not worker._torch_owned(t)


def test_output_containers_are_plain_tuples_lists_or_torch_result_tuples():
    """A candidate's subclass of list or tuple could run its code as the harness iterates it: refused
    unopened; torch's own result tuples (torch.max(x, 1)) are outputs like any tuple."""
    import torch
    from kernelgate.sandbox.sensors import _tensors, describe_output
    x = torch.randn(4, 5)
    ran = []

    class Outs(list):
        def __iter__(self):
            ran.append(1)
            return list.__iter__(self)

    bad = describe_output(Outs([x]), [], "cpu")
    assert bad["error"] == "output_type" and "subclass of list" in bad["message"]
    assert _tensors(Outs([x])) == [] and not ran
    ok = describe_output(torch.max(x, 1), [], "cpu")
    assert "error" not in ok and not ok["single"] and len(ok["tensors"]) == 2
    assert len(_tensors((x, [x]))) == 2


def test_backend_switches_and_flush_to_zero_are_numerics_flags():
    from kernelgate.sandbox import sensors
    before = sensors.numerics_flags()
    assert before["flush_denormal"] is False and before["mkldnn.enabled"] is torch.backends.mkldnn.enabled
    try:
        torch.backends.mkldnn.enabled = not before["mkldnn.enabled"]
        if torch.set_flush_denormal(True):                    # False where the CPU has no such mode
            assert sensors.numerics_flags()["flush_denormal"] is True
        assert sensors.numerics_flags()["mkldnn.enabled"] is not before["mkldnn.enabled"]
    finally:
        torch.set_flush_denormal(False)
        torch.backends.mkldnn.enabled = before["mkldnn.enabled"]
    assert sensors.numerics_flags() == before


def test_a_reseed_to_a_fixed_seed_changes_the_secretly_seeded_generators():
    from kernelgate.sandbox import sensors
    drawn = sensors.rng_fresh("cpu")
    assert sensors.rng_state("cpu") == drawn
    torch.manual_seed(0)                      # the same state after every call: seen against a secret seed
    assert sensors.rng_state("cpu") != drawn
    drawn = sensors.rng_fresh("cpu")
    torch.randn(2)
    assert sensors.rng_state("cpu") != drawn


def test_outputs_that_require_grad_or_are_conjugate_views_are_described():
    from kernelgate.sandbox.sensors import describe_output
    leaf = torch.ones(3, requires_grad=True)
    assert describe_output(leaf, [], "cpu")["error"] == "output_type"
    z = torch.randn(3, dtype=torch.complex64)
    assert describe_output(z.conj(), [], "cpu")["meta"][0]["conj"] is True
    assert describe_output(z, [], "cpu")["meta"][0]["conj"] is False


def test_python_and_numpy_reseeds_change_the_secretly_seeded_state():
    import random
    import numpy as np
    from kernelgate.sandbox import sensors
    drawn = sensors.rng_fresh("cpu")
    random.seed(0)
    assert sensors.rng_state("cpu") != drawn
    drawn = sensors.rng_fresh("cpu")
    np.random.seed(0)
    assert sensors.rng_state("cpu") != drawn


def test_modules_loaded_from_the_reference_file_are_named_and_others_of_its_name_are_not(tmp_path):
    import sys
    import types
    ref = tmp_path / "ref" / "model.py"
    other = tmp_path / "other" / "model.py"
    for p in (ref, other):
        p.parent.mkdir()
        p.write_text("x = 1\n")
    mods = {"kg_test_loaded_ref": ref, "kg_test_same_name": other}
    for name, path in mods.items():
        m = types.ModuleType(name)
        m.__file__ = str(path)
        sys.modules[name] = m
    try:
        assert worker.loaded_as(os.path.realpath(ref)) == ["kg_test_loaded_ref"]
        assert worker.loaded_as("") == []
    finally:
        for name in mods:
            sys.modules.pop(name, None)
