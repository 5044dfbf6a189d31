"""The review queue: what waits for a person's decision, with its evidence (the store's `reviews` table).

Two kinds of item:
  result      a timed result the gate flags: a speedup above 3x over the faster baseline (gate/timing.py
              IMPLAUSIBLE, `Speedup.flagged`), the judge's clock and the worker's own in-process clock disagreeing
              by more than TIMER_DISAGREE, or a time near (NEAR_FLOOR) or below the roofline floor
  assumption  a contract assumption an agent proposed (a lower precision, an input domain, ...): the gate judges
              under the default contract until a person accepts it; an accepted one can then be used by its id

One item per key (a run's candidate, a workload's candidate, a workload's proposed contract): the first
evidence is kept, and a decision (accepted or rejected, with its time, who and a note) is recorded once.
`kernelgate review` lists pending items; `kernelgate review accept ID --note ...` / `reject ID --note ...` decide.
A suite's aggregates (suite/aggregate.py) count a flagged result only once it is accepted.
"""
from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from .errors import KernelgateError
from .records import Reason
from .store import Store

FLAG_ABOVE = 3.0            # gate/timing.py IMPLAUSIBLE: speedups above it are flagged (Speedup.flagged)
TIMER_DISAGREE = 1.5        # the judge's median and the worker's own differ by more than this factor
NEAR_FLOOR = 0.8            # a time within this share of the roofline floor's (floor / median >= 0.8)
PENDING, ACCEPTED, REJECTED = "pending", "accepted", "rejected"


# ------------------------------------------------------------------ what the gate flags

def result_flags(speedup: dict[str, Any] | None, timing: dict[str, Any] | None,
                 floor_fraction: float | None = None, baseline: dict[str, Any] | None = None) -> list[str]:
    """One line per reason a timed result waits for a person (records' to_json documents); [] when none.

    A speedup above 3x is the gate's own flag (Speedup.flagged). The others concern a claimed speedup only:
    the judge's clock and the worker's own disagreeing for the candidate by more than TIMER_DISAGREE times what
    they do for the baseline it was timed against (both carry the same harness, which the judge's figure
    subtracts and the worker's never contains), and a median near or below the roofline floor."""
    out = []
    if speedup and (speedup.get("flagged") or _num(speedup.get("ratio")) > FLAG_ABOVE):
        out.append(f"speedup {_num(speedup.get('ratio')):.2f}x over the faster baseline is above {FLAG_ABOVE:g}x: "
                   "implausibly large until a person has looked")
    if not (speedup and speedup.get("claimed")):
        return out
    gap_c, gap_b = _clock_gap(timing), _clock_gap(baseline)
    if gap_c and gap_b and max(gap_c / gap_b, gap_b / gap_c) > TIMER_DISAGREE:
        out.append(f"timer disagreement: judge's / worker's own median is {gap_c:.2f} for the candidate "
                   f"({_num(timing['median_ms']):.4g} / {_num(timing['inproc_ms']):.4g} ms) against {gap_b:.2f} for "
                   f"the baseline: the two clocks disagree about this candidate")
    f = _num(floor_fraction)
    if f >= 1.0:
        out.append(f"below the roofline floor: the median is {1 / f:.2f}x the floor's time (faster than the "
                   "machine model allows)")
    elif f >= NEAR_FLOOR:
        out.append(f"near the roofline floor: {100 * f:.0f}% of the floor's rate")
    return out


def _clock_gap(t: dict[str, Any] | None) -> float | None:
    """The judge's median over the worker's own (in-process) median, or None."""
    judge, own = _num((t or {}).get("median_ms")), _num((t or {}).get("inproc_ms"))
    return judge / own if judge > 0 and own > 0 else None


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and v == v else 0.0


def short(item: dict[str, Any]) -> dict[str, Any]:
    """What a reply carries of an item: id, status, its flags, the decision's note."""
    out = {"id": item["id"], "kind": item["kind"], "status": item["status"], "flags": item["flags"]}
    if item["status"] != PENDING:
        out["note"] = item["note"]
    else:
        out["next"] = "waits for a person: kernelgate review"
    return out


# ------------------------------------------------------------------ queueing

def queue_bench(store: Store, doc: dict[str, Any], source: str = "mcp") -> dict[str, dict[str, Any]]:
    """Queue each flagged candidate row of a bench (BenchResult.to_json()): {label: item}."""
    out = {}
    floor = (doc.get("conditions") or {}).get("floor") or {}
    for row in doc.get("rows") or []:
        v = row.get("verdict") or {}
        if not v or v.get("status") != ACCEPTED or not row.get("timing"):
            continue
        base = next((r for r in doc["rows"] if r.get("label") == doc.get("baseline")), {}).get("timing") or {}
        flags = result_flags(row.get("speedup"), row.get("timing"), row.get("floor_fraction"), base)
        if not flags:
            continue
        sp, t = row.get("speedup") or {}, row["timing"]
        evidence = {"workload": doc.get("workload"), "candidate": row.get("label"), "device": doc.get("device"),
                    "median_ms": t.get("median_ms"), "inproc_ms": t.get("inproc_ms"), "spread": t.get("spread"),
                    "samples": len(t.get("samples_ms") or ()), "baseline": doc.get("baseline"),
                    "baseline_ms": base.get("median_ms"), "speedup": sp.get("ratio"),
                    "ci": [sp.get("low"), sp.get("high")], "claimed": sp.get("claimed"),
                    "floor_fraction": row.get("floor_fraction"), "floor": floor or None,
                    "candidate_hash": v.get("candidate_hash")}
        subject = (f"{row.get('label')} on {doc.get('device')}: {_x(sp.get('ratio'))} over {doc.get('baseline')} "
                   f"({Path(str(doc.get('workload'))).name})")
        item, _ = store.add_review(f"result:{v.get('workload_hash')}:{v.get('candidate_hash')}:{doc.get('target')}",
                                   "result", subject, flags, evidence, doc.get("workload"), v.get("workload_hash"),
                                   source)
        out[str(row.get("label"))] = item
    return out


def queue_submission(store: Store, doc: dict[str, Any], floor_fraction: float | None = None,
                     source: str = "mcp") -> dict[str, Any] | None:
    """Queue a submitted candidate's result (submit.Submission.to_json()) when flagged; the item or None."""
    if doc.get("status") != ACCEPTED or not doc.get("timing"):
        return None
    flags = result_flags(doc.get("speedup"), doc.get("timing"), floor_fraction, doc.get("baseline"))
    if not flags:
        return None
    c, sp, t, b = doc["candidate"], doc.get("speedup") or {}, doc["timing"], doc.get("baseline") or {}
    evidence = {"run_id": doc.get("run_id"), "out": doc.get("out"), "workload": doc.get("workload"),
                "candidate": c.get("id"), "strategy": c.get("strategy"), "proposer": c.get("proposer"),
                "file": doc.get("file"), "median_ms": t.get("median_ms"), "inproc_ms": t.get("inproc_ms"),
                "spread": t.get("spread"), "baseline": b.get("label"), "baseline_ms": b.get("median_ms"),
                "speedup": sp.get("ratio"), "ci": [sp.get("low"), sp.get("high")], "claimed": sp.get("claimed"),
                "floor_fraction": floor_fraction, "candidate_file": f"{doc.get('out')}/candidates/{c.get('id')}.py"}
    subject = f"run {doc.get('run_id')}: {c.get('strategy')} {_x(sp.get('ratio'))} over {b.get('label')}"
    item, _ = store.add_review(f"run:{doc.get('run_id')}:{c.get('id')}", "result", subject, flags, evidence,
                               doc.get("workload"), (doc.get("verdict") or {}).get("workload_hash"), source)
    return item


def queue_optimize(store: Store, res: Any, out: str, source: str = "cli") -> dict[str, Any] | None:
    """Queue an optimize run's kept result (records.OptimizeResult) when flagged; the item or None."""
    best = res.best
    if best is None or best.timing is None or res.final is None:
        return None
    sp, t, b = res.final.to_json(), best.timing.to_json(), best.baseline.to_json() if best.baseline else {}
    flags = result_flags(sp, t, None, b)
    if not flags:
        return None
    c = best.candidate
    evidence = {"out": out, "workload": res.workload, "candidate": c.id, "strategy": c.strategy,
                "proposer": c.proposer, "median_ms": t.get("median_ms"), "inproc_ms": t.get("inproc_ms"),
                "spread": t.get("spread"), "baseline": b.get("label"), "baseline_ms": b.get("median_ms"),
                "speedup": sp.get("ratio"), "ci": [sp.get("low"), sp.get("high")], "claimed": sp.get("claimed"),
                "candidate_file": f"{out}/candidates/{c.id}.py"}
    subject = f"optimize {Path(res.workload).name}: {c.strategy} {_x(sp.get('ratio'))} over {b.get('label')}"
    item, _ = store.add_review(f"optimize:{best.verdict.workload_hash}:{c.id}:{res.target}", "result", subject, flags,
                               evidence, res.workload, best.verdict.workload_hash, source)
    return item


def propose_assumption(store: Store, workload: str, workload_hash: str, fields: dict[str, Any], why: str,
                       source: str = "mcp") -> dict[str, Any]:
    """Queue a contract an agent proposes for a workload (contract.py's keys: precision, domain, vary, inplace,
    strides, one_step); an invalid one is a usage error. The item (an earlier identical proposal's, if any)."""
    from . import contract as contract_mod
    if not isinstance(fields, dict) or not fields:
        raise KernelgateError("an assumption is a contract's fields, e.g. {\"precision\": [\"bf16\"]} or "
                              "{\"domain\": {\"0\": [-1, 1]}}", Reason.USAGE)
    if not why or not why.strip():
        raise KernelgateError("say why the workload allows the assumption (the person deciding reads it)", Reason.USAGE)
    try:
        con = contract_mod.parse(dict(fields))
    except KernelgateError as e:
        raise KernelgateError(f"the proposed contract does not parse: {e}", Reason.USAGE) from None
    canon = json.dumps(fields, sort_keys=True, default=str)
    key = f"assumption:{workload_hash}:{hashlib.sha256(canon.encode()).hexdigest()[:16]}"
    changed = [a for a in con.assumptions() if a not in _default_assumptions()]
    subject = f"{Path(workload).name}: " + "; ".join(changed or con.assumptions())
    item, _ = store.add_review(key, "assumption", subject, [f"proposed: {why.strip()[:500]}"],
                               {"workload": workload, "contract": fields, "assumptions": con.assumptions()},
                               workload, workload_hash, source)
    return item


def _default_assumptions() -> list[str]:
    from .records import Contract
    return Contract().assumptions()


def accepted_contract(store: Store, item_id: int, workload_hash: str) -> dict[str, Any]:
    """The contract fields of an accepted assumption for this workload (usage error otherwise)."""
    item = store.review(int(item_id))
    if item is None or item["kind"] != "assumption":
        raise KernelgateError(f"no proposed assumption {item_id} in the review queue", Reason.USAGE)
    if item["status"] != ACCEPTED:
        raise KernelgateError(f"assumption {item_id} is {item['status']}: only an assumption a person accepted can be "
                              "used (kernelgate review)", Reason.USAGE)
    if item["workload_hash"] != workload_hash:
        raise KernelgateError(f"assumption {item_id} was accepted for another workload ({item['workload']})",
                              Reason.USAGE)
    return dict(item["evidence"]["contract"])


def suite_reviews(rows: list[dict[str, Any]], suite: dict[str, Any],
                  store: Store | str | None = None) -> dict[str, dict[str, Any]]:
    """Each flagged finished problem of a suite, queued (once) and looked up: {problem id: item}. The item's key
    is the run's best candidate (result.json's run_id and best_id), so a decision follows the result."""
    flagged = [r for r in rows if r.get("outcome") == "ok" and r.get("flagged")]
    if not flagged:
        return {}
    st = store if isinstance(store, Store) else Store(store or suite.get("store"))
    out = {}
    for r in flagged:
        doc = _result_doc(suite, r)
        best = next((e for e in doc.get("evaluations") or [] if (e.get("candidate") or {}).get("id")
                     == doc.get("best_id")), {}) if doc else {}
        key = (f"run:{doc['run_id']}:{doc['best_id']}" if doc and doc.get("run_id") and doc.get("best_id")
               else f"suite:{suite.get('out') or suite.get('dir') or ''}:{r['id']}:{r.get('speedup')}")
        sp = {"ratio": r.get("speedup"), "flagged": True, "claimed": r.get("claimed")}
        flags = result_flags(sp, best.get("timing"), None, best.get("baseline"))
        evidence = {"problem": r["id"], "source": r.get("source"), "speedup": r.get("speedup"), "ci": r.get("ci"),
                    "best_strategy": r.get("best_strategy"), "best_ms": r.get("best_ms"),
                    "baseline": r.get("baseline_kind"), "baseline_ms": r.get("baseline_ms"),
                    "device": r.get("device"), "run_id": (doc or {}).get("run_id"),
                    "candidate": (doc or {}).get("best_id"), "report": _under(suite, r.get("report")),
                    "confirmations": len((doc or {}).get("confirmations") or ())}
        subject = (f"suite problem {r['id']}: {r.get('best_strategy')} {_x(r.get('speedup'))} over "
                   f"{r.get('baseline_kind')}")
        item, _ = st.add_review(key, "result", subject, flags, evidence, r.get("source"),
                                (doc or {}).get("workload_hash"), "suite")
        out[r["id"]] = item
    return out


def _under(suite: dict[str, Any], rel: str | None) -> str | None:
    return str(Path(suite["out"]) / rel) if rel and suite.get("out") else rel


def _result_doc(suite: dict[str, Any], row: dict[str, Any]) -> dict[str, Any] | None:
    """A problem's result.json (beside its report.html under the suite's out directory), or None."""
    if not suite.get("out") or not row.get("report"):
        return None
    try:
        doc = json.loads((Path(suite["out"]) / str(row["report"])).with_name("result.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _x(v: Any) -> str:
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "?x"


# ------------------------------------------------------------------ deciding

def decide(store: Store, item_id: int, status: str, note: str, by: str | None = None) -> dict[str, Any]:
    """Record a person's decision (accepted / rejected) with the time and a note; usage errors for an unknown
    item, a missing note, or an item decided before."""
    if not note or not note.strip():
        raise KernelgateError("--note is required: say what you checked", Reason.USAGE)
    item = store.review(int(item_id))
    if item is None:
        raise KernelgateError(f"no review item {item_id} (kernelgate review --all lists them)", Reason.USAGE)
    if item["status"] != PENDING:
        raise KernelgateError(f"review item {item_id} was {item['status']} on {_when(item['decided'])} by "
                              f"{item['decided_by']} ({item['note']}): a decision is recorded once", Reason.USAGE)
    got = store.decide_review(int(item_id), status, note.strip(), by or _user())
    if got is None or got["status"] != status:
        raise KernelgateError(f"review item {item_id} was decided meanwhile", Reason.USAGE)
    return got


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


# ------------------------------------------------------------------ the command

def add_parser(sub: Any) -> argparse.ArgumentParser:
    r = sub.add_parser("review", help="flagged results and proposed assumptions awaiting a person's decision")
    r.add_argument("action", nargs="?", default="list", choices=("list", "show", "accept", "reject"),
                   help="list (default), show ID, accept ID, reject ID")
    r.add_argument("id", nargs="?", type=int, default=None, help="the item's id (accept / reject / show)")
    r.add_argument("--note", default=None, help="why (required with accept and reject)")
    r.add_argument("--all", action="store_true", help="list decided items too")
    r.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    r.add_argument("--store", default=None, help="SQLite store path (default: $KERNELGATE_STORE or "
                                                 "~/.cache/kernelgate/store.sqlite)")
    return r


def main(args: argparse.Namespace) -> int:
    st = Store(args.store)
    if args.action == "list":
        if args.id is not None:
            raise KernelgateError("kernelgate review lists; give an id with show, accept or reject", Reason.USAGE)
        items = st.reviews(None if args.all else PENDING)
        print(json.dumps(items, indent=1, default=str) if args.json else format_items(items, args.all))
        return 0
    if args.id is None:
        raise KernelgateError(f"kernelgate review {args.action} needs an item's id", Reason.USAGE)
    if args.action == "show":
        item = st.review(args.id)
        if item is None:
            raise KernelgateError(f"no review item {args.id}", Reason.USAGE)
    else:
        item = decide(st, args.id, ACCEPTED if args.action == "accept" else REJECTED, args.note or "")
    print(json.dumps(item, indent=1, default=str) if args.json else format_item(item))
    return 0


def format_items(items: list[dict[str, Any]], every: bool = False) -> str:
    if not items:
        return "no review items" if every else "nothing awaits review"
    head = (f"{len(items)} item{'s' if len(items) > 1 else ''}" + ("" if every else " pending")
            + "; decide with: kernelgate review accept ID --note '...' (or reject ID --note '...')")
    return "\n".join([head] + [format_item(i) for i in items])


def format_item(item: dict[str, Any]) -> str:
    lines = [f"#{item['id']:<4} {item['kind']:<10} {item['status']:<8} {_when(item['created'])}  "
             f"{item['source'] or '-':<6} {item['subject']}"]
    if item.get("workload"):
        lines.append(f"      workload  {item['workload']}")
    lines += [f"      flag      {f}" for f in item["flags"]]
    ev = ", ".join(f"{k} {_short(v)}" for k, v in item["evidence"].items() if v not in (None, "", [], {}))
    lines.append(f"      evidence  {ev}")
    if item["status"] != PENDING:
        lines.append(f"      decided   {item['status']} {_when(item['decided'])} by {item['decided_by']}: "
                     f"{item['note']}")
    return "\n".join(lines)


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and all(isinstance(x, float) for x in v):
        return "[" + ", ".join(f"{x:.4g}" for x in v) + "]"
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
