"""The previous judged call's inputs and outputs, held by the harness as a caller holds them, and read again after
the next call.

A caller keeps what it passed in and what it got back: the previous batch it logs, the output it appends to a
list. Red team 35 wrote over the previous call's input on the next call, wrote over the output it had returned on
a later call (only after a pause: the timed loop comes back at once), and handed back the same output object when
an input repeated (the caller's two results are then one). After each judged call the harness reads the previous
call's tensors again: inputs (whose buffers this call did not reuse) and outputs must hold the bits they held, and
no output of this call may live in the memory of a previous output still held. Kept in the full memory plan only:
the lean plan holds one call's worth (docs/GATE.md, known gaps). Imports nothing of the gate: this runs in the
candidate's process.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from . import handle


def _spans(ts: list[Any]) -> list[tuple[int, int]]:
    out = []
    for t in ts:
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            st = t.untyped_storage()
            out.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
    return out


def _overlaps(t: torch.Tensor, spans: list[tuple[int, int]]) -> bool:
    if t.numel() == 0:
        return False
    st = t.untyped_storage()
    lo, hi = st.data_ptr(), st.data_ptr() + st.nbytes()
    return any(lo < b and a < hi for a, b in spans)


class Earlier:
    """The last judged call's (inputs, their snapshots, outputs, their copies), or None."""

    def __init__(self) -> None:
        self.held: tuple[list, list, list, list] | None = None

    def take(self) -> Any:
        """What is held, given up (for the runner to drop: runner.py, `dispose`)."""
        held, self.held = self.held, None
        return held

    def check(self, xs: list[Any], outs: list[torch.Tensor], unclean: Callable[[Any], str | None]) -> dict | None:
        """The error reply when the call just made (inputs `xs`, outputs `outs`) changed what the previous one
        handed over or got back, or returned memory of its outputs; None when all is as it was."""
        if self.held is None:
            return None
        pxs, psnaps, pouts, pcopies = self.held
        for t in [t for t in pxs + pouts if isinstance(t, torch.Tensor)]:
            why = unclean(t)                      # the candidate may have had it since: checked before any use
            if why:
                return {"error": "introspection", "message": why}
        now = _spans(xs)                          # buffers this call's inputs were written into: new values there
        try:
            for i, (x, s) in enumerate(zip(pxs, psnaps)):
                if s is not None and isinstance(x, torch.Tensor) and not _overlaps(x, now) \
                        and handle.changed([x], [s]):
                    return {"error": "input_mutated", "message": f"input {i} of the previous call was modified by "
                            "the next call (a caller's earlier input is its own)"}
            for k, (o, c) in enumerate(zip(pouts, pcopies)):
                if not _overlaps(o, now) and handle.changed([o], [c]):
                    return {"error": "aliasing", "message": f"output {k} of the previous call changed during the "
                            "next call (a caller keeps the outputs it was given)"}
        except Exception as e:  # noqa: BLE001 - an output freed under the caller (CUDA graph trees overwrite theirs)
            return {"error": "aliasing", "message": f"the previous call's tensors could not be read after the next "
                    f"call ({type(e).__name__}): a caller keeps what it passed and got back"}
        held = _spans([o for o in pouts if not _overlaps(o, now)])   # (an in-place output lives in an input buffer)
        for k, o in enumerate(outs):
            if isinstance(o, torch.Tensor) and not _overlaps(o, now) and _overlaps(o, held):
                return {"error": "aliasing", "message": f"output {k} lives in the memory of an output of the previous "
                        "call, which the caller still holds (each call's outputs are new tensors)"}
        return None

    def keep(self, xs: list[Any], snaps: list | None, outs: list[torch.Tensor]) -> None:
        """Hold this call's inputs and outputs (`snaps`: the inputs' snapshots if they are still as taken, else None
        to take them now) with copies to compare against after the next call."""
        self.held = (list(xs), snaps if snaps is not None else handle.snapshot(xs), list(outs),
                     [handle.snapshot([o])[0] for o in outs])
