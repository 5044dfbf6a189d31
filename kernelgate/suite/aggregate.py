"""A suite's aggregates from its per-problem status records: summary.json, summary.csv and index.html (one
inline SVG bar chart with a bar per problem, no external assets).

What counts: every problem that ran and is not degenerate. Its speedup is the claimed, confirmed one over the
faster baseline; a kept baseline, a failure and a flagged result (above 3x, for review) count 1.0 and the last
two are listed apart (a flagged result counts its speedup once a person accepted it in the review queue,
kernelgate/review.py; until then, or when rejected, 1.0); degenerate tasks (random or admitting trivial
mutants: nothing to verify) are listed apart and left out of the geometric mean and of fast_p's denominator.
fast_p: the share of counted problems that finished with a verified result faster than p times the baseline
(fast_0: the share that finished)."""
from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

FAST_P = (0.0, 1.0, 1.2, 1.5, 2.0)
OK, FAILED, DEGENERATE, PENDING = "ok", "failed", "degenerate", "pending"
CSV_FIELDS = ("id", "level", "name", "outcome", "counted_speedup", "speedup", "claimed", "flagged", "ci_low",
              "ci_high", "best_strategy", "baseline_kind", "baseline_ms", "best_ms", "candidates", "accepted",
              "seconds", "budget_s", "setup_s", "setup_share", "floor_ms", "floor_bound", "best_over_floor", "attempts",
              "device", "reason", "message")


def reviewed(row: dict[str, Any]) -> bool:
    """A flagged result a person accepted (its review item, attached by summarize)."""
    return (row.get("review") or {}).get("status") == "accepted"


def counted_speedup(row: dict[str, Any]) -> float:
    """What a problem contributes: its claimed speedup when it finished, was claimed and is not flagged (or was
    flagged and accepted on review); else 1.0."""
    if row.get("outcome") == OK and row.get("claimed") and (not row.get("flagged") or reviewed(row)):
        s = row.get("speedup")
        if isinstance(s, (int, float)) and s > 0 and math.isfinite(s):
            return float(s)
    return 1.0


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def fast_p(rows: list[dict[str, Any]], p: float) -> float | None:
    """Share of counted problems (finished or failed, not degenerate) with a verified result faster than p x."""
    counted = [r for r in rows if r.get("outcome") in (OK, FAILED)]
    if not counted:
        return None
    return sum(1 for r in counted if r.get("outcome") == OK and counted_speedup(r) > p) / len(counted)


def _p_key(p: float) -> str:
    return f"{p:g}"


def with_reviews(rows: list[dict[str, Any]], suite: dict[str, Any], store: Any = None) -> list[dict[str, Any]]:
    """Each flagged result with its review item (queued once, in `store`, else suite["store"] or the default
    store): {"id", "status", "note"}; unreachable, they stay unreviewed (counted 1.0)."""
    if not any(r.get("outcome") == OK and r.get("flagged") for r in rows):
        return rows
    from .. import review
    from ..errors import KernelgateError
    try:
        items = review.suite_reviews(rows, suite, store)
    except (KernelgateError, OSError) as e:
        items = {r["id"]: {"id": None, "status": f"unknown ({e})", "note": None} for r in rows if r.get("flagged")}
    return [{**r, "review": {k: items[r["id"]][k] for k in ("id", "status", "note")}} if r["id"] in items else r
            for r in rows]


def summarize(rows: list[dict[str, Any]], suite: dict[str, Any], reviews: Any = None) -> dict[str, Any]:
    """summary.json's document from the per-problem records (pending ones included, as pending); flagged results
    are looked up in the review queue (`reviews`: a Store or its path; default: suite["store"] or the default)."""
    rows = with_reviews(rows, suite, reviews)
    counted = [r for r in rows if r.get("outcome") in (OK, FAILED)]
    with_flagged = [float(r["speedup"]) if r.get("outcome") == OK and r.get("claimed") and r.get("flagged")
                    else counted_speedup(r) for r in counted]
    shares = [r["setup_share"] for r in rows if r.get("outcome") == OK and isinstance(r.get("setup_share"), (int, float))]
    return {
        "suite": suite,
        "problems": len(rows),
        "finished": sum(1 for r in rows if r.get("outcome") != PENDING),
        "counted": len(counted),
        "geomean_speedup": geomean([counted_speedup(r) for r in counted]),
        "geomean_speedup_with_flagged": geomean(with_flagged),
        "fast_p": {_p_key(p): fast_p(rows, p) for p in FAST_P},
        "claimed": [r["id"] for r in rows if r.get("outcome") == OK and r.get("claimed")
                    and (not r.get("flagged") or reviewed(r))],
        "kept_baseline": [r["id"] for r in rows if r.get("outcome") == OK and not r.get("claimed")],
        "failures": [{"id": r["id"], "reason": r.get("reason"), "message": r.get("message")}
                     for r in rows if r.get("outcome") == FAILED],
        "flagged": [{"id": r["id"], "speedup": r.get("speedup"), "best_strategy": r.get("best_strategy"),
                     "review": _review_text(r)} for r in rows if r.get("outcome") == OK and r.get("flagged")],
        "degenerate": [{"id": r["id"], "reason": r.get("reason"), "message": r.get("message")}
                       for r in rows if r.get("outcome") == DEGENERATE],
        "pending": [r["id"] for r in rows if r.get("outcome") == PENDING],
        "retried": [{"id": r["id"], "attempts": r.get("attempts")} for r in rows if len(r.get("attempts") or ()) > 1],
        "budget_before_first_candidate": {
            "meaning": "seconds from optimize's start to the last progress line before its first candidate's "
                       "(preparation, baselines, profiling the faster one), over the budget; a run that tried no "
                       "candidate counts its whole time, at most the budget",
            "problems": len(shares),
            "mean_share": statistics.fmean(shares) if shares else None,
            "median_share": statistics.median(shares) if shares else None,
            "no_candidate": [r["id"] for r in rows if r.get("outcome") == OK and r.get("first_result_s") is None],
        },
        "best_over_floor": over_floor(rows),
        "rows": rows,
    }


def over_floor(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the finished problems' best times (the kept baseline's where no candidate won) stand above their
    roofline floors on the device: the median of best / floor, and how many had a floor."""
    ratios = [float(r["best_over_floor"]) for r in rows if r.get("outcome") == OK
              and isinstance(r.get("best_over_floor"), (int, float)) and math.isfinite(r["best_over_floor"])]
    return {"meaning": "each finished problem's best time (the kept baseline's where no candidate won) over the "
                       "roofline floor of its forward on the device (profiling/roofline.py: the larger of the compute "
                       "and memory terms at the contract's precision); 1.0 is at the floor",
            "problems": len(ratios), "median": statistics.median(ratios) if ratios else None,
            "no_floor": [r["id"] for r in rows if r.get("outcome") == OK and not isinstance(
                r.get("best_over_floor"), (int, float))]}


def _review_text(r: dict[str, Any]) -> str:
    rv = r.get("review") or {}
    return f"{rv.get('status', 'pending')} (kernelgate review, item {rv.get('id')})"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        ci = r.get("ci") or [None, None]
        w.writerow({**r, "counted_speedup": f"{counted_speedup(r):.4f}" if r.get("outcome") in (OK, FAILED) else "",
                    "ci_low": ci[0], "ci_high": ci[1], "attempts": len(r.get("attempts") or ()),
                    "message": (r.get("message") or "").replace("\n", " ")[:300]})
    return buf.getvalue()


COLORS = {"claimed": "#2e7d32", "kept": "#9e9e9e", "flagged": "#ef6c00", FAILED: "#c62828",
          DEGENERATE: "#bdbdbd", PENDING: "#ffffff"}


def _kind(r: dict[str, Any]) -> str:
    o = r.get("outcome")
    if o == OK:
        return "flagged" if r.get("flagged") and not reviewed(r) else "claimed" if r.get("claimed") else "kept"
    return o or PENDING


def chart_svg(rows: list[dict[str, Any]]) -> str:
    """A horizontal bar per problem: the speedup it counts with (measured one for flagged results), a line at 1x."""
    bar_h, gap, left, width = 16, 4, 260, 420
    vals = [float(r["speedup"]) if _kind(r) == "flagged" else counted_speedup(r) for r in rows]
    top = max([2.0] + vals)
    h = len(rows) * (bar_h + gap) + 40
    x = lambda v: left + width * min(v, top) / top          # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" height="{h}" '
           f'font-family="sans-serif" font-size="11">']
    for i, (r, v) in enumerate(zip(rows, vals)):
        y = 20 + i * (bar_h + gap)
        k = _kind(r)
        label = html.escape(r["id"][-40:])
        text = {"claimed": f"{v:.2f}x", "kept": "1x (baseline kept)", "flagged": f"{v:.2f}x flagged",
                FAILED: f"failed: {r.get('reason') or '?'}", DEGENERATE: f"degenerate: {r.get('reason') or '?'}",
                PENDING: "pending"}[k]
        out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{label}</text>')
        end = x(v if k not in (DEGENERATE, PENDING) else 1.0)
        out.append(f'<rect x="{left}" y="{y}" width="{end - left:.1f}" height="{bar_h}" fill="{COLORS[k]}" '
                   f'stroke="#616161" stroke-width="0.5"><title>{label}: {html.escape(text)}</title></rect>')
        out.append(f'<text x="{end + 4:.1f}" y="{y + 12}">{html.escape(text)}</text>')
    one = x(1.0)
    out.append(f'<line x1="{one:.1f}" y1="12" x2="{one:.1f}" y2="{h - 14}" stroke="#000" stroke-dasharray="3,2"/>')
    out.append(f'<text x="{one:.1f}" y="{h - 2}" text-anchor="middle">1x</text>')
    out.append(f'<text x="{x(top):.1f}" y="{h - 2}" text-anchor="middle">{top:.2g}x</text>')
    out.append("</svg>")
    return "\n".join(out)


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else html.escape(str(v))


def to_html(doc: dict[str, Any]) -> str:
    s, rows = doc["suite"], doc["rows"]
    fp = ", ".join(f"fast_{k} {_fmt(v, '.0%')}" for k, v in doc["fast_p"].items())
    bud = doc["budget_before_first_candidate"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kernelgate suite</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd;text-align:left;font-size:13px}</style></head><body>",
        f"<h1>kernelgate suite: {html.escape(str(s.get('dir')))}</h1>",
        f"<p>target {html.escape(str(s.get('target')))}, {_fmt(s.get('budget_per_s'), 'g')} s per problem; "
        f"{doc['finished']} of {doc['problems']} problems finished, {doc['counted']} counted.</p>",
        f"<p><b>geometric-mean speedup over the faster baseline: {_fmt(doc['geomean_speedup'])}x</b> "
        f"(kept baselines, failures and flagged results count 1.0, a flagged one until a person accepts it; "
        f"with flagged results at their measured figure {_fmt(doc['geomean_speedup_with_flagged'])}x). {fp}.</p>",
        f"<p>share of the budget before the first candidate: mean {_fmt(bud['mean_share'], '.0%')}, median "
        f"{_fmt(bud['median_share'], '.0%')} over {bud['problems']} problems ({html.escape(bud['meaning'])}).</p>",
        f"<p>best time over the roofline floor: median {_fmt((doc.get('best_over_floor') or {}).get('median'), '.3g')}x "
        f"over {(doc.get('best_over_floor') or {}).get('problems', 0)} problems (1.0 is at the floor).</p>",
        chart_svg(rows),
    ]
    for title, items in (("Failures", doc["failures"]), ("Flagged (above 3x, for review)", doc["flagged"]),
                         ("Degenerate tasks", doc["degenerate"])):
        if items:
            parts.append(f"<h2>{title}</h2><ul>" + "".join(
                f"<li>{html.escape(i['id'])}: " + html.escape(", ".join(f"{k} {v}" for k, v in i.items()
                                                                        if k != "id" and v is not None)) + "</li>"
                for i in items) + "</ul>")
    head = ("problem", "outcome", "speedup", "95% CI", "strategy", "baseline", "over floor", "candidates", "seconds",
            "setup share", "attempts", "reason")
    parts.append("<h2>Problems</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>")
    for r in rows:
        ci = r.get("ci") or [None, None]
        name = html.escape(r["id"])
        if r.get("report"):
            name = f"<a href='{html.escape(r['report'])}'>{name}</a>"
        cells = (name, html.escape(_kind(r)), _fmt(r.get("speedup")),
                 f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci[0] is not None else "-", _fmt(r.get("best_strategy")),
                 f"{_fmt(r.get('baseline_kind'))} {_fmt(r.get('baseline_ms'), '.4g')} ms",
                 _fmt(r.get("best_over_floor"), ".3g"), _fmt(r.get("candidates"), "d"),
                 _fmt(r.get("seconds"), ".0f"), _fmt(r.get("setup_share"), ".0%"), str(len(r.get("attempts") or ())),
                 html.escape(" ".join(x for x in (r.get("reason") or "", (r.get("message") or "")[:160]) if x)))
        parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)


def write(out: Path, doc: dict[str, Any]) -> None:
    """summary.json, summary.csv and index.html in OUT, each replaced atomically."""
    _atomic_write(out / "summary.json", json.dumps(doc, indent=1, default=str))
    _atomic_write(out / "summary.csv", to_csv(doc["rows"]))
    _atomic_write(out / "index.html", to_html(doc))
