"""The search's profile summary (kernelgate/profiling/summary.py)."""
from types import SimpleNamespace

import pytest

from kernelgate.profiling import summary


@pytest.mark.parametrize("lean", [True, False])
def test_a_profile_in_the_lean_plan_gives_the_workers_memory_back(monkeypatch, lean):
    """In the lean memory plan a profiled worker releases what its forwards left (a task's worth of cached
    blocks and both shared regions) before the next implementation runs; in the default plan it keeps them."""
    released = []
    session = SimpleNamespace(task=SimpleNamespace(given=[], device="cpu", lean=lean, floor=None),
                              release=lambda: released.append(1))
    monkeypatch.setattr(summary.bottleneck, "classify", lambda floor, prof: SimpleNamespace(kind="memory", line=""))
    monkeypatch.setattr(summary, "fingerprint", SimpleNamespace(build=lambda *a, **k: SimpleNamespace(to_json=dict)))
    prof = SimpleNamespace(kernels_per_forward=1.0, gap_share=0.0, forward_median_us=1.0)
    monkeypatch.setattr(summary.launches, "profile_live", lambda *a, **k: (prof, None))
    out = summary.observe(session)
    assert out["bound"] == "memory" and released == ([1] if lean else [])
