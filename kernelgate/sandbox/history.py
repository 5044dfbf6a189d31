"""Earlier judged calls' inputs and outputs, held by the harness as a caller holds them, and read again later.

A caller keeps what it passed in and what it got back: the previous batch it logs, the outputs it appends to a
list. Red team 35 wrote over the previous call's input on the next call, wrote over the output it had returned on
a later call (only after a pause: the timed loop comes back at once), and handed back the same output object when
an input repeated; red team 36 did the same two or more calls back, and wrote results into a ring of 16 output
buffers. The harness holds the last `DEPTH` judged calls' tensors (their outputs up to `HOLD_BYTES`) with digests
of their bytes taken right after each call: after every call the previous call's are read again and no output may
live in the memory of one still held; after the trials (`deep`), every held call's. A buffer the judge writes
new inputs into (a slot reused) is let go from then on. Kept in the full memory plan only: the lean plan holds one
call's worth (docs/GATE.md, known gaps). Imports nothing of the gate: this runs in the candidate's process.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..digest import positional
from . import handle

DEPTH = 32                  # judged calls held (a ring of as many output buffers is found)
HOLD_BYTES = 4 << 30        # earlier outputs held at most (the oldest calls let go first)


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


def _sig(t: torch.Tensor, key: int) -> tuple:
    """What a caller's tensor is: its metadata (handle._meta: storage, view bits) and its whole storage's digest, one
    that depends on where each word lies and on a secret key (red team 37 reversed the order of a held output's words
    under an order-free digest)."""
    return handle._meta(t), positional(handle._whole(t), key)


def state_sigs(named: Any, key: int, unclean: Callable[[Any], str | None]) -> Any:
    """[(name, signature)] of the module's parameters and buffers, as `jobs.state_of` handed them (detached: plain
    tensors), or the error reply where one is not a plain tensor. A forward may not change its caller's weights or
    buffers (red team 36 zeroed the weights, red team 37 a buffer, after computing from private copies)."""
    out = []
    for name, t in named if type(named) is list else ():
        why = unclean(t)
        if why:
            return {"error": "introspection", "message": why}
        # its values, not where they lie: a level may lay the weights out anew (channels_last) with the same values
        out.append((str(name), tuple(t.shape), t.dtype, positional(t, key)))
    return out


class Earlier:
    """The last judged calls, oldest first: [inputs, their signatures, outputs, theirs] each."""

    def __init__(self, key: int = 0) -> None:
        self.key = key                   # the digests' secret (drawn by the harness before any candidate code)
        self.held: list[list[list]] = []
        self.dropped: list[Any] = []     # let go since the last `let_go`: for the runner to drop (runner.py)

    def let_go(self) -> list[Any]:
        dropped, self.dropped = self.dropped, []
        return dropped

    def take(self) -> Any:
        """What is held, given up (for the runner to drop: runner.py, `dispose`); None when nothing is."""
        held, self.held = self.held, []
        return held or None

    def check(self, xs: list[Any], outs: list[torch.Tensor], unclean: Callable[[Any], str | None],
              deep: bool = False) -> dict | None:
        """The error reply when the call just made (inputs `xs`, outputs `outs`) changed what an earlier one handed
        over or got back (the previous call's; with `deep`, every held call's), or returned memory of a held output;
        None when all is as it was."""
        now = _spans(xs)                 # buffers this call's inputs were written into: new values, let go
        for entry in self.held:
            for k in (0, 2):
                keep = [j for j, t in enumerate(entry[k]) if not (isinstance(t, torch.Tensor) and _overlaps(t, now))]
                self.dropped.append(entry[k])
                entry[k], entry[k + 1] = [entry[k][j] for j in keep], [entry[k + 1][j] for j in keep]
        for entry in self.held:
            for t in [t for t in entry[0] + entry[2] if isinstance(t, torch.Tensor)]:
                why = unclean(t)         # the candidate may have had it since: checked before any use
                if why:
                    return {"error": "introspection", "message": why}
        back = len(self.held)
        err = self._compare(self.held if deep else self.held[-1:], back if deep else 1)
        if err:
            return err
        held = _spans([o for entry in self.held for o in entry[2]])
        for k, o in enumerate(outs):
            if isinstance(o, torch.Tensor) and not _overlaps(o, now) and _overlaps(o, held):
                return {"error": "aliasing", "message": f"output {k} lives in the memory of an earlier call's output, "
                        "which the caller still holds (each call's outputs are new tensors)"}
        return None

    def _compare(self, entries: list[list[list]], back: int) -> dict | None:
        """The error reply for the first of `entries` (the oldest `back` calls back) whose tensors changed."""
        try:
            for n, (pxs, psigs, pouts, posigs) in enumerate(entries):
                when = "the previous call" if back - n == 1 else f"the call {back - n} calls back"
                for x, s in zip(pxs, psigs):
                    if _sig(x, self.key) != s:
                        return {"error": "input_mutated", "message": f"an input of {when} was modified later (a "
                                "caller's earlier input is its own)"}
                for o, s in zip(pouts, posigs):
                    if _sig(o, self.key) != s:
                        return {"error": "aliasing", "message": f"an output of {when} changed later (a caller keeps "
                                "the outputs it was given)"}
        except Exception as e:  # noqa: BLE001 - an output freed under the caller (CUDA graph trees overwrite theirs)
            return {"error": "aliasing", "message": f"an earlier call's tensors could not be read again "
                    f"({type(e).__name__}): a caller keeps what it passed and got back"}
        return None

    def keep(self, xs: list[Any], outs: list[torch.Tensor]) -> dict | None:
        """Hold this call's inputs and outputs with their signatures, as they are right after the call; the oldest
        calls past DEPTH (or HOLD_BYTES) are read a last time as they are let go: the error reply if one changed."""
        ins = [x for x in xs if isinstance(x, torch.Tensor)]
        self.held.append([ins, [_sig(x, self.key) for x in ins], list(outs), [_sig(o, self.key) for o in outs]])
        err = None
        while len(self.held) > DEPTH or (len(self.held) > 1 and sum(
                o.untyped_storage().nbytes() for e in self.held for o in e[2]) > HOLD_BYTES):
            err = err or self._compare(self.held[:1], len(self.held))
            self.dropped.append(self.held.pop(0))
        return err
