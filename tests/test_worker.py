"""The worker's attribution of threads: torch's own threads are allowed, the candidate's are not."""
import threading

from kernelgate import worker


def _module(name: str, src: str, **names):
    g = {"__name__": name, "threading": threading, **names}
    exec(src, g)
    return g


def test_a_library_between_torch_and_the_thread_is_attributed_to_torch():
    lib = _module("somelib._monitor", "def start():\n    t = threading.Thread(target=lambda: None)\n"
                                      "    t.start()\n    return t\n")
    inductor = _module("torch._inductor.fake", "def via():\n    return start()\n", start=lib["start"])
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
