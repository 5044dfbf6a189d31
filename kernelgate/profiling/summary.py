"""Summary of a profile for the search and the report: signals about a verified candidate, from its worker.

After a candidate is accepted and timed, the search profiles it where it was timed (a few forwards
under torch.profiler: launches.py), classifies its bottleneck (bottleneck.py) and takes its
machine-code fingerprint (fingerprint.py). The session is the search's (a `gate.judge.Session` whose
worker holds the built candidate), passed in: nothing here imports the gate or the search. The record
is a plain dict on the Evaluation:

    {"bound": "memory", "bottleneck": "memory-bound: ...", "kernels_per_forward": 7.0,
     "gap_share": 0.12, "forward_us": 331.0, "fingerprint": {...}, "distance_to_best": {...}}

Refiners read "bound" to order what they stack next; the report plots fingerprint distance to the
best candidate against runtime. These are signals only: nothing here can accept or reject a candidate.
"""
from __future__ import annotations

import logging
from typing import Any

from . import bottleneck, fingerprint, launches

log = logging.getLogger(__name__)


def observe(session: Any, *, warmup: int = 1, forwards: int = 3) -> dict[str, Any]:
    """Profile the model `session`'s worker has built and summarise it (raises on a failed profile)."""
    task = session.task
    prof, arts = launches.profile_live(session, task.given, warmup=warmup, forwards=forwards,
                                       artifacts=not task.device.startswith("cpu"))
    if getattr(task, "lean", False):      # the lean memory plan: the profile's data goes back (its cache, regions)
        session.release()
    b = bottleneck.classify(task.floor, prof)
    return {"bound": b.kind, "bottleneck": b.line, "kernels_per_forward": round(prof.kernels_per_forward, 3),
            "gap_share": round(prof.gap_share, 4), "forward_us": round(prof.forward_median_us, 3),
            # PTX / TTGIR histograms: disassembling every cubin to SASS would cost seconds per candidate
            # inside the search's budget (`kernelgate profile` does it)
            "fingerprint": fingerprint.build(prof, arts, sass=False).to_json()}


def try_observe(session: Any, notes: list[str], label: str) -> dict[str, Any] | None:
    """`observe`, with a failure turned into a note (a profile is never a reason to lose a candidate)."""
    try:
        return observe(session)
    except Exception as e:  # noqa: BLE001
        note = f"no profile for {label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if note not in notes:
            notes.append(note)
        log.info(note)
        return None


def distance(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fingerprint distance between two insight records (None when either has no fingerprint)."""
    if not a or not b or not a.get("fingerprint") or not b.get("fingerprint"):
        return None
    d = fingerprint.distance(fingerprint.from_json(a["fingerprint"]), fingerprint.from_json(b["fingerprint"]))
    return {"value": round(d.value, 6), "basis": d.basis}
