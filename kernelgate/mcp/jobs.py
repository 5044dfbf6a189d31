"""One evaluation for the MCP server, in a process of its own: `python -m kernelgate.mcp.jobs REQUEST.json`.

The server never judges in its own process: each verify, bench, profile, submit, tolerance or workload load
runs here, so a call's timeout can end it (SIGTERM unwinds through the API, closing the gate's workers; the
server kills what is left after a grace period), a crash takes only this process, and the server stays free
of the judge's state. Candidates run where they always run: in the gate's confined workers (api.verify /
bench / profile, submit.submit). The request is a JSON file (kind, args, store, result path); the result is
written as JSON to `result`: {"ok": true, "doc": ...} with the records' to_json documents (what the CLI's
--json prints), or {"ok": false, "status": "error", "reason": ..., "message": ...}. Progress goes to stderr.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any


def _contract(fields: dict[str, Any] | None):
    from .. import contract as contract_mod
    from ..records import Contract
    return contract_mod.parse(dict(fields)) if fields else Contract()


def _config(a: dict[str, Any], **more: Any):
    from ..config import gate_config
    kw = {k: v for k, v in (("call_timeout", a.get("call_timeout")), ("trials", a.get("trials"))) if v is not None}
    return gate_config(**kw, **more)


def _timing(a: dict[str, Any]):
    from ..config import TimingConfig
    return TimingConfig(warmup_ms=float(a.get("warmup_ms", 300.0)), rounds=int(a.get("rounds", 10)),
                        iters=int(a.get("iters", 10)))


def _floor_json(f: Any) -> dict[str, Any] | None:
    if f is None:
        return None
    return {"seconds": f.floor_s, "compute_s": f.compute_s, "memory_s": f.memory_s, "bound": f.bound,
            "machine": f.machine, "precision": f.precision, "derivation": f.derivation}


def do_workload(a: dict[str, Any], store: Any) -> dict[str, Any]:
    """Summary of a workload (inputs, outputs, parameters, admission), its roofline floor on the target, and
    its baselines: measured when asked (eager and torch.compile, interleaved), else the store's kept ones."""
    from .. import workload
    from ..gate import baselines as baselines_mod
    from ..gate import bench as bench_mod
    from ..gate.judge import device_name, prepare
    con = _contract(a.get("contract"))
    cfg = _config(a)
    spec = workload.Spec.parse(a["ref"], workload.REFERENCE_CLASS, a.get("inputs"))
    task = prepare(spec, a["target"], con, cfg.memory)
    model = task.oracle.model
    doc: dict[str, Any] = {
        "status": "ok", "workload": spec.path, "class": spec.cls, "workload_hash": task.hash,
        "target": task.target, "device": device_name(task.device), "inputs": workload.describe(task.given),
        "outputs": workload.describe(task.out_meta), "parameters": int(sum(p.numel() for p in model.parameters())),
        "admission": {"ok": task.admission.ok, "check": task.admission.name, "detail": task.admission.detail},
        "contract": con.assumptions(), "floor": _floor_json(task.floor),
        "memory": task.memory.to_json() if task.memory is not None else None}
    if a.get("baselines"):
        res = bench_mod.bench(task, [], cfg, _timing(a), tuple(a.get("which") or bench_mod.BASELINES), None)
        doc["baselines"] = res.to_json()
    else:
        from ..search import SearchConfig
        kept = store.baselines(baselines_mod.key(task, SearchConfig().timing))
        doc["baselines"] = None if kept is None else {"kept": True, "measured": kept[0], **kept[1]}
    return doc


def do_verify(a: dict[str, Any], store: Any) -> dict[str, Any]:
    from .. import api
    v = api.verify(a["ref"], a["cand"], target=a["target"], contract=_contract(a.get("contract")),
                   inputs=a.get("inputs"), config=_config(a), store=store)
    return v.to_json()


def do_bench(a: dict[str, Any], store: Any) -> dict[str, Any]:
    from .. import api
    res = api.bench(a["ref"], list(a["cands"]), target=a["target"], contract=_contract(a.get("contract")),
                    inputs=a.get("inputs"), config=_config(a), timing=_timing(a),
                    baselines=tuple(a.get("which") or ("eager", "compile")), store=store,
                    progress=lambda m: print(m, file=sys.stderr, flush=True))
    return res.to_json()


def do_profile(a: dict[str, Any], store: Any) -> dict[str, Any]:
    from .. import api
    rep = api.profile(a["ref"], a.get("cand"), target=a["target"], contract=_contract(a.get("contract")),
                      inputs=a.get("inputs"), config=_config(a), warmup=int(a.get("warmup", 3)),
                      forwards=int(a.get("forwards", 5)))
    return rep.to_json(int(a.get("records", 20)))


def do_explain(a: dict[str, Any], store: Any) -> dict[str, Any]:
    from .. import api
    ds = api.explain_tolerance(a["ref"], target=a["target"], contract=_contract(a.get("contract")),
                               inputs=a.get("inputs"))
    return {"status": "ok", "outputs": [d.to_json() for d in ds], "text": [d.to_text() for d in ds]}


def do_submit(a: dict[str, Any], store: Any) -> dict[str, Any]:
    from .. import submit as submit_mod
    fields = a.get("contract")
    sub = submit_mod.submit(a["out_dir"], a["cand"], model=a.get("model"), contract=_contract(fields) if fields
                            else None, inputs=a.get("inputs"), config=_config(a),
                            timing=_timing(a) if a.get("rounds") else None, store=store,
                            progress=lambda m: print(m, file=sys.stderr, flush=True))
    doc = sub.to_json()
    if sub.accepted and sub.evaluation.timing is not None:
        doc["floor_fraction"] = _floor_fraction(a, sub, fields)
    return doc


def _floor_fraction(a: dict[str, Any], sub: Any, fields: dict[str, Any] | None) -> float | None:
    """The roofline floor over a submitted candidate's median (1.0 = at the floor), or None."""
    from .. import targets, workload
    from ..gate.judge import resolve_device
    from ..oracle import own_precision
    from ..profiling import roofline
    from ..submit import find_workload, load_run
    try:
        out = Path(a["out_dir"])
        ref = workload.load_reference(find_workload(out, load_run(out), a.get("model"), a.get("inputs")))
        device = resolve_device(sub.target)
        model = ref.build(seed=0).to(device)
        precision = "tf32" if "tf32" in _contract(fields).precision else None
        meta = not own_precision(Path(ref.spec.path).read_text(), device)       # kernels take no meta tensors
        f = roofline.floor(roofline.count(model, ref.inputs(seed=0, device=device), meta=meta),
                           targets.machine(device), precision)
        return f.floor_s * 1e3 / sub.evaluation.timing.median_ms if sub.evaluation.timing.median_ms > 0 else None
    except Exception as e:  # noqa: BLE001 - the floor is a signal for review, never a reason to lose the result
        print(f"no roofline floor for the review check: {type(e).__name__}: {e}", file=sys.stderr)
        return None


KINDS = {"workload": do_workload, "verify": do_verify, "bench": do_bench, "profile": do_profile,
         "explain": do_explain, "submit": do_submit}


def run(request: dict[str, Any]) -> dict[str, Any]:
    """A request's result document (never raises for a usage, task or candidate problem)."""
    from ..errors import KernelgateError
    from ..store import Store
    try:
        store = Store(request.get("store"))
        return {"ok": True, "doc": KINDS[request["kind"]](dict(request.get("args") or {}), store)}
    except KernelgateError as e:
        return {"ok": False, "status": "error", "reason": e.reason.value, "message": str(e)}
    except KeyboardInterrupt:
        return {"ok": False, "status": "error", "reason": "timeout",
                "message": "the call's time limit was reached: stopped (its workers closed)"}
    except Exception as e:  # noqa: BLE001 - the server reports it; the traceback goes to this job's log
        traceback.print_exc()
        return {"ok": False, "status": "error", "reason": "internal",
                "message": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def _on_term(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt          # unwinds through the API: sessions close their workers


def main(argv: list[str] | None = None) -> int:
    from ..suite.child import die_with_parent
    argv = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(argv[0]).read_text())
    die_with_parent(request.get("parent"))          # never outlives the server
    signal.signal(signal.SIGTERM, _on_term)
    result = run(request)
    tmp = Path(request["result"] + ".tmp")
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, request["result"])
    return 0 if result["ok"] else 2


if __name__ == "__main__":
    raise SystemExit(main())
