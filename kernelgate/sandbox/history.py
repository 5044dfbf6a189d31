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

from ..digest import positional, positional_many
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
    tensors, each with whether it requires grad and which parameter object it came from), or the error reply where
    one is not a plain tensor. A forward may not change its caller's weights or buffers (red team 36 zeroed the
    weights, red team 37 a buffer, after computing from private copies), nor swap the parameter objects an optimizer
    holds or their requires_grad (red team 38: an optimizer built before the first call trained nothing)."""
    if type(named) is str:                   # jobs.handles_fault: what a caller's training gets is wrong
        return {"error": "build_error", "message": named[:500]}
    items = []
    for item in named if type(named) is list else ():
        if type(item) is not tuple or len(item) != 5 or type(item[2]) is not bool or type(item[3]) is not int:
            return {"error": "introspection", "message": "the module's state came back in another form"}
        name, t, grad, ident, g = item
        why = unclean(t) or (unclean(g) if g is not None else None)
        if why:
            return {"error": "introspection", "message": why}
        items.append(item)
    # its values, not where they lie: a level may lay the weights out anew (channels_last) with the same values;
    # its .grad's too (red team 39 planted one: a caller's next optimizer step applied it); one pass for them all
    sums = iter(positional_many([t for _, t, _, _, _ in items] + [g for *_, g in items if g is not None], key))
    sigs = [next(sums) for _ in items]
    return [(str(name), tuple(t.shape), t.dtype, sig, grad, ident, None if g is None else (tuple(g.shape), next(sums)))
            for (name, t, grad, ident, g), sig in zip(items, sigs)]


def state_change(before: list, after: list) -> str:
    """What a forward changed of the module's state (both `state_sigs`)."""
    was = {s[0]: s for s in before}
    for s in after:
        b = was.pop(s[0], None)
        if b is None:
            return f"the forward added '{s[0]}' to the module's parameters or buffers"
        if b[5] != s[5]:
            return (f"the forward replaced the parameter object '{s[0]}' (an optimizer built before the call holds the "
                    "old one and trains weights the module no longer reads)")
        if b[4] != s[4]:
            return f"the forward changed requires_grad of '{s[0]}' ({b[4]} -> {s[4]})"
        if b[6] != s[6]:
            return (f"the forward changed the .grad of '{s[0]}' (a caller's next optimizer step applies it; the "
                    "reference's, under torch.no_grad(), leaves it alone)")
        if b[1:4] != s[1:4]:
            return (f"the forward changed the module's '{s[0]}' (the caller's weights: a checkpoint's, an "
                    "optimizer's)")
    return f"the forward removed '{next(iter(was), '?')}' from the module's parameters or buffers"


def objects_change(before: Any, after: Any) -> str | None:
    """`state_change` in the parameter objects and their requires_grad alone (a load writes new values): between the
    build and a later load, the calls between them (the build's settle calls, unjudged) may not swap or freeze them."""
    if type(before) is not list or type(after) is not list:
        return None
    was, now = ([(s[0], None, None, None, *s[4:]) for s in sigs] for sigs in (before, after))
    return state_change(was, now) if was != now else None


def state_fault(state: Any, params: Any) -> dict | None:
    """The error reply where the module's state now (`state_sigs`, or its error reply) differs from `params`."""
    if isinstance(state, dict):
        return state
    return None if state == params else {"error": "input_mutated", "message": state_change(params, state)}


def param_fault(sigs: list, grads: dict) -> str | None:
    """Where the module's parameters differ from the reference's (`grads`: each state parameter's requires_grad): one
    that is a buffer or a plain attribute, or frozen, is left out of a caller's training (red team 38)."""
    if type(sigs) is not list:               # an error reply: reported where it was made
        return None
    mine, buffers = {s[0]: s for s in sigs if s[5]}, {s[0] for s in sigs if not s[5]}
    for name, grad in grads.items():
        s = mine.get(name)
        if s is None and name in buffers:    # (a module of its own layout, other names: judged below)
            return (f"'{name}' is a parameter of the reference's but a buffer of the module's (a caller's optimizer, "
                    "built over its parameters(), would leave it untrained)")
        if s is not None and s[4] != grad:
            return f"the module's parameter '{name}' has requires_grad={s[4]}; the reference's has {grad}"
    frozen = next((s[0] for s in mine.values() if not s[4]), None)
    if grads and all(grads.values()) and frozen is not None:
        return f"the module's parameter '{frozen}' has requires_grad=False; every one of the reference's requires grad"
    return None


def roundtrip_fault(named: Any, loaded: dict, key: int, unclean: Callable[[Any], str | None]) -> str | None:
    """Whether the module's `state_dict()` (`jobs.state_dict_of`) gives back the state just loaded, each value rounded
    to the module's dtype, where it has the reference's keys (red team 38 handed out a transposed weight under the
    reference's key, so a checkpoint saved from the module reloaded wrong). A module with keys of its own (a layout
    it converts the reference's into in a load hook) is judged by loading its own checkpoint back (`jobs.reload`)."""
    if type(named) is str:                  # jobs.state_dict_of: what a caller's training loop calls is wrong
        return named[:500]
    if type(named) is not list:
        return "the module's state_dict() did not come back as a mapping of tensors"
    got = {}
    for item in named:
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
            return "the module's state_dict() did not come back as a mapping of tensors"
        why = unclean(item[1])
        if why:
            return why
        got[item[0]] = item[1]
    if set(got) != set(loaded):              # a layout of its own (converted by a load hook): see `own_keys`
        return None
    for k, v in loaded.items():
        if not isinstance(v, torch.Tensor) or tuple(got[k].shape) != tuple(v.shape):
            return _reloads_wrong(k)
    keys = list(loaded)
    mine = positional_many([got[k] for k in keys], key)
    theirs = positional_many([loaded[k].to(device=got[k].device, dtype=got[k].dtype) for k in keys], key)
    for k, a, b in zip(keys, mine, theirs):
        if a != b:
            return _reloads_wrong(k)
    return None


def _reloads_wrong(k: str) -> str:
    return (f"the module's state_dict() hands out other values under '{k}' than were loaded (a checkpoint saved from "
            "it reloads wrong)")


RELOADED = "its own state_dict() loaded back into it changes it (a checkpoint saved from the module reloads wrong)"


def own_keys(named: Any, loaded: dict) -> bool:
    """The module's `state_dict()` (`jobs.state_dict_of`) has keys other than the reference's."""
    return type(named) is list and {item[0] for item in named if type(item) is tuple and item} != set(loaded)


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

