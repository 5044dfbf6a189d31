"""Human-readable outputs of `optimize`: report.md, report.html (with an inline SVG convergence plot) and reproduce.sh."""
from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Any

from .records import claim_text

CHECK_TEXT = (
    "Each candidate went through the kernelgate correctness gate in its own process: outputs are compared "
    "with an fp64 oracle of the reference, with a tolerance derived from the reference's own error at the "
    "working precision and floored by the unit roundoff of the output format; 8 trials use fresh inputs drawn "
    "from a secret seed, with widened input distributions, perturbed parameters and matching NaN/Inf positions; "
    "integrity checks cover dtype, shape, device, strides, aliasing, input mutation, threads and numerics flags; "
    "outputs produced inside the timed loop are re-checked. See docs/GATE.md for the full description.")
CONDITION_ORDER = ("gpu", "cpu", "driver", "torch", "triton", "python", "cuda", "platform", "device", "threads", "command")
W, H, ML, MR, MT, MB, BAND = 640, 320, 64, 16, 30, 40, 16  # SVG size, margins, band for untimed markers
# A timing whose spread (semi-interquartile range / median, gate.timing.summarize) is above this is called
# unreliable. Quiet machines give spreads under 15% in 95% of the rows in benchmarks/results (a few percent
# typically); a loaded one gave 800%+. At 25% the interquartile range is half the median: such a
# per-sample spread says more about the machine than the code (the claim rule's noise term is the spread of the
# per-round medians, gate.timing.noise). Nothing is un-claimed for it: the claim rule stands as the gate applies it.
UNRELIABLE_SPREAD = 0.25


def _num(x: Any) -> float | None:
    """A finite float, or None for anything else (missing, NaN, inf, non-numeric)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _ms(x: Any) -> str:
    """A time in milliseconds, or '-'."""
    v = _num(x)
    return "-" if v is None else f"{v:.4g} ms"


def _ratio(x: Any) -> str:
    """A speedup ratio, or '-'."""
    v = _num(x)
    return "-" if v is None else f"{v:.2f}x"


def _ci(pair: Any) -> str:
    """A confidence interval [low, high], or '-'."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2 or None in map(_num, pair):
        return "-"
    return f"[{_num(pair[0]):.2f}, {_num(pair[1]):.2f}]"


def _timing(t: Any) -> str:
    """Median and spread of a Timing dict, or '-'."""
    if not isinstance(t, dict) or _num(t.get("median_ms")) is None:
        return "-"
    spread = _num(t.get("spread"))
    return _ms(t["median_ms"]) + ("" if spread is None else f" (±{100 * spread:.1f}%"
                                  + (", unreliable)" if _unreliable(t) else ")"))


def _unreliable(t: Any) -> bool:
    """Whether a Timing dict's spread is above UNRELIABLE_SPREAD."""
    spread = _num(t.get("spread")) if isinstance(t, dict) else None
    return spread is not None and spread > UNRELIABLE_SPREAD


def _cell(t: Any) -> str:
    """A table cell for a Timing dict: its median, and its spread when that makes it unreliable."""
    if not isinstance(t, dict):
        return "-"
    return _ms(t.get("median_ms")) + (f" (unreliable: ±{100 * t['spread']:.0f}%)" if _unreliable(t) else "")


def _line(text: Any, limit: int = 160) -> str:
    """First line of a message, shortened."""
    s = str(text or "").strip().splitlines()
    s = s[0] if s else ""
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _median(ev: dict) -> float | None:
    """Median time of an evaluation, if timed."""
    t = ev.get("timing")
    return _num(t.get("median_ms")) if isinstance(t, dict) else None


def _accepted(ev: dict) -> bool:
    """Whether the evaluation's verdict is accepted."""
    v = ev.get("verdict")
    return isinstance(v, dict) and v.get("status") == "accepted"


def _has_best(result: dict) -> bool:
    """Whether a candidate replaced the baseline."""
    return not str(result.get("best_strategy") or "baseline:").startswith("baseline:")


def best_per_generation(evaluations: list[dict]) -> dict[int, float]:
    """Best verified median time so far at each generation (from the first generation with one)."""
    by_gen: dict[int, float] = {}
    for ev in evaluations:
        m = _median(ev)
        if _accepted(ev) and m is not None:
            g = int((ev.get("candidate") or {}).get("generation") or 0)
            by_gen[g] = min(m, by_gen.get(g, math.inf))
    out, best = {}, math.inf
    gens = [int((e.get("candidate") or {}).get("generation") or 0) for e in evaluations]
    for g in range(min(gens, default=0), max(gens, default=-1) + 1):
        best = min(best, by_gen.get(g, math.inf))
        if best < math.inf:
            out[g] = best
    return out


def _rows(result: dict) -> list[dict[str, str]]:
    """One display row per evaluation, in evaluation order (plain, unescaped strings)."""
    base, best_ms, has_best = _num(result.get("baseline_ms")), _num(result.get("best_ms")), _has_best(result)
    rows, marked = [], False
    for i, ev in enumerate(result.get("evaluations") or []):
        c, v, sp = ev.get("candidate") or {}, ev.get("verdict") or {}, ev.get("speedup") or {}
        med = _median(ev)
        ratio = _num(sp.get("ratio")) if sp else (base / med if base and med else None)
        if result.get("best_id"):
            is_best = has_best and not marked and _accepted(ev) and c.get("id") == result.get("best_id")
        else:           # documents written before best_id
            is_best = (has_best and not marked and _accepted(ev) and c.get("strategy") == result.get("best_strategy")
                       and med is not None and best_ms is not None and abs(med - best_ms) <= 1e-9 + 1e-6 * best_ms)
        marked |= is_best
        status = str(v.get("status") or "-")
        why = "" if status == "accepted" else f"{v.get('reason') or '?'}: {_line(v.get('message'))}"
        rows.append({"#": str(i), "gen": str(c.get("generation", "-")),
                     "strategy": str(c.get("strategy") or "-") + (" (best)" if is_best else ""),
                     "parent": str(c.get("parent") or "-")[:8], "verdict": status, "reason": why,
                     "median (search)": _cell(ev.get("timing")), "baseline (search)": _cell(ev.get("baseline")),
                     "speedup (search)": _ratio(ratio) + (" (flagged)" if sp.get("flagged") else ""),
                     "bottleneck": _line((ev.get("insight") or {}).get("bottleneck") or "-", 90)})
    return rows


def _usage_rows(result: dict) -> list[dict[str, str]]:
    """Per proposal that cost model requests (LLM proposers): the model, requests, tokens, cost, the seconds
    waiting for the model, then the seconds of the candidate's gate and timing (result "phases" per candidate),
    and the verdict: where each candidate's time and money went."""
    per = ((result.get("phases") or {}).get("per_candidate") or {})
    rows = []
    for i, ev in enumerate(result.get("evaluations") or []):
        c, v = ev.get("candidate") or {}, ev.get("verdict") or {}
        u = c.get("usage")
        if not u:
            continue
        ph = per.get(c.get("id"), {})
        gate = sum(float(ph.get(k, 0.0)) for k in ("worker start", "build", "spares", "trials", "re-check"))
        timed = sum(float(ph.get(k, 0.0)) for k in ("timing", "profiling"))
        cost = u.get("cost_usd")
        rows.append({"#": str(i), "strategy": str(c.get("strategy") or "-"), "model": str(u.get("model") or "-"),
                     "requests": f"{u.get('requests', 0)} ({u.get('retries', 0)} retried)",
                     "tokens in/out": f"{u.get('input_tokens', 0)} / {u.get('output_tokens', 0)}"
                                      + (" (estimated)" if u.get("estimated") else ""),
                     "cost": "unpriced" if cost is None else f"${float(cost):.4f}",
                     "model wait s": f"{float(u.get('wait_s') or 0.0) + float(u.get('queue_s') or 0.0):.1f}",
                     "gate s": f"{gate:.1f}", "timing s": f"{timed:.1f}", "verdict": str(v.get("status") or "-")})
    return rows


USAGE_COLUMNS = ["#", "strategy", "model", "requests", "tokens in/out", "cost", "model wait s", "gate s", "timing s",
                 "verdict"]
USAGE_NOTE = ("Each model-written candidate: what proposing it cost (requests, retries, tokens, price, seconds waiting "
              "for the model or a free request slot), then the seconds of its gate (worker start, build, trials, "
              "re-check) and its timing and profile.")

COLUMNS = ["#", "gen", "strategy", "parent", "verdict", "reason", "median (search)", "baseline (search)",
           "speedup (search)", "bottleneck"]
TABLE_NOTE = ("Figures from the search: each accepted candidate's median per call and the faster baseline's, "
              "timed side by side with it (new inputs, interleaved), and their ratio.")
BASELINES_NOTE = ("Timed side by side at the start of the search; each candidate's row shows the faster baseline "
                  "timed again with it.")


def _fresh(result: dict) -> bool:
    """Whether the summary's best and baseline figures come from a fresh confirmation of the best."""
    return any(isinstance(c, dict) and c.get("confirmed") and c.get("candidate") == result.get("best_id")
               for c in result.get("confirmations") or [])


def _search_ev(result: dict, candidate_id: Any) -> dict:
    """The search's evaluation of a candidate id ({} when absent)."""
    return next((ev for ev in result.get("evaluations") or []
                 if (ev.get("candidate") or {}).get("id") == candidate_id and ev.get("timing")), {})


def _confirmation_rows(result: dict) -> list[dict[str, str]]:
    """Each confirmation tried: the search's figures and the fresh ones, side by side (plain strings)."""
    rows = []
    for c in result.get("confirmations") or []:
        if not isinstance(c, dict):
            continue
        ev = _search_ev(result, c.get("candidate"))
        outcome = ("confirmed" if c.get("confirmed") else
                   "not confirmed, not kept" if c.get("fresh_ratio") is not None else _line(c.get("verdict"), 90))
        rows.append({"candidate": str(c.get("strategy") or "-"),
                     "median (search)": _cell(ev.get("timing")), "baseline (search)": _cell(ev.get("baseline")),
                     "speedup (search)": _ratio(c.get("search_ratio")), "median (fresh)": _ms(c.get("fresh_ms")),
                     "baseline (fresh)": _ms(c.get("fresh_baseline_ms")),
                     "speedup (fresh)": _ratio(c.get("fresh_ratio")),
                     "outcome": outcome})
    return rows


CONFIRM_COLUMNS = ["candidate", "median (search)", "baseline (search)", "speedup (search)", "median (fresh)",
                   "baseline (fresh)", "speedup (fresh)", "outcome"]
CONFIRM_NOTE = ("The best claimed candidates, judged again in a fresh worker and timed afresh side by side with "
                "the faster baseline (new inputs, a new plan): the fastest of several noisy search measurements "
                "overstates its speedup. The summary's figures are the fresh ones of the confirmed candidate.")


def _unreliable_sentence(result: dict) -> str | None:
    """A summary sentence naming every timing whose spread makes it unreliable, or None."""
    found: list[tuple[str, float]] = []
    for key, name in (("eager", "eager"), ("compile", "torch.compile")):
        if _unreliable(result.get(key)):
            found.append((name, result[key]["spread"]))
    for i, ev in enumerate(result.get("evaluations") or []):
        strategy = str((ev.get("candidate") or {}).get("strategy") or "-")
        if _unreliable(ev.get("timing")):
            found.append((f"#{i} {strategy}", ev["timing"]["spread"]))
        if _unreliable(ev.get("baseline")):
            found.append((f"the baseline timed with #{i}", ev["baseline"]["spread"]))
    if not found:
        return None
    worst = max(s for _, s in found)
    listed = ", ".join(f"{name} (±{100 * s:.0f}%)" for name, s in found[:6]) + (", ..." if len(found) > 6 else "")
    return (f"Timing unreliable: spreads above {100 * UNRELIABLE_SPREAD:.0f}% in {listed}; the machine was probably "
            f"busy, and these figures may be far from a quiet run's; re-run on a quiet machine.")


def _summary(result: dict) -> list[str]:
    """Summary sentences (plain, unescaped)."""
    kind, n = result.get("baseline_kind") or "?", result.get("evaluations") or []
    fresh = _fresh(result)
    where = (", timed side by side with the best " + ("in the fresh confirmation" if fresh else "in the search")
             if _has_best(result) else "")
    lines = [f"Baseline: {kind} at {_ms(result.get('baseline_ms'))} (the faster of eager and torch.compile{where})."]
    if _has_best(result):
        ci = result.get("speedup_ci")
        claimed = ("claimed: the lower bound of the 95% confidence interval clears the threshold"
                   if result.get("speedup_claimed") else
                   "not claimed: the lower bound of the 95% confidence interval does not clear the threshold")
        if result.get("speedup_bounded"):
            claimed += ("; the candidate's call is shorter than the harness's cost, so its time includes the "
                        "harness: the speedup is a lower bound")
        search = _median(_search_ev(result, result.get("best_id"))) if fresh else None
        at = (f" in the fresh confirmation ({_ms(search)} in the search)" if search is not None
              else " in the fresh confirmation" if fresh else "")
        lines += [f"Best: {result.get('best_strategy')} at {_ms(result.get('best_ms'))}{at}.",
                  f"Speedup: {_ratio(result.get('speedup'))}, 95% CI {_ci(ci)} ({claimed})."]
    else:
        lines.append(f"No candidate beat the faster baseline ({kind}); the baseline is kept.")
    lines.append(f"Candidates evaluated: {len(n)}, accepted by the gate: {sum(map(_accepted, n))}.")
    for c in result.get("confirmations") or []:
        fresh_fig = (f"{_ratio(c.get('fresh_ratio'))}, 95% CI {_ci(c.get('fresh_ci'))}"
                     if c.get("fresh_ratio") is not None else _line(c.get("verdict")))
        as_emitted = f" as the emitted {c['module']}" if c.get("module") else ""
        lines.append(f"Confirmation of {c.get('strategy')}: {_ratio(c.get('search_ratio'))} in the search; judged "
                     f"and timed afresh{as_emitted}: {fresh_fig} -> " + ("confirmed (the figures above are the fresh ones)."
                                                             if c.get("confirmed") else "not confirmed, not kept."))
    noisy = _unreliable_sentence(result)
    if noisy:
        lines.append(noisy)
    return lines


def progress_line(k: int, ev: dict, best: dict | None) -> str:
    """The line `optimize` prints after evaluating a candidate (Evaluation.to_json() documents): its median
    against the faster baseline timed side by side with it (the ratio is theirs, not the start-of-search
    baseline's), whether the gate claims the speedup and why not, and the best claimed so far."""
    c, sp = ev.get("candidate") or {}, ev.get("speedup") or {}
    t, b = ev.get("timing"), ev.get("baseline")
    if _accepted(ev) and isinstance(t, dict) and sp:
        base = f"{b.get('label') or 'baseline'} {_ms(b.get('median_ms'))}" if isinstance(b, dict) else "baseline -"
        claim = claim_text(sp)
        noisy = [x for x in (t, b) if _unreliable(x)]
        with_h = (f" ({_ms((_num(t.get('median_ms')) or 0) + (_num(t.get('harness_ms')) or 0))} with the harness)"
                  if sp.get("bounded") else "")
        status = (f"{_ms(t.get('median_ms'))}{with_h} vs {base} = {_ratio(sp.get('ratio'))}, {claim}"
                  + (f", unreliable timing (spread ±{100 * max(x['spread'] for x in noisy):.0f}%)" if noisy else ""))
    elif _accepted(ev):
        status = "accepted, untimed"
    else:
        status = f"REJECTED {(ev.get('verdict') or {}).get('reason') or '?'}"
    bsp = (best or {}).get("speedup") or {}
    tail = (f"  | best {_ratio(bsp.get('ratio'))} ({(best.get('candidate') or {}).get('strategy') or '-'})"
            if best and bsp else "  | best: baseline")
    return f"[{k}] {str(c.get('strategy') or '-'):<44} {status}{tail}"


def _conditions(result: dict) -> list[tuple[str, str]]:
    """(key, value) pairs of hardware/software conditions, known keys first."""
    cond = result.get("conditions") if isinstance(result.get("conditions"), dict) else {}
    keys = [k for k in CONDITION_ORDER if k in cond] + sorted(k for k in cond if k not in CONDITION_ORDER)
    return [(str(k), "-" if cond[k] is None else str(cond[k])) for k in keys]


def convergence_svg(result: dict) -> str:
    """The convergence plot as a standalone SVG document; with a single timed candidate (a flat line and
    a dot) the baseline against that candidate instead (`comparison_svg`)."""
    evs, base, e = result.get("evaluations") or [], _num(result.get("baseline_ms")), html.escape
    timed = [ev for ev in evs if _accepted(ev) and _median(ev) is not None]
    if len(timed) == 1:
        return comparison_svg(result, timed[0])
    gens = [int((ev.get("candidate") or {}).get("generation") or 0) for ev in evs] or [0]
    g0, ng = min(gens), max(gens) - min(gens) + 1
    vals = [m for ev in evs if _accepted(ev) and (m := _median(ev)) is not None] + ([base] if base is not None else [])
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.1 or 1.0
    lo, hi = max(0.0, lo - pad), hi + pad
    pw, top, bottom = W - ML - MR, MT + BAND, H - MB
    col = pw / ng
    y = lambda v: top + (hi - v) / (hi - lo) * (bottom - top)  # noqa: E731
    left = lambda g: ML + (g - g0) * col  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" font-size="11">',
           "<title>kernelgate convergence: best verified time per generation</title>",
           f'<rect x="{ML}" y="{MT}" width="{pw}" height="{bottom - MT}" fill="white" stroke="#999"/>',
           f'<text x="{ML}" y="{MT - 8}" fill="#444">● accepted   ✕ rejected (no time, top edge)   '
           '— best verified   - - baseline</text>']
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<text x="{ML - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
        out.append(f'<line x1="{ML}" x2="{ML + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
    step = max(1, ng // 12)
    for g in range(g0, g0 + ng, step):
        out.append(f'<text x="{left(g) + col / 2:.1f}" y="{bottom + 14}" text-anchor="middle">{g}</text>')
    out.append(f'<text x="{ML + pw / 2}" y="{H - 6}" text-anchor="middle">generation</text>')
    mid = (top + bottom) / 2
    out.append(f'<text x="14" y="{mid}" text-anchor="middle" transform="rotate(-90 14 {mid})">time (ms)</text>')
    if base is not None:
        label = f"baseline ({e(str(result.get('baseline_kind') or '?'))}) {base:.4g} ms"
        out.append(f'<line class="baseline" x1="{ML}" x2="{ML + pw}" y1="{y(base):.1f}" y2="{y(base):.1f}" stroke="#555" '
                   f'stroke-dasharray="6 4"><title>{label}</title></line>')
        out.append(f'<text x="{ML + pw - 4}" y="{y(base) - 4:.1f}" text-anchor="end" fill="#555">{label}</text>')
    best = best_per_generation(evs)
    if best:
        pts = sorted(best.items())
        d = f"M{left(pts[0][0]):.1f},{y(pts[0][1]):.1f} H{left(pts[0][0]) + col:.1f}"
        d += "".join(f" V{y(b):.1f} H{left(g) + col:.1f}" for g, b in pts[1:])
        out.append(f'<path class="best" d="{d}" fill="none" stroke="#1565c0" stroke-width="2"/>')
    counts: dict[int, int] = {}
    for i, ev in enumerate(evs):
        g = gens[i]
        k, n = counts.get(g, 0), gens.count(g)
        counts[g] = k + 1
        x = left(g) + col / 2 + ((k + 1) / (n + 1) - 0.5) * col * 0.7
        c, m = ev.get("candidate") or {}, _median(ev)
        status = str((ev.get("verdict") or {}).get("status") or "-")
        tip = f"<title>#{i} {e(str(c.get('strategy') or '-'))}: {e(status)}, {_ms(m)}</title>"
        cy, s = MT + BAND / 2, 4
        if _accepted(ev) and m is not None:
            out.append(f'<circle class="marker accepted" cx="{x:.1f}" cy="{y(m):.1f}" r="4" fill="#1565c0">{tip}</circle>')
        elif _accepted(ev):
            out.append(f'<circle class="marker accepted untimed" cx="{x:.1f}" cy="{cy}" r="4" fill="none" '
                       f'stroke="#1565c0">{tip}</circle>')
        else:
            d = f"M{x - s:.1f},{cy - s} L{x + s:.1f},{cy + s} M{x - s:.1f},{cy + s} L{x + s:.1f},{cy - s}"
            out.append(f'<path class="marker rejected" d="{d}" stroke="#d32f2f" stroke-width="2">{tip}</path>')
    if not evs:
        out.append(f'<text x="{ML + pw / 2}" y="{mid}" text-anchor="middle" fill="#888">no candidates evaluated</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def comparison_svg(result: dict, ev: dict) -> str:
    """The baseline against the one timed candidate `ev`, as two bars from one measurement: the fresh
    confirmation's when `ev` is the confirmed best, else the search's (the baseline timed with it)."""
    e, c = html.escape, ev.get("candidate") or {}
    strategy = str(c.get("strategy") or "-")
    base_t = ev.get("baseline") if isinstance(ev.get("baseline"), dict) else {}
    base_label = str(base_t.get("label") or result.get("baseline_kind") or "baseline")
    if _fresh(result) and c.get("id") == result.get("best_id"):
        base_ms, cand_ms = _num(result.get("baseline_ms")), _num(result.get("best_ms"))
        source = "the fresh confirmation"
    else:
        base_ms, cand_ms, source = _median({"timing": base_t}), _median(ev), "the search, timed side by side"
    kept = c.get("id") == result.get("best_id") and _has_best(result)
    rows = [(f"baseline ({base_label})", base_ms, "#555", "baseline"),
            (f"{strategy} ({'best, kept' if kept else 'not kept'})", cand_ms, "#1565c0", "candidate")]
    hi = max([v for _, v, _, _ in rows if v is not None] or [1.0]) * 1.15 or 1.0
    pw = W - ML - MR - 150
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" font-size="11">',
           "<title>kernelgate: the baseline against the one timed candidate</title>",
           f'<text x="{ML}" y="{MT - 8}" fill="#444">one timed candidate: median per call in {e(source)}</text>']
    for i, (label, ms, colour, cls) in enumerate(rows):
        y0 = MT + 30 + i * 90
        width = 0.0 if ms is None else ms / hi * pw
        out.append(f'<rect class="bar {cls}" x="{ML}" y="{y0}" width="{width:.1f}" height="40" fill="{colour}">'
                   f"<title>{e(label)}: {_ms(ms)}</title></rect>")
        out.append(f'<text x="{ML}" y="{y0 - 4}">{e(label)}</text>')
        out.append(f'<text x="{ML + width + 6:.1f}" y="{y0 + 25}">{_ms(ms)}</text>')
    if base_ms and cand_ms:
        out.append(f'<text x="{ML}" y="{MT + 30 + 2 * 90}" fill="#444">ratio {_ratio(base_ms / cand_ms)} '
                   "(baseline / candidate)</text>")
    others = len(result.get("evaluations") or []) - 1
    if others > 0:
        out.append(f'<text x="{ML}" y="{MT + 30 + 2 * 90 + 18}" fill="#888">{others} other candidate'
                   f'{"s" if others > 1 else ""}: rejected or untimed (see the table)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def fingerprint_points(result: dict) -> list[tuple[float, float, str, str]]:
    """(distance to the best, median ms, strategy, basis) of every timed candidate with a fingerprint."""
    pts = []
    for ev in result.get("evaluations") or []:
        d = ((ev.get("insight") or {}).get("distance_to_best") or {})
        dist, med = _num(d.get("value")), _median(ev)
        if dist is not None and med is not None and _accepted(ev):
            pts.append((dist, med, str((ev.get("candidate") or {}).get("strategy") or "-"), str(d.get("basis") or "")))
    return pts


def fingerprint_svg(result: dict) -> str:
    """Fingerprint distance to the best candidate against runtime: does the signal follow speed?"""
    pts, e = fingerprint_points(result), html.escape
    pw, top, bottom = W - ML - MR, MT + BAND, H - MB
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" font-size="11">',
           "<title>kernelgate: fingerprint distance to the best candidate vs time</title>",
           f'<rect x="{ML}" y="{MT}" width="{pw}" height="{bottom - MT}" fill="white" stroke="#999"/>']
    if len(pts) < 2:
        what = ("no profiled candidates" if not pts else
                "fewer than two profiled candidates: nothing to compare")
        out.append(f'<text x="{ML + pw / 2}" y="{(top + bottom) / 2}" text-anchor="middle" fill="#888">'
                   f"{what}</text></svg>")
        return "\n".join(out) + "\n"
    ms = [p[1] for p in pts]
    lo, hi = min(ms), max(ms)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.1 or 1.0
    lo, hi = max(0.0, lo - pad), hi + pad
    x = lambda d: ML + d * pw  # noqa: E731 - distance is in [0, 1]
    y = lambda v: top + (hi - v) / (hi - lo) * (bottom - top)  # noqa: E731
    bases = sorted({p[3] for p in pts})
    out.append(f'<text x="{ML}" y="{MT - 8}" fill="#444">basis: {e(", ".join(bases))}; 0 = same code as the best</text>')
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<text x="{ML - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
        out.append(f'<text x="{x(k / 4):.1f}" y="{bottom + 14}" text-anchor="middle">{k / 4:.2f}</text>')
    out.append(f'<text x="{ML + pw / 2}" y="{H - 6}" text-anchor="middle">fingerprint distance to the best</text>')
    mid = (top + bottom) / 2
    out.append(f'<text x="14" y="{mid}" text-anchor="middle" transform="rotate(-90 14 {mid})">time (ms)</text>')
    for d, m, strategy, basis in pts:
        out.append(f'<circle class="marker" cx="{x(d):.1f}" cy="{y(m):.1f}" r="4" fill="#6a1b9a" fill-opacity="0.7">'
                   f"<title>{e(strategy)}: {m:.4g} ms, distance {d:.3f} ({e(basis)})</title></circle>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _title(result: dict) -> str:
    """Report title: workload, target and device."""
    r = {k: result.get(k) or "?" for k in ("workload", "target", "device")}
    return f"kernelgate report: {r['workload']} on {r['target']} ({r['device']})"


def _md_cell(s: Any) -> str:
    """Text made safe for a markdown table cell: one line, no raw HTML, no column breaks."""
    return " ".join(str(s).split()).replace("<", "&lt;").replace("|", "\\|")


def _md_table(cols: list[str], rows: list[dict[str, str]], note: str) -> list[str]:
    """A markdown table with a note above it ([] without rows)."""
    if not rows:
        return []
    return [note, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + [
        "| " + " | ".join(_md_cell(r[k]) for k in cols) + " |" for r in rows]


def render_markdown(result: dict, svg_name: str = "convergence.svg") -> str:
    """report.md text."""
    b = []
    b += [f"# {_md_cell(_title(result))}", "", "## Summary", ""] + [f"- {_md_cell(s)}" for s in _summary(result)]
    b += ["", "## Baselines (timed at the start of the search)", "", BASELINES_NOTE, "",
          f"- eager: {_timing(result.get('eager'))}", f"- torch.compile: {_timing(result.get('compile'))}"]
    b += ["", "## Candidates", ""] + (_md_table(COLUMNS, _rows(result), TABLE_NOTE) or ["No candidates were evaluated."])
    usage = _usage_rows(result)
    if usage:
        b += ["", "## Model usage per candidate", ""] + _md_table(USAGE_COLUMNS, usage, USAGE_NOTE)
    conf = _confirmation_rows(result)
    if conf:
        b += ["", "## Confirmation", ""] + _md_table(CONFIRM_COLUMNS, conf, CONFIRM_NOTE)
    b += ["", "## Convergence", "", f"![best verified time per generation]({svg_name})"]
    b += ["", "## Fingerprint distance vs time", "", "Each timed candidate's machine-code fingerprint distance to the "
          "best one (kernel names and launch configurations, or opcode histograms where code was found) against "
          "its time: points near 0 that are slow, or far ones that are fast, show where the signal misleads.", "",
          "![fingerprint distance to the best vs time](fingerprint.svg)"]
    b += ["", "## Hardware and software", ""]
    b += [f"- {_md_cell(k)}: {_md_cell(v)}" for k, v in _conditions(result)] or ["- (not recorded)"]
    b += ["", "## Correctness check", "", CHECK_TEXT]
    for k, text in enumerate(result.get("tolerance") or []):
        b += ["", f"Tolerance derivation, output {k} (`kernelgate explain-tolerance`):", "", "```", str(text), "```"]
    b += ["", "## Contract assumptions", ""]
    b += [f"- {_md_cell(a)}" for a in result.get("contract") or []] or ["- (none recorded)"]
    b += ["", "## Notes", ""] + ([f"- {_md_cell(n)}" for n in result.get("notes") or []] or ["- (none)"])
    b += ["", "To reproduce: `bash reproduce.sh`", ""]
    return "\n".join(b)


CSS = ("body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
       "th{background:#f3f3f3}tr.rejected td{color:#8a1c1c}tr.error td{color:#8a5a00}code{background:#f3f3f3}"
       "p.kept{font-weight:bold}")


def render_html(result: dict, svg: str) -> str:
    """report.html text: self-contained, every user-derived string escaped."""
    e = html.escape
    ul = lambda items: "<ul>" + "".join(f"<li>{e(str(i))}</li>" for i in items) + "</ul>"  # noqa: E731
    summ = "".join(f'<p class="kept">{e(s)}</p>' if "baseline is kept" in s else f"<p>{e(s)}</p>"
                   for s in _summary(result))
    def table(cols: list[str], rows: list[dict[str, str]], note: str, cls: str = "") -> str:
        body = "".join((f'<tr class="{e(r[cls])}">' if cls else "<tr>") + "".join(f"<td>{e(r[k])}</td>" for k in cols)
                       + "</tr>" for r in rows)
        head = "<tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>"
        return f"<p>{e(note)}</p><table>{head}{body}</table>" if rows else ""
    cands = table(COLUMNS, _rows(result), TABLE_NOTE, "verdict") or "<p>No candidates were evaluated.</p>"
    conf = _confirmation_rows(result)
    conf_html = f"<h2>Confirmation</h2>{table(CONFIRM_COLUMNS, conf, CONFIRM_NOTE)}" if conf else ""
    usage = _usage_rows(result)
    usage_html = f"<h2>Model usage per candidate</h2>{table(USAGE_COLUMNS, usage, USAGE_NOTE)}" if usage else ""
    cond = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _conditions(result))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{e(_title(result))}</title>",
        f"<style>{CSS}</style></head><body>", f"<h1>{e(_title(result))}</h1>", "<h2>Summary</h2>", summ,
        "<h2>Baselines (timed at the start of the search)</h2>", f"<p>{e(BASELINES_NOTE)}</p>",
        ul([f"eager: {_timing(result.get('eager'))}", f"torch.compile: {_timing(result.get('compile'))}"]),
        "<h2>Candidates</h2>", cands, usage_html, conf_html, "<h2>Convergence</h2>", svg,
        "<h2>Fingerprint distance vs time</h2>", fingerprint_svg(result),
        "<h2>Hardware and software</h2>", f"<table>{cond}</table>" if cond else "<p>(not recorded)</p>",
        "<h2>Correctness check</h2>", f"<p>{e(CHECK_TEXT)}</p>",
        "".join(f"<p>Tolerance derivation, output {k}:</p><pre>{e(str(t))}</pre>"
                for k, t in enumerate(result.get("tolerance") or [])),
        "<h2>Contract assumptions</h2>", ul(result.get("contract") or ["(none recorded)"]),
        "<h2>Notes</h2>", ul(result.get("notes") or ["(none)"]),
        "<p>To reproduce: <code>bash reproduce.sh</code></p>", "</body></html>", ""])


def render_reproduce(reproduce_cmds: dict[str, str]) -> str:
    """reproduce.sh text: one commented command per label."""
    import shlex
    import sys
    lines = ["#!/usr/bin/env bash", "set -euo pipefail", 'cd "$(dirname "$0")"',
             "# kernelgate on PATH, else the interpreter that wrote this file, else python3 (no activated venv needed)",
             "if command -v kernelgate >/dev/null 2>&1; then KG=(kernelgate)",
             f"elif {shlex.quote(sys.executable)} -c 'import kernelgate' 2>/dev/null; then "
             f"KG=({shlex.quote(sys.executable)} -m kernelgate)",
             "elif python3 -c 'import kernelgate' 2>/dev/null; then KG=(python3 -m kernelgate)",
             "else echo 'reproduce.sh: kernelgate is not installed here: pip install kernelgate, or activate the "
             "environment it is installed in' >&2; exit 2; fi"]
    for label, cmd in reproduce_cmds.items():
        cmd = str(cmd).rstrip()
        if cmd.startswith("kernelgate "):
            cmd = '"${KG[@]}" ' + cmd[len("kernelgate "):]
        lines += ["", f"# {' '.join(str(label).split())}", cmd]
    return "\n".join(lines) + "\n"


def write_report(result: dict, out_dir: Path, *, reproduce_cmds: dict[str, str]) -> dict[str, Path]:
    """Write report.md, report.html, convergence.svg, fingerprint.svg and reproduce.sh into out_dir; return paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    svg = convergence_svg(result)
    texts = {"report.md": render_markdown(result), "report.html": render_html(result, svg),
             "convergence.svg": svg, "fingerprint.svg": fingerprint_svg(result),
             "reproduce.sh": render_reproduce(reproduce_cmds)}
    paths = {}
    for name, text in texts.items():
        p = out_dir / name
        p.write_text(text, encoding="utf-8")
        paths[name] = p
    os.chmod(paths["reproduce.sh"], 0o755)
    return paths
