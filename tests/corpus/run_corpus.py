"""Run every manifest case through kernelgate.api.verify and compare with the expectation.

  python tests/corpus/run_corpus.py [--gpu | --gpu-only] [--cuda-target cuda:0] [--case NAME ...] [--json FILE] [-v]

GPU cases (`gpu = true`) run with target="cuda" and only with --gpu / --gpu-only.
A case matches when the status equals `expect`, the reason is `reason` or one of `also`, and `note`
(if given) appears in one of the verdict's notes. Exit status 1 if any case does not match.
Verdicts go to a throwaway store, not the user's.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))      # the repository root, for `import kernelgate`


def load_cases() -> list[dict]:
    return tomllib.loads((HERE / "manifest.toml").read_text())["case"]


def run_case(verify, case: dict, store: str | None, cuda_target: str = "cuda") -> dict:
    kwargs = {"target": cuda_target if case.get("gpu") else "cpu"}
    if "contract" in case:
        kwargs["contract"] = str(HERE / case["contract"])
    if "call_timeout" in case:
        kwargs["call_timeout"] = float(case["call_timeout"])
    if store is not None:
        kwargs["store"] = store
    t0 = time.time()
    try:
        v = verify(str(HERE / case["ref"]), str(HERE / case["cand"]), **kwargs)
        status, reason, message, notes = v.status.value, v.reason.value, v.message, list(v.notes)
    except Exception as e:  # noqa: BLE001 - an exception out of verify is itself a finding
        r = getattr(e, "reason", None)
        if r is not None and hasattr(r, "value"):      # KernelgateError: a task/usage error (exit 2)
            status, reason, message, notes = "error", r.value, f"(raised {type(e).__name__}) {e}", []
        else:
            status, reason, message, notes = "exception", type(e).__name__, str(e), []
    seconds = time.time() - t0
    allowed = [case["reason"]] + list(case.get("also", []))
    ok = status == case["expect"] and reason in allowed
    note_ok = True
    if "note" in case:
        note_ok = any(case["note"].lower() in n.lower() for n in notes) or case["note"].lower() in message.lower()
    return {"name": case["name"], "row": case["row"], "expect": case["expect"], "want": "|".join(allowed),
            "status": status, "reason": reason, "match": ok and note_ok, "note_ok": note_ok,
            "message": message, "notes": notes, "seconds": round(seconds, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true", help="also run the gpu = true cases (target cuda)")
    ap.add_argument("--gpu-only", action="store_true")
    ap.add_argument("--case", nargs="*", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cuda-target", default="cuda", help="target string for gpu cases (e.g. cuda:0)")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()

    from kernelgate.api import verify

    cases = load_cases()
    if args.case:
        cases = [c for c in cases if c["name"] in args.case]
    if args.gpu_only:
        cases = [c for c in cases if c.get("gpu")]
    elif not args.gpu:
        cases = [c for c in cases if not c.get("gpu")]

    results = []
    with tempfile.TemporaryDirectory(prefix="kg-corpus-") as tmp:
        store = str(Path(tmp) / "store.sqlite") if "store" in inspect.signature(verify).parameters else None
        for case in cases:
            r = run_case(verify, case, store, args.cuda_target)
            results.append(r)
            flag = "ok " if r["match"] else "BAD"
            print(f"{flag} {r['name']:36s} row {r['row']:>2}  expect {r['expect']:8s} {r['want']:26s} "
                  f"got {r['status']:8s} {r['reason']:14s} {r['seconds']:6.1f}s", flush=True)
            if args.v or not r["match"]:
                print(f"      {r['message'][:300]}", flush=True)
                if "note" in case and not r["note_ok"]:
                    print(f"      note '{case['note']}' not found in notes {r['notes']}", flush=True)
    bad = [r for r in results if not r["match"]]
    print(f"\n{len(results) - len(bad)}/{len(results)} cases match the manifest")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
