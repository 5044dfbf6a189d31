"""Where the gate's time goes on a task with gigabytes of inputs: prepare, then one judge of the reference itself.

    python benchmarks/diag_lean.py DEV_DIR --only 48_Mean* [--only ...] --out lean.json [--memory lean]
                                   [--emitted eager]

With --emitted, the module judged is the one optimize emits from that baseline, on optimize's short plan for it;
each row records task admission's time, one move of the given inputs to the host (Task.crossing_s) and what
search/policy.least_s makes of them before a run measured anything.

For each problem (KernelBench format, read in place), in a subprocess of its own while this process samples
the device's used memory: `gate.task.prepare` under cProfile (the functions with the most cumulative time),
then `gate.judge.judge_session` of the reference file as a candidate with its phases timed (worker start,
build, trials, re-check). Seconds, the gate's peak device memory against the forward's (gate/memory.py), the
memory plan. One JSON document with conditions; a table last. A diagnostic, not a benchmark of speedups.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import contextlib, cProfile, io, json, pstats, sys, tempfile, time
from kernelgate import workload
from kernelgate.config import gate_config
from kernelgate.gate.judge import judge_session, prepare
from kernelgate.records import Contract
path, memory, target, emitted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
T0 = time.monotonic()
TOTALS = {}
print(f"KGT0 {T0!r}", file=sys.stderr, flush=True)
def traced(owner, name, label):     # each call's start and end on stderr (kept when the child is killed)
    import functools, torch
    f = getattr(owner, name)
    @functools.wraps(f)
    def wrapper(*a, **k):
        t = time.monotonic()
        print(f"[{t - T0:7.2f}s] > {label}", file=sys.stderr, flush=True)
        try:
            return f(*a, **k)
        finally:
            used = ""
            if torch.cuda.is_available():
                free, total = torch.cuda.mem_get_info()
                used = f" device used {(total - free) / 2**30:.1f} GiB, this process {torch.cuda.memory_reserved() / 2**30:.1f}"
            rss = next((int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmRSS:")), 0)
            used += f"; host used {kernelgate.gate.memory.host_used() / 2**30:.1f} GiB, judge {rss / 2**20:.1f}"
            n, secs = TOTALS.get(label, (0, 0.0))
            TOTALS[label] = (n + 1, secs + time.monotonic() - t)
            print(f"[{time.monotonic() - T0:7.2f}s] < {label} {time.monotonic() - t:.2f}s{used}", file=sys.stderr, flush=True)
    setattr(owner, name, wrapper)
import kernelgate.gate.admission, kernelgate.gate.judge, kernelgate.gate.memory, kernelgate.gate.session, kernelgate.gate.task
import kernelgate.oracle, kernelgate.gate.trials, kernelgate.gate.prober, kernelgate.gate.correctness, kernelgate.gate.checks, kernelgate.sandbox.ipc
g = kernelgate.gate
for owner, names in [(g.memory, ("peak",)), (g.task, ("inputs_at", "_floor", "timing_pool")), (g.admission, ("admit",)),
                     (workload, ("widen", "perturb")), (g.judge, ("_timed_recheck",)),
                     (kernelgate.oracle.Oracle, ("run", "probe", "run_as")),
                     (g.correctness, ("error_stats", "derive")), (g.checks.Comparator, ("expected",)),
                     (kernelgate.sandbox.ipc, ("pack", "unpack")),
                     (g.session.Session, ("call", "check_outputs", "build", "settle", "release", "recheck")),
                     (kernelgate.gate.prober.Prober, ("ok", "nonfinite_ok"))]:
    for name in names:
        traced(owner, name, f"{getattr(owner, '__name__', '').split('.')[-1]}.{name}")
spec = workload.Spec.parse(path, workload.REFERENCE_CLASS, None)
doc, phases = {}, {}
t0 = time.monotonic()
pr = cProfile.Profile()
pr.enable()
task = prepare(spec, target, Contract(), memory)
pr.disable()
doc["prepare_s"] = time.monotonic() - t0
st = pstats.Stats(pr)
rows = []
for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():
    if "kernelgate" in file or fn.startswith("<built-in") or fn.startswith("<method"):
        rows.append((ct, f"{file.split('kernelgate/')[-1]}:{line}({fn})", nc))
doc["prepare_top"] = [{"cum_s": round(c, 3), "fn": f, "calls": n} for c, f, n in sorted(rows, reverse=True)[:25]]
doc["plan"] = task.memory.to_json() if task.memory is not None else None
from kernelgate.search.policy import least_s
doc["admission_s"] = round(task.admission_s, 3)
doc["crossing_s"] = round(getattr(task, "crossing_s", 0.0), 3)
doc["least_s"] = least_s(task.admission_s, None, task.device, getattr(task, "crossing_s", 0.0), lean=task.lean)
cfg = gate_config()
if emitted not in ("", "none"):      # the module optimize emits from a baseline, judged as optimize's check_baseline does
    import dataclasses
    from pathlib import Path
    from kernelgate import api, emit as emit_mod
    mod = Path(tempfile.mkdtemp()) / "optimized.py"
    emit_mod.emit(mod, emit_mod.baseline_source(Path(path).read_text(), workload.REFERENCE_CLASS, emitted),
                  workload.REFERENCE_CLASS, task.device, [task.args(task.given)], f"baseline ({emitted})")
    path = str(mod)
    cfg = dataclasses.replace(cfg, trials=min(cfg.trials, api.EMITTED_BASELINE_TRIALS))
@contextlib.contextmanager
def phase(name):
    t = time.monotonic()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.monotonic() - t
if emitted == "none":    # --prepare-only
    doc["totals"] = {k: [n, round(x, 2)] for k, (n, x) in TOTALS.items()}
    print("KGLEAN " + json.dumps(doc))
    sys.exit(0)
t1 = time.monotonic()
pj = cProfile.Profile()
pj.enable()
try:
    v, s = judge_session(task, workload.Spec(path, workload.REFERENCE_CLASS), cfg, phase=phase, own_code=True,
                         reduced="the module emitted from a baseline" if emitted else "")
    s.worker.close()
    doc["verdict"] = f"{v.status.value}: {v.reason.value}: {v.message}"[:300]
except Exception as e:
    doc["verdict"] = f"{type(e).__name__}: {e}"[:300]
pj.disable()
doc["judge_s"] = time.monotonic() - t1
rows = []
for (file, line, fn), (cc, nc, tt, ct, callers) in pstats.Stats(pj).stats.items():
    if "kernelgate" in file or fn.startswith("<built-in") or fn.startswith("<method"):
        rows.append((ct, f"{file.split('kernelgate/')[-1]}:{line}({fn})", nc))
doc["judge_top"] = [{"cum_s": round(c, 3), "fn": f, "calls": n} for c, f, n in sorted(rows, reverse=True)[:30]]
doc["judge_phases"] = {k: round(x, 2) for k, x in phases.items()}
doc["judge_checks"] = len(v.checks) if "v" in dir() else None
doc["totals"] = {k: [n, round(x, 2)] for k, (n, x) in TOTALS.items()}     # prepare's and the judge's together
print("KGLEAN " + json.dumps(doc))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dev_dir")
    ap.add_argument("--only", action="append", default=[], help="a glob of problem file names (repeatable)")
    ap.add_argument("--file", action="append", default=[], help="a workload file outside DEV_DIR (repeatable)")
    ap.add_argument("--memory", default="auto")
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--prepare-only", action="store_true", help="prepare the task, judge nothing")
    ap.add_argument("--emitted", default="", help="judge the module optimize emits from this baseline (eager or "
                    "compile) with its short plan, not the reference file")
    ap.add_argument("--out", default="lean.json")
    args = ap.parse_args()
    import fnmatch

    import torch

    from kernelgate.gate.memory import Sampler, peak
    from kernelgate.versions import conditions
    files = [Path(f).resolve() for f in args.file] + sorted(
        p.resolve() for p in Path(args.dev_dir).glob("level*/*.py") if any(fnmatch.fnmatch(p.name, g) for g in args.only))
    rows = []
    for path in files:
        row = {"problem": f"{path.parent.name}/{path.name}"}
        import importlib.util
        spec = importlib.util.spec_from_file_location("kglean_ref", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cuda = args.target.startswith("cuda")
        if cuda:
            torch.manual_seed(0)
            model = mod.Model(*mod.get_init_inputs()).eval().cuda()

            def made_on_device():
                with torch.device("cuda"):
                    return mod.get_inputs()
            row["ref_peak_bytes"] = peak(model, made_on_device, "cuda")
            del model
            torch.cuda.empty_cache()
        t0 = time.monotonic()
        with (Sampler("cuda") if cuda else contextlib.nullcontext()) as s:
            try:
                p = subprocess.run([sys.executable, "-c", CHILD, str(path), args.memory, args.target,
                                    "none" if args.prepare_only else args.emitted], capture_output=True,
                                   text=True, cwd=ROOT, timeout=args.timeout)
                out, err = p.stdout, p.stderr
            except subprocess.TimeoutExpired as e:
                got = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
                out, err = "", got + f"\nkilled after {args.timeout:.0f} s"
        line = next((ln for ln in out.splitlines() if ln.startswith("KGLEAN ")), None)
        trace = [ln for ln in err.splitlines() if ln.startswith("[")]
        row["trace"] = trace if len(trace) <= 400 else trace[:250] + ["..."] + trace[-150:]
        t0_child = next((float(ln.split()[1]) for ln in err.splitlines() if ln.startswith("KGT0 ")), None)
        if cuda and t0_child is not None and s.top_at:
            row["peak_at_s"] = round(s.top_at - t0_child, 2)     # on the trace's clock
        row.update(json.loads(line[7:]) if line else {"error": err[-800:]})
        row["wall_s"] = time.monotonic() - t0
        row["gate_peak_bytes"] = s.peak if cuda else None
        row["host_peak_bytes"] = s.host_peak if cuda else None     # the host's memory in use, every process
        row["host_holders"] = s.holders if cuda else None          # who held it near the peak
        row["ratio"] = s.peak / row["ref_peak_bytes"] if cuda and row.get("ref_peak_bytes") else None
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        Path(args.out).write_text(json.dumps({"command": "python benchmarks/diag_lean.py DEV_DIR " + " ".join(
            f"--only {g}" for g in args.only) + f" --memory {args.memory} --target {args.target}" + (f" --emitted {args.emitted}" if args.emitted else ""), "conditions": conditions(args.target),
            "rows": rows}, indent=1))
    print(f"{'problem':44} {'prep s':>7} {'judge s':>8} {'ratio':>6} {'peak at':>8} {'host GiB':>8}  phases / verdict")
    for r in rows:
        print(f"{r['problem'][:44]:44} {r.get('prepare_s', 0):7.1f} {r.get('judge_s', 0):8.1f} "
              f"{(r['ratio'] or 0):6.2f} {r.get('peak_at_s', 0):8.1f} {(r.get('host_peak_bytes') or 0) / 2**30:8.1f}  "
              f"{r.get('judge_phases')} "
              f"{str(r.get('verdict', r.get('error')))[:120]}")


if __name__ == "__main__":
    main()
