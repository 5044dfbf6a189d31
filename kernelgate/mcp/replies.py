"""Replies for an agent's context: the records the CLI's --json prints (Verdict, BenchResult, Submission,
profile Report, tolerance derivations; their to_json documents), trimmed, with one line first that says what
happened and, for a failure, what to do about it.

Trimming keeps every field a decision rests on (status, reason, message, medians, spreads, speedups and their
intervals, claims and flags) and shortens lists: checks (the failing one first), samples, notes, launch
records; long strings are cut to one line. A reply over MAX_CHARS loses its bulkiest optional parts.
"""
from __future__ import annotations

import json
from typing import Any

from ..records import claim_text

MAX_CHARS = 8000
LINE = 240
CHECKS = 6                           # passing checks kept after the failing one
SAMPLES = 8
NOTES = 5
TABLE = 10                           # rows of a profile's per-name table

#: what to do about each reason code, one line (records.Reason values, and the server's own)
ADVICE = {
    "build_error": "make the file import and build: define ModelNew taking the reference's constructor arguments, "
                   "with its parameter names (the reference's state_dict is loaded strictly)",
    "crash": "forward raised or its process died: run the candidate on the reference's inputs and fix the exception",
    "exit": "remove the sys.exit / os._exit call",
    "timeout": "make the build and each call finish well within the time limit (no waiting, no endless loop)",
    "output_limit": "remove the printing",
    "output_type": "return what the reference returns: plain torch.Tensor(s), not a subclass, list or None",
    "shape": "return the reference's output shape",
    "dtype": "return the reference's output dtype",
    "device": "return the output on the reference's device",
    "stride": "return the reference's output layout (e.g. .contiguous()), or propose strides = false",
    "mismatch": "the values differ beyond the allowed error on the trial named (other seeds, wider ranges, edited "
                "inputs): fix the math for all inputs, not the given ones; explain_tolerance shows the allowed error",
    "nonfinite": "NaN/Inf where the reference has none, or the reverse: keep the reference's behaviour on extreme "
                 "values",
    "input_mutated": "do not write into inputs: work on new tensors (or propose the inplace assumption)",
    "aliasing": "return new tensors: an output shares memory with an input or a parameter",
    "threads": "leave thread counts and torch's thread settings alone",
    "flags": "leave global numerics flags (TF32, matmul precision) alone; propose a precision assumption instead",
    "timer": "timing looked tampered with or impossible (e.g. below the roofline floor): leave clocks alone and "
             "compute every call",
    "recheck": "outputs of timed calls were wrong: compute every call from its inputs, no caching across calls",
    "introspection": "compute from the inputs and parameters only: no frames, gc, raw memory or patching",
    "usage": "fix the call's arguments",
    "task_load": "the reference could not be loaded or run: check the workload file",
    "random_task": "the reference's forward is random: it cannot be verified",
    "degenerate": "a trivial output passes the check: the workload cannot tell right from wrong",
    "no_device": "the target's device is not on this machine: use target cpu",
    "busy": "every evaluation slot is taken: try again later",
    "internal": "an error inside kernelgate: the server's log has the traceback",
}


def line(text: Any, n: int = LINE) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[:n - 3] + "..."


def _first(detail: Any) -> str:
    return line(str(detail or "").strip().splitlines()[0] if str(detail or "").strip() else "")


def why(v: dict[str, Any]) -> str:
    """The one actionable line of a verdict: status and reason, the failing check and what it measured, advice."""
    status, reason = str(v.get("status", "")).upper(), v.get("reason", "")
    if v.get("status") == "accepted":
        return f"ACCEPTED ({reason}): {line(v.get('message'))}"
    bad = next((c for c in v.get("checks") or () if not c.get("ok")), None)
    what = f"{bad['name']}: {_first(bad.get('detail'))}" if bad else line(v.get("message"))
    advice = ADVICE.get(reason, "")
    return f"{status} ({reason}): {what}" + (f" -> {advice}" if advice else "")


def verdict(v: dict[str, Any] | None, passing: int = CHECKS) -> dict[str, Any] | None:
    """Verdict.to_json(), trimmed: the failing check first, then `passing` passing ones; details cut to one line;
    with passing=0 no assumptions either (a bench row's: the contract is the bench's)."""
    if not v:
        return v
    checks = list(v.get("checks") or ())
    bad = [c for c in checks if not c.get("ok")]
    good = [c for c in checks if c.get("ok")]
    kept = bad + good[:passing]
    out = {**v, "checks": [{**c, "detail": _first(c.get("detail"))} for c in kept],
           "notes": [line(n) for n in (v.get("notes") or ())[:NOTES]]}
    if len(kept) < len(checks):
        out["checks_omitted"] = len(checks) - len(kept)
    if len(v.get("notes") or ()) > NOTES:
        out["notes_omitted"] = len(v["notes"]) - NOTES
    out["message"] = line(v.get("message"), 400)
    if not passing:
        out.pop("assumptions", None)
    return out


def timing(t: dict[str, Any] | None) -> dict[str, Any] | None:
    """Timing.to_json() with its samples cut to the first few (their count kept)."""
    if not t:
        return t
    s = list(t.get("samples_ms") or ())
    return {**t, "samples_ms": s[:SAMPLES], **({"samples_n": len(s)} if len(s) > SAMPLES else {})}


def verify_reply(v: dict[str, Any]) -> dict[str, Any]:
    return fit({"summary": why(v), **verdict(v, CHECKS if v.get("status") == "accepted" else 3)})


def bench_reply(doc: dict[str, Any], reviews: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """BenchResult.to_json(), trimmed; a summary line per candidate; each flagged one's review item."""
    rows, lines = [], []
    for r in doc.get("rows") or ():
        row = {**r, "timing": timing(r.get("timing")), "verdict": verdict(r.get("verdict"), 0),
               "note": line(r.get("note"))}
        label, sp, v = r.get("label"), r.get("speedup"), r.get("verdict")
        if reviews and label in reviews:
            row["review"] = reviews[label]
        rows.append(row)
        if v is None:
            continue
        if v.get("status") != "accepted" or r.get("timing") is None:
            lines.append(f"{label}: {why(v)}" if v.get("status") != "accepted" else f"{label}: {line(r.get('note'))}")
        elif sp:
            lines.append(f"{label}: {r['timing']['median_ms']:.4g} ms, {sp['ratio']:.3f}x over {doc.get('baseline')} "
                         f"(95% CI [{sp['low']:.3f}, {sp['high']:.3f}]), "
                         + claim_text(sp)
                         + ("; flagged: waits for review" if label in (reviews or {}) else ""))
    if doc.get("status") == "error":
        lines.insert(0, f"ERROR: {line(doc.get('message'))}")
    base = next((r for r in doc.get("rows") or () if r.get("label") == doc.get("baseline")), None)
    if base and base.get("timing"):
        lines.append(f"baseline {doc.get('baseline')}: {base['timing']['median_ms']:.4g} ms")
    out = {"summary": " | ".join(lines) or "no candidate", **doc, "rows": rows}
    out["conditions"] = _conditions(doc.get("conditions"))
    return fit(out)


def _conditions(c: dict[str, Any] | None) -> dict[str, Any] | None:
    if not c:
        return c
    keep = {k: c[k] for k in ("device", "torch", "triton", "python", "cuda") if k in c}
    if c.get("floor"):
        f = c["floor"]
        keep["floor"] = {k: f.get(k) for k in ("seconds", "bound", "machine")}
    return keep


def submission_reply(doc: dict[str, Any], item: dict[str, Any] | None = None) -> dict[str, Any]:
    """submit.Submission.to_json(), trimmed, its verdict line first, its time and claim, the run's best."""
    v = doc.get("verdict") or {}
    head = why(v)
    sp, t, b = doc.get("speedup"), doc.get("timing"), doc.get("baseline")
    if v.get("status") == "accepted" and t and sp and b:
        head += (f" | {t['median_ms']:.4g} ms vs {b['label']} {b['median_ms']:.4g} ms -> {sp['ratio']:.3f}x "
                 f"(95% CI [{sp['low']:.3f}, {sp['high']:.3f}]), "
                 + claim_text(sp))
    if item is not None:
        head += f" | flagged: review item {item['id']} ({item['status']})"
    if doc.get("beats_best"):
        head += " | beats the run's best: resume the run to emit it (next_step)"
    if doc.get("already_evaluated"):
        head += " | evaluated in this run before: its evaluation stands"
    out = {"summary": head, **doc, "verdict": verdict(v), "timing": timing(t), "baseline": timing(b),
           "notes": [line(n) for n in (doc.get("notes") or ())[:NOTES]]}
    if item is not None:
        out["review"] = item
    return fit(out)


def profile_reply(doc: dict[str, Any]) -> dict[str, Any]:
    """profiling Report.to_json(records): the bottleneck line of each side first; per side the top of the
    per-name table, the launch records asked for, the fingerprint's basis and size (not its histogram)."""
    parts, out = [], dict(doc)
    for name in ("reference", "candidate"):
        s = doc.get(name)
        if isinstance(s, dict):
            b = (s.get("bottleneck") or {}).get("line") if isinstance(s.get("bottleneck"), dict) else None
            parts.append(f"{name}: {line(s.get('error') or b or 'profiled')}")
            out[name] = _side(s)
    if isinstance(doc.get("floor"), dict):
        out["floor"] = {**doc["floor"], "derivation": line(doc["floor"].get("derivation"), 400)}
    return fit({"summary": " | ".join(parts) or doc.get("status", ""), **out})


def _side(s: dict[str, Any]) -> dict[str, Any]:
    out = dict(s)
    launches, fp = s.get("launches"), s.get("fingerprint")
    if isinstance(launches, dict):
        table = launches.get("table") or []
        out["launches"] = {**launches, "table": table[:TABLE], "notes": [line(n) for n in launches.get("notes") or ()]}
        if len(table) > TABLE:
            out["launches"]["table_omitted"] = len(table) - TABLE
    if isinstance(fp, dict):
        out["fingerprint"] = {"basis": fp.get("basis"), "histogram_level": fp.get("histogram_level"),
                              "kernels": len(fp.get("kernels") or ()), "histogram": len(fp.get("histogram") or ())}
    return out


def explain_reply(doc: dict[str, Any]) -> dict[str, Any]:
    """The derivations' text (explain-tolerance's), each output's allowed max error first, and their records."""
    texts = [str(t) for t in doc.get("text") or []]
    bounds = [next((ln.strip() for ln in t.splitlines() if "<=" in ln), t.splitlines()[0] if t else "")
              for t in texts]
    head = "; ".join(f"output {i}: {b}" if len(bounds) > 1 else b for i, b in enumerate(bounds))
    return fit({"summary": line(head, 400) or "no outputs", "explanation": texts, "outputs": doc.get("outputs")},
               drop=("outputs",))


def workload_reply(doc: dict[str, Any]) -> dict[str, Any]:
    f = doc.get("floor") or {}
    head = (f"{doc.get('class')} in {doc.get('workload')}: inputs {line(doc.get('inputs'), 160)}; outputs "
            f"{line(doc.get('outputs'), 120)}; {doc.get('parameters')} parameters on {doc.get('device')}")
    if f:
        head += f"; floor {1e3 * f['seconds']:.4g} ms ({f.get('bound')}-bound on {f.get('machine')})"
    b = doc.get("baselines")
    if isinstance(b, dict):
        got = ({r["label"]: r["timing"] for r in b.get("rows") or () if r.get("timing")} if "rows" in b
               else b.get("timings") or {})
        if got:
            head += ("; baselines " + ", ".join(f"{k} {v['median_ms']:.4g} ms" for k, v in got.items())
                     + f" (faster: {b.get('baseline') or b.get('faster')}" + ("" if "rows" in b else ", kept") + ")")
    out = {"summary": head, **doc}
    if isinstance(b, dict) and "rows" in b:          # measured now: a BenchResult
        out["baselines"] = {**b, "rows": [{**r, "timing": timing(r.get("timing"))} for r in b.get("rows") or ()],
                            "conditions": _conditions(b.get("conditions"))}
    elif isinstance(b, dict):                        # kept in the store
        out["baselines"] = {**b, "timings": {k: timing(v) for k, v in (b.get("timings") or {}).items()}}
    else:
        out["baselines"] = None
        out["baselines_note"] = "none kept for this workload: call load_workload with baselines=true to measure them"
    if f:
        out["floor"] = {**f, "derivation": line(f.get("derivation"), 600)}
    return fit(out)


def history_reply(run: dict[str, Any], evaluations: list[dict[str, Any]], best: dict[str, Any] | None,
                  hints: list[str], limit: int) -> dict[str, Any]:
    """A run's evaluations (newest last, the last `limit`), each as one row, and its best."""
    rows = [_eval_row(e) for e in evaluations]
    shown = rows[-limit:] if limit > 0 else []
    acc = sum(1 for e in evaluations if (e.get("verdict") or {}).get("status") == "accepted")
    head = f"run {run.get('run_id')}: {len(rows)} candidates, {acc} accepted; best: " + (
        f"{best['candidate']['strategy']} {best['speedup']['ratio']:.3f}x" if best else "the baseline (none claimed)")
    out = {"summary": head, "run": run, "best": _eval_row(best) if best else None, "evaluations": shown,
           "hints": [line(h, 400) for h in hints]}
    if len(shown) < len(rows):
        out["evaluations_omitted"] = len(rows) - len(shown)
    return fit(out)


def _eval_row(e: dict[str, Any]) -> dict[str, Any]:
    c, v, t, sp = e.get("candidate") or {}, e.get("verdict") or {}, e.get("timing") or {}, e.get("speedup") or {}
    row = {"id": c.get("id"), "strategy": c.get("strategy"), "proposer": c.get("proposer"),
           "generation": c.get("generation"), "status": v.get("status"), "reason": v.get("reason")}
    if v.get("status") != "accepted":
        row["why"] = why(v)
    if t:
        row["median_ms"] = t.get("median_ms")
    if sp:
        row.update(speedup=sp.get("ratio"), claimed=sp.get("claimed"), flagged=sp.get("flagged"))
    if (e.get("insight") or {}).get("bottleneck"):
        row["bottleneck"] = line(e["insight"]["bottleneck"], 160)
    return row


def error_reply(res: dict[str, Any]) -> dict[str, Any]:
    """A job's or the server's error: the CLI's --json error document plus advice."""
    reason = res.get("reason", "internal")
    out = {"status": "error", "reason": reason, "message": line(res.get("message"), 800)}
    if ADVICE.get(reason):
        out["advice"] = ADVICE[reason]
    return out


def fit(doc: dict[str, Any], max_chars: int = MAX_CHARS, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The document within max_chars of JSON: optional bulk goes first (named `drop`, then per-row samples and
    checks, notes, conditions, evaluations kept to the last few); the summary and verdict fields stay."""
    if _size(doc) <= max_chars:
        return doc
    out = dict(doc)
    for k in drop + ("notes", "assumptions", "conditions"):
        if k in out and _size(out) > max_chars:
            out[k] = "(omitted: too long for a reply)"
    for key in ("evaluations", "checks", "outputs"):
        while isinstance(out.get(key), list) and len(out[key]) > 1 and _size(out) > max_chars:
            out[key] = out[key][:-1] if key != "evaluations" else out[key][1:]
            out[f"{key}_truncated"] = True
    if _size(out) > max_chars:          # still too long: the nested documents, as one line each
        out = {k: (v if _size(v) <= 600 else line(json.dumps(v, default=str), 600)) for k, v in out.items()}
    return out


def _size(v: Any) -> int:
    return len(json.dumps(v, default=str))
