"""Which correctness trials a candidate gets: drawn from the secret seed, judge-side, after it is built.

Main trials (GateConfig.trials, default 8) cycle through workload.TRIAL_KINDS for float inputs. On top:
- integer and bool inputs are redrawn over their whole valid range in every trial but the "given" ones
  (the range is inferred from the workload's generator and probed on the reference: sizes it may index
  into, negative indices, -1 / -100 sentinels; see workload.infer_int_domain);
- trials 2..n load perturbed parameters; every other one also perturbs integer/bool buffers, and two
  of them negate parameter tensors (complementary halves, so each tensor is negated in one of them);
- two edit trials follow a random trial: its inputs changed at a few positions, then at one position,
  parameters unchanged (a cache keyed on sampled elements answers stale);
- float arguments of forward (an `alpha`) take other values, scaled and sign-flipped, in those trials too;
- one main trial gives its tensors in another memory layout (column-major), a second (3+ dims) in another
  memory order drawn per task;
- one trial puts NaN, +Inf and -Inf at a few positions of the float inputs, another +-1000 RMS at two;
- one trial per input family (gate/families.py): non-positive (complex: purely imaginary), zeros, binary, one
  entry repeated, some entries repeated, and the structures of real callers' inputs (bf16 activations, far
  scales, probability and unit rows, images, padding and masks, integer values, one-hot rows, a column of ones,
  constant rows, Zipfian ids) (the lean memory plan: the first two that apply in a secret order);
- the far-off parameters (x4-8) on both trials with negated parameters: pruned (exact zeros) on one, dense on the
  other.
Complex inputs, parameters and buffers go through all of these as their real and imaginary parts (red team 38:
`is_floating_point()` is False for them, so they had no edits, special values, NaN/Inf or extreme values, and
complex parameters were never perturbed or negated).
Every trial that goes where the given inputs do not is probed first: the reference must run and give
finite outputs (or no more non-finite ones than without the change), else the trial falls back to the
workload's own values (or is left out, for the NaN/Inf trial).
"""
from __future__ import annotations

import itertools
import logging
import math
import random
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from .. import workload
from .layouts import LAYOUTS, relayout_on
from .prober import NONFINITE_DTYPES, Prober, prober
from . import correctness, families, values

log = logging.getLogger(__name__)

#: in the name of a trial whose inputs are in another memory layout: its outputs' strides are free (a
#: layout-preserving op's output follows its input's, the reference's or not)
LAYOUT = "other layout"
FAR = "parameters far off"          # in the name of the trial whose parameters are far off (_far_params)
FAMILY = "input family"             # in the name of an input family's trial (gate/families.py)


@dataclass
class Trial:
    name: str
    inputs: list[Any]
    state: dict[str, torch.Tensor] | None       # None: keep the current parameters
    rounding: bool = False                      # inputs far from zero: their own rounding is permitted error too


def make_trials(task: Any, seed: int, n: int) -> list[Trial]:
    """Every trial of `iter_trials`, built at once (for inspection; the judge iterates)."""
    return list(iter_trials(task, seed, n))


def iter_trials(task: Any, seed: int, n: int, layouts: tuple[int, ...] = LAYOUTS,
                short: bool | None = None) -> Iterator[Trial]:
    """Correctness trials from the secret seed: `n` main trials with widened distributions and integer ranges,
    perturbed and negated parameters, edits of one trial's inputs, NaN/Inf and extreme inputs (`plan`), then
    the shapes the contract varies. Built one at a time as the judge asks (a trial of a task whose inputs
    take gigabytes is held only while it is judged); each carries the parameters it needs, except edits,
    which are built with their anchor and follow it."""
    g = torch.Generator().manual_seed(seed)
    for item in plan(task, g, n, layouts, short):
        yield Trial(*item)
    for v in task.contract.vary:
        for size in v.sizes:
            xs = workload.resize(task.inputs(int(torch.randint(1 << 30, (1,), generator=g))),
                                 v.inputs, v.dim, size, g)
            yield Trial(f"shape: dim {v.dim} = {size}", xs, task.oracle.state0)


FEW = 64           # a float output with fewer elements than this gives a trial little evidence (a loss, a norm)
FEW_FACTOR = 3     # ... so the main trials are tripled


def main_count(task: Any, n: int) -> int:
    """How many main trials: `n`, or FEW_FACTOR * n where a float output has fewer than FEW elements. One trial
    of a scalar output is one sample of its error: lower precision whose errors average out under a long
    reduction lands inside the bound in a fair share of single trials (a bf16 GEMM under an MSE: about half),
    never in two dozen (docs/GATE.md, the comparison)."""
    small = any(isinstance(o, torch.Tensor) and o.dtype.is_floating_point and o.numel() < FEW
                for o in getattr(task, "out_meta", None) or [])
    return n * FEW_FACTOR if small and n > 0 else n


def plan(task: Any, g: torch.Generator, n: int, layouts: tuple[int, ...] = LAYOUTS,
         short: bool | None = None) -> Iterator[tuple]:
    """(name, inputs, parameters or None to keep the previous trial's[, Trial.rounding]) for each trial, from `g`,
    built lazily: the edits' anchor and the NaN/Inf and extreme trials' places are drawn first. The caller may load other
    parameters into the oracle between trials (the prober then loads its own again). `layouts`: the layout kinds
    tried (the session's: all of them, or in the lean memory plan two, a secret: session.py). `short`: the
    lean plan's families (default: the task's memory plan; the session's short plan for own code)."""
    pr = prober(task)
    r = random.Random(int(torch.randint(1 << 62, (1,), generator=g)))
    flip_at = r.sample(range(1, n), min(2, n - 1)) if n > 1 else []
    half = [k for k in pr.params if r.random() < 0.5]
    anchor = r.randrange(n) if n else -1
    extras = sorted((r.randrange(1, n + 1), k) for k in range(2)) if n else []   # before main trial i (n: last)
    others = [i for i in range(1, n) if i != anchor]       # the edits keep their anchor's layout
    plain = [i for i in others if i not in flip_at]         # trials with nothing else on them: one is kept so
    pick = plain if len(plain) > 1 else [i for i in others if i in flip_at] or others    # (a short plan's)
    # the layout trials (layouts.LAYOUTS): on trials with nothing else on them, one of those kept so, then on
    # those with negated parameters, then trials of their own
    keep = r.choice(plain) if plain else -1
    slots = [[i for i in pick if i != keep], [i for i in others if i not in pick and i != keep]]
    layout_of: dict[int, int] = {}
    left: list[int] = []                # kinds no main trial is left for: trials of their own after the main ones
    multi = any(isinstance(x, torch.Tensor) and sum(1 for d in x.shape if d > 1) >= 2 for x in task.given)
    for which in (layouts if task.contract.layouts else ()):
        if which in (0, 1, 5) and not multi:        # another order of the dims: none for vectors
            continue
        src = slots[0] or slots[1]
        if src:
            layout_of[src.pop(r.randrange(len(src)))] = which
        else:
            left.append(which)
    # exact special values in the float inputs, on a trial with negated parameters (a short plan keeps its plain
    # trial)
    # (never on a one-signed trial: its inputs stay >= 0, red team 39's `nonneg_input_fastpath`)
    # (never on the edits' anchor: a content cache bypassed for a zero first element missed every edit)
    signed = [t for t in flip_at if workload.TRIAL_KINDS[t % len(workload.TRIAL_KINDS)] != "magnitudes"
              and t != anchor]
    specials_at = r.choice(signed) if signed else r.choice(others) if others else -1
    # far-off parameters (scaled several times over, exact zeros) on the last trial with negated parameters
    wide_at = flip_at[-1] if flip_at else -1
    # and dense (no zeros: a clamp skipped wherever a weight is exactly 0 passed the pruned ones) on the other one
    dense_at = flip_at[0] if len(flip_at) > 1 else -1
    # the input families (gate/families.py), each a trial of its own before main trial i, from generators of their
    # own (the other trials draw as they did without them)
    rf = random.Random(g.initial_seed() * 7919 + 17)
    gf = torch.Generator().manual_seed(rf.randrange(1 << 62))
    # (the lean memory plan: the first LEAN_FAMILIES of them in a secret order that apply to the task)
    lean = getattr(task, "lean", False) if short is None else short
    kinds = rf.sample(families.FAMILIES, len(families.FAMILIES)) if lean else families.FAMILIES
    fams = sorted((rf.randrange(1, n + 1), kind) for kind in kinds) if n else []
    fams_left = families.LEAN_FAMILIES if lean else len(fams)
    try:
        for t in range(n + 1):
            for _, k in [e for e in extras if e[0] == t]:
                pr.loaded = None
                extra = (_nonfinite_trial if k == 0 else _extreme_trial)(task, pr, g)
                if extra is not None:
                    yield extra
            for _, kind in [e for e in fams if e[0] == t]:
                if fams_left <= 0:
                    break
                pr.loaded = None
                extra = _family_trial(task, pr, gf, rf, kind)
                if extra is not None:
                    fams_left -= 1
                    yield extra
            if t == n:
                break
            pr.loaded = None
            trial = _main_trial(task, pr, g, r, t, flip_at, half, layout_of.get(t), t == specials_at,
                                "pruned" if t == wide_at else "dense" if t == dense_at else "")
            if t == anchor:
                handed, trial = [trial], None
                yield from _edit_trials(task, pr, g, r, handed, t)
            else:
                yield trial
            trial = None
        for which in left:                  # (red team 34: a 4-D input's sixth kind had no main trial left)
            pr.loaded = None
            t = r.choice(others) if others else 0
            name, xs, state = _main_trial(task, pr, g, r, t, [], half, which)
            yield name.replace(f"trial {t + 1} (", f"trial {t + 1}, another draw (", 1), xs, state
    finally:
        pr.restore()


def _main_trial(task, pr: Prober, g: torch.Generator, r: random.Random, t: int, flip_at: list[int],
                half: list[str], layout: int | None = None, specials: bool = False,
                wide: str = "") -> tuple[str, list[Any], dict[str, torch.Tensor]]:
    o = task.oracle
    kind = workload.TRIAL_KINDS[t % len(workload.TRIAL_KINDS)]
    xs = task.inputs(int(torch.randint(1 << 30, (1,), generator=g)),
                     lambda xs: workload.widen(xs, kind, g, task.contract))
    notes = []
    state = o.state0
    if t:
        state = perturb(o.state0, g)
        notes.append("perturbed params")
        plain = state
        if t % 2 == 1 and pr.int_buffers:
            changed, keys = workload.perturb_ints(state, g)
            if keys and pr.ok(xs, changed, (xs, plain)):
                state = changed
                notes.append("integer buffers perturbed")
        if t in flip_at and pr.params:
            keys = half if t == flip_at[0] else [k for k in pr.params if k not in half]
            positive = {k for k in keys if not o.state0[k].is_complex() and bool((o.state0[k] > 0).all())}
            for attempt in (keys, [k for k in keys if k not in positive]):
                flipped = workload.flip_signs(state, attempt)
                if attempt and pr.ok(xs, flipped, (xs, state)):
                    state = flipped
                    notes.append(f"{len(attempt)} of {len(pr.params)} parameter tensors negated")
                    break
        if wide and pr.params:
            state = _far_params(pr, r, xs, state, notes, dense=wide == "dense")
    if kind != "given":
        widened = {i: d.draw(xs[i], g) for i, d in pr.domains().items()
                   if i < len(xs) and isinstance(xs[i], torch.Tensor) and xs[i].numel()}
        keys = most_accepted(pr, xs, state, widened)
        if keys:
            xs = merged(xs, widened, keys)
            notes.append("integer inputs " + ", ".join(str(i) for i in keys) + " widened")
        xs = _vary_scalars(pr, r, xs, state, notes)
    if specials:
        xs = _with_specials(task, pr, r, xs, state, notes)
    if layout is not None:
        xs = _other_layout(task, xs, notes, layout)
    return f"trial {t + 1} ({', '.join([kind] + notes)})", xs, state


def most_accepted(pr: Prober, xs: list[Any], state: dict[str, torch.Tensor],
                  changed: dict[int, Any], like: list[Any] | None = None) -> list[int]:
    """The inputs of `changed` the reference accepts together (Prober.ok against `xs`, `like` passed on): all of
    them, else the set grown one input at a time in order, each kept where the reference accepts it beside those
    kept before (an input the reference refuses changed leaves the others tried: red team 23); [] when none."""
    keys = sorted(changed)
    if keys and pr.ok(merged(xs, changed, keys), state, (xs, state), like):
        return keys
    kept: list[int] = []
    if len(keys) > 1:
        for i in keys:
            if pr.ok(merged(xs, changed, kept + [i]), state, (xs, state), like):
                kept.append(i)
    return kept


def _far_params(pr: Prober, r: random.Random, xs: list[Any], state: dict[str, torch.Tensor],
                notes: list[str], dense: bool = False) -> dict[str, torch.Tensor]:
    """The float parameters far off (values.far_params), the first variant the reference takes without new
    NaN/Inf (red team 31: a weight clamp at the init scale, NaN at a zero weight); `dense`: scaled only, no zeros
    (red team 44: a clamp skipped wherever a weight was exactly 0)."""
    variants = values.far_params(state, pr.params, r)       # made one at a time
    for changed, what in itertools.islice(variants, 2 if dense else 0, None):   # (dense: the scaling alone)
        if pr.ok(xs, changed, (xs, state)):
            notes.append(f"{FAR} ({what})")
            return changed
        del changed
    return state


def _with_specials(task, pr: Prober, r: random.Random, xs: list[Any], state: dict[str, torch.Tensor],
                notes: list[str]) -> list[Any]:
    """Exact special values in the float and complex inputs (values.special_inputs, complex_specials) where the
    reference takes them (no new NaN/Inf); an input refused so gets exact zeros alone (red teams 29, 30)."""
    changed, zeros = values.special_inputs(xs, task.contract, r)
    more_changed, more_zeros = complex_specials(xs, task.contract, r)
    changed.update(more_changed)
    zeros.update(more_zeros)
    keys = most_accepted(pr, xs, state, changed) if changed else []
    rest = {i: z for i, z in zeros.items() if i not in keys}
    more = most_accepted(pr, merged(xs, changed, keys), state, rest) if rest else []
    if keys or more:
        notes.append("exact special values in inputs " + ", ".join(str(i) for i in sorted(keys + more)))
        return merged(merged(xs, changed, keys), rest, more)
    return xs


def merged(xs: list[Any], changed: dict[int, Any], keys: list[int]) -> list[Any]:
    """`xs` with the inputs `keys` taken from `changed`."""
    return [changed[i] if i in keys else x for i, x in enumerate(xs)]


def _has_float(x: Any) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, (list, tuple)):
        return any(map(_has_float, x))
    if isinstance(x, dict):
        return any(map(_has_float, x.values()))
    return False


def _map_floats(x: Any, f) -> Any:
    """`x` with every finite float in it (itself, or inside lists, tuples, namedtuples and dicts' values: red
    team 23 hard-coded a dict's floats) replaced by f(value); containers rebuilt as their own type."""
    if isinstance(x, float) and math.isfinite(x):
        return type(x)(f(x))
    if isinstance(x, tuple) and hasattr(x, "_fields"):          # a namedtuple: fields by position
        return type(x)(*(_map_floats(y, f) for y in x))
    if isinstance(x, (list, tuple)):
        try:
            return type(x)(_map_floats(y, f) for y in x)
        except TypeError:                                     # a subclass whose constructor takes other arguments
            return x
    if isinstance(x, dict):
        try:
            out = x.copy()
            for k, v in x.items():
                out[k] = _map_floats(v, f)
            return out
        except (TypeError, AttributeError):
            return x
    return x


def _vary_scalars(pr: Prober, r: random.Random, xs: list[Any], state: dict[str, torch.Tensor],
                  notes: list[str]) -> list[Any]:
    """Float arguments of forward (an `alpha`, a `margin`, the floats of a `band=[low, high]`) take other
    values: scaled by 1/4..4, the sign flipped half the time (else kept), where the reference accepts them; a
    candidate that hard-codes the workload's value fails. Integer arguments (sizes, dims) keep theirs."""
    floats = [i for i, x in enumerate(xs) if _has_float(x)]
    if not floats:
        return xs
    for signs in (True, False):
        def draw(v: float) -> float:
            w = v * 4.0 ** r.uniform(-1.0, 1.0) if v else r.uniform(-1.0, 1.0)
            return -w if signs and r.random() < 0.5 else w
        new = {i: _map_floats(xs[i], draw) for i in floats}
        keys = most_accepted(pr, xs, state, new)
        if keys:
            notes.append("float arguments " + ", ".join(f"{i} = {_short(new[i])}" for i in keys))
            return merged(xs, new, keys)
    return xs


def _short(x: Any) -> str:
    return repr(_map_floats(x, lambda v: float(f"{v:.4g}")))


def layout_seed(task: Any) -> int:
    """The task's secret for the second layout trial's memory order (relayout), drawn once."""
    o = task.oracle
    seed = getattr(o, "layout_seed", None)
    if seed is None:
        import secrets
        seed = o.layout_seed = secrets.randbits(31)
    return seed


def layout_keys(task: Any, which: int = 0) -> list[int]:
    """The inputs layout trial `which` gives in another memory layout (relayout): those the reference
    accepts so (most_accepted on the given inputs); decided once per task."""
    o = task.oracle
    cache = getattr(o, "layout_keys", None)
    if not isinstance(cache, dict):
        cache = o.layout_keys = {}
    done = cache.get(which)
    if done is None:
        xs, done, alt, seed = task.given, [], [], layout_seed(task)
        tensors = {i: x for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.numel() > 1} \
            if task.contract.layouts else {}
        new = {i: y for i, x in tensors.items() for y in [relayout_on(x, which, seed, _compute(task))]
               if y is not None}
        pr = prober(task) if tensors else None
        if new:
            done = most_accepted(pr, xs, o.state0, new)
        if which == 2:      # inputs refused with gaps everywhere: gaps between outer entries (relayout 3)
            more = {i: y for i, x in tensors.items() if i not in done for y in [relayout_on(x, 3, seed, _compute(task))]
                    if y is not None}
            if more:
                alt = most_accepted(pr, merged(xs, new, done), o.state0, more)
        if pr is not None:
            pr.restore()
        cache[(which, "alt")] = alt
        cache[which] = done = sorted(done + alt)
    return done


def relaid(task: Any, xs: list[Any], keys: list[int], which: int = 0) -> list[Any]:
    """`xs` with the inputs `keys` in layout trial `which`'s memory layout (relayout; the gap trial's inputs
    refused with gaps everywhere in relayout 3's)."""
    seed = layout_seed(task)
    alt = getattr(task.oracle, "layout_keys", {}).get((which, "alt"), ())
    return [relayout_on(x, 3 if i in alt else which, seed, _compute(task)) if i in keys else x
            for i, x in enumerate(xs)]


def _compute(task: Any) -> str | None:
    """Where the layouts are made: the oracle's GPU where the lean plan keeps the inputs elsewhere."""
    where = getattr(task.oracle, "device", None)
    return str(where) if getattr(task, "lean", False) and str(where).startswith("cuda") else None


def _other_layout(task, xs: list[Any], notes: list[str], which: int = 0) -> list[Any]:
    """The trial's tensors with the same values in another memory layout (0: column-major; 1: another order,
    a task's secret), for the inputs the reference accepts so (`layout_keys`): a kernel reading its input's
    memory as if it were contiguous, or right for a few layouts only, fails (contract: layouts = false keeps the
    workload's own)."""
    keys = layout_keys(task, which)
    if not keys:
        notes.append("no other input layout the reference accepts")
        return xs
    ys = relaid(task, xs, keys, which)
    notes.append(f"{LAYOUT}: " + " ".join(f"input {i} strides [{' '.join(map(str, ys[i].stride()))}]"
                                          + (f" offset {ys[i].storage_offset()}" if ys[i].storage_offset() else "")
                                          for i in keys))
    return ys


def _edit_trials(task, pr: Prober, g: torch.Generator, r: random.Random, anchor: list, a: int):
    """The anchor (main trial `a`), then its edit and the edit's one-position edit where they can be made: the
    anchor's inputs changed at a few positions of every input, then one of those changed at a single position;
    parameters kept (None). Made one after another, each once the one before it is judged (`anchor` is a
    one-item list the caller hands over: a task's worth of inputs each, the lean plan holds one at a time)."""
    name, xs, state = anchor.pop()
    yield name, xs, state
    domains = pr.domains()
    editable = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.numel()
                and (x.is_floating_point() or x.is_complex() or i in domains)]
    floats = [i for i in editable if xs[i].is_floating_point() or xs[i].is_complex()]    # complex: either part
    if not editable:
        return

    def attempt(base: list[Any], counts: dict[int, int]) -> list[Any] | None:
        for cs in (counts, {i: c for i, c in counts.items() if i in floats}):
            if not cs:
                continue
            ys = on_parts(workload.edit, base, g, task.contract, domains, cs)
            if all(i in floats for i in cs) or pr.ok(ys, state, (base, state)):
                return ys
        return None

    first = attempt(xs, {i: r.randint(2, 6) for i in editable})
    del xs
    if first is None:
        return
    yield f"edit of trial {a + 1} (a few positions of each input, same parameters)", first, None
    one = r.choice(floats) if floats and r.random() < 0.75 else r.choice(editable)
    second = attempt(first, {one: 1})
    del first
    if second is not None:
        yield f"edit of the edit (one position of input {one}, same parameters)", second, None


def _nonfinite_trial(task, pr: Prober, g: torch.Generator):
    """NaN, +Inf and -Inf at a few positions of the float inputs (complex ones: in either part), when the
    reference defines its outputs there (Prober.nonfinite_ok); None otherwise. Complex outputs are judged as
    float ones (each part: checks.Expected.check)."""
    return _special_trial(task, pr, g, workload.with_nonfinite, correctness.NONFINITE_TRIAL, against_clean=True)


def _family_trial(task, pr: Prober, g: torch.Generator, r: random.Random, kind: str):
    """The workload's inputs turned into one input family (gate/families.py), under perturbed parameters, where the
    reference gives finite outputs on it (or non-finite only where it does on the inputs before); None otherwise."""
    clean = task.inputs(int(torch.randint(1 << 30, (1,), generator=g)))
    xs = families.make(kind, clean, task.contract, r)
    if xs is None:
        return None
    state = perturb(task.oracle.state0, g)
    if not pr.ok(xs, state, (clean, state)):
        return None
    return f"trial ({FAMILY}: {kind}, perturbed params)", xs, state, kind in families.ROUNDING


def _extreme_trial(task, pr: Prober, g: torch.Generator):
    """+-1000 RMS at two positions of each float input (exp overflows past 88.7: a softmax without its
    max, a softplus without its threshold), kept under the same conditions as the NaN/Inf trial; judged
    as any trial (NaN/Inf of the oracle must be reproduced)."""
    return _special_trial(task, pr, g, workload.with_extremes, "extreme values")


def _special_trial(task, pr: Prober, g: torch.Generator, make, label: str, against_clean: bool = False):
    if task.quantized or not any(b.dtype in NONFINITE_DTYPES or b.dtype.is_complex for b in task.out_meta or ()):
        return None                  # integer outputs beside float ones: judged exactly (NaN/Inf trial: not judged)
    clean = task.inputs(int(torch.randint(1 << 30, (1,), generator=g)))
    xs = on_parts(make, clean, g, task.contract)
    if xs is None:
        return None
    state = perturb(task.oracle.state0, g)
    if not pr.nonfinite_ok(xs, state, clean if against_clean else None):
        return None
    return f"trial ({label}, perturbed params)", xs, state


# ------------------------------------------------------------------ complex inputs and parameters



def _complex(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_complex()


def _as_complex(y: torch.Tensor) -> torch.Tensor:
    try:
        return torch.view_as_complex(y)
    except RuntimeError:                 # strides a complex view cannot take: a copy
        return torch.view_as_complex(y.contiguous())


def on_parts(make, xs: list[Any], *args) -> list[Any] | None:
    """make(xs, *args) with every complex tensor of `xs` handed over as its real and imaginary parts (a float
    view, last dim 2: workload's edits, NaN/Inf and extreme values treat each part as an element) and taken back
    as complex; an input `make` leaves alone stays the tensor it was. None where `make` gives None."""
    if not any(map(_complex, xs)):
        return make(xs, *args)
    views = [torch.view_as_real(x.detach().resolve_conj()) if _complex(x) else x for x in xs]
    ys = make(views, *args)
    if ys is None:
        return None
    return [x if y is v else _as_complex(y) if _complex(x) and isinstance(y, torch.Tensor) else y
            for x, v, y in zip(xs, views, ys)]


def perturb(state: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """workload.perturb, and the complex tensors of `state` perturbed as their real and imaginary parts
    (workload.perturb leaves them as they are); a state without complex tensors draws exactly as before."""
    out = workload.perturb(state, gen)
    for k, v in state.items():
        if v.is_complex() and v.numel():
            parts = torch.view_as_real(v.detach().resolve_conj())
            out[k] = _as_complex(workload.perturb({k: parts}, gen)[k])
    return out


def complex_specials(xs: list[Any], contract: Any, r: random.Random) -> tuple[dict[int, Any], dict[int, Any]]:
    """values.special_inputs for the complex inputs: every 2nd-5th element, from a random start, a complex
    number whose real and imaginary parts are exact special values (values.SPECIALS, those the contract's domain
    holds), cycled through pairs of two specials, real ones (imaginary part 0) and imaginary ones; the zeros
    alone (0 + 0j) in the second dict, and one whole entry of the first dimension 0 in both (2+ dims)."""
    changed: dict[int, Any] = {}
    zeros: dict[int, Any] = {}
    for i, x in enumerate(xs):
        if not (_complex(x) and x.numel() > 1):
            continue
        d = contract.domain_of(i)
        vals = [v for v in values.SPECIALS if d is None or d.low <= v <= d.high]
        if not vals:
            continue
        step, start = r.randint(2, 5), r.randrange(2)
        re, im = list(vals), list(vals)
        r.shuffle(re)
        r.shuffle(im)
        pairs = list(zip(re, im))
        if 0.0 in vals:
            pairs += [(v, 0.0) for v in im] + [(0.0, v) for v in re]
        values.filled(i, torch.clone(x.detach().resolve_conj(), memory_format=torch.contiguous_format), pairs, step,
                      start, 0.0 in vals, r, changed, zeros)
    return changed, zeros
