"""Is a long-lived baseline worker slower than a fresh one? (a bias that would inflate short forwards' ratios)

    python benchmarks/diag_baseline_worker.py --out baseline_worker.json [--target cuda]
                                              [--only elementwise_chain,softmax_scale] [--repeats 3]

On the H200 suite, elementwise_chain's torch.compile baseline measured 0.353 ms in the search's kept worker (runs
3-5 alike) but 0.243 ms in diag_timed_window.py's in-process gate loop, while a compile-mode candidate in a fresh
worker measured 0.237 ms in the same interleaved measurement as the baseline. This script reproduces the
search's life of a baseline worker and times it against fresh ones, interleaved, with the search's timing:

  kept            built first, timed alone (the search's baseline measurement), profiled (insight.observe, as
                  the search profiles the faster baseline), then timed `repeats` more times with eager
  fresh           built just before the final measurement
  fresh+profiled  built, profiled, then measured
  eager           the eager reference, kept like `kept`

Medians in ms per workload and measurement; a table last, JSON in --out.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate import workload  # noqa: E402
from kernelgate.config import GateConfig, TimingConfig  # noqa: E402
from kernelgate.gate.bench import measure  # noqa: E402
from kernelgate.gate.judge import Session, prepare  # noqa: E402
from kernelgate.profiling import summary as insight  # noqa: E402
from kernelgate.records import Contract  # noqa: E402
from kernelgate.search import SearchConfig  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

SHORT = "elementwise_chain,softmax_scale,rms_norm,layernorm_residual"


def session(task, spec, cfg, label: str, compiled: bool) -> Session:
    s = Session(task, spec, cfg, label, trusted=True)
    s.build(compile_options={} if compiled else None, baseline=True)
    return s


def run(path: Path, target: str, repeats: int, tcfg: TimingConfig) -> dict:
    spec = workload.Spec(str(path), "Model")
    task = prepare(spec, target, Contract())
    cfg = GateConfig()
    say = (lambda m: None)
    sessions: dict[str, Session] = {}
    out: dict[str, object] = {"workload": path.stem, "measurements": []}

    def timed(names: list[str], what: str) -> None:
        t, _ = measure(task, {n: sessions[n] for n in names}, cfg, tcfg, say)
        row = {"what": what, **{n: t[n].median_ms for n in names}, "spread": {n: t[n].spread for n in names}}
        out["measurements"].append(row)
        print(path.stem, json.dumps(row), flush=True)

    try:
        sessions["kept"] = session(task, spec, cfg, "kept", True)
        sessions["eager"] = session(task, spec, cfg, "eager", False)
        timed(["eager", "kept"], "baselines, as the search first times them")
        notes: list[str] = []
        insight.try_observe(sessions["kept"], notes, "kept")
        for k in range(repeats):
            timed(["eager", "kept"], f"after the profile, {k + 1}")
        sessions["fresh+profiled"] = session(task, spec, cfg, "fresh+profiled", True)
        insight.try_observe(sessions["fresh+profiled"], notes, "fresh+profiled")
        sessions["fresh"] = session(task, spec, cfg, "fresh", True)
        timed(["kept", "fresh", "fresh+profiled", "eager"], "kept vs fresh, interleaved")
        timed(["fresh", "kept", "eager", "fresh+profiled"], "again, another order")
        out["notes"] = notes
    finally:
        for s in sessions.values():
            s.worker.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--only", default=SHORT)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tcfg = SearchConfig().timing
    rows = [run(ROOT / "benchmarks/suite" / f"{w}.py", args.target, args.repeats, tcfg) for w in args.only.split(",")]
    doc = {"conditions": conditions(args.target), "timing": {"warmup_ms": tcfg.warmup_ms, "rounds": tcfg.rounds,
                                                          "iters": tcfg.iters}, "workloads": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'workload':20} {'measurement':45} {'kept':>8} {'fresh':>8} {'fresh+pr':>8} {'eager':>8}")
    for r in rows:
        for m in r["measurements"]:
            cells = [f"{m[k]:8.4f}" if k in m else f"{'':8}" for k in ("kept", "fresh", "fresh+profiled", "eager")]
            print(f"{r['workload']:20} {m['what'][:45]:45} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
