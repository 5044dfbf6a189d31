"""The gate's device memory on the largest dev problems: optimize with a budget, its peak against the reference's.

    python benchmarks/memory_h200.py DEV_DIR --largest 15 --budget 90 --out memory.json [--only GLOB] [--skip K]
    python benchmarks/memory_h200.py --merge part1.json part2.json --out memory.json

`--skip K` starts at the (K+1)-th largest (one device call need not hold all fifteen); the document is
rewritten after every problem, so a call cut short keeps what finished; `--merge` joins parts by rank.

DEV_DIR holds KernelBench-format problems (levels as subfolders), read in place. The problems are ranked
by the bytes their inputs take (get_inputs() built on the host once, then freed), and the `--largest`
of them go through `kernelgate.api.optimize` one at a time, each in a subprocess of its own while this
process samples the device's used memory (every process on it: total - free, every 20 ms). Per problem:
the reference forward's own peak (gate/memory.py `peak`: parameters, inputs, outputs, activations), the
gate's peak (all its processes together), their ratio, the memory plan taken, the wall time against the
budget, and whether anything ran out of memory. One JSON document with conditions; a table last.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelgate.gate.memory import Sampler, peak  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

CHILD = r"""
import json, sys, time
from kernelgate import api
from kernelgate.errors import KernelgateError
t0 = time.monotonic()
doc = {}
try:
    say = lambda m: print(f"[{time.monotonic() - t0:7.1f}s] {m}", file=sys.stderr, flush=True)
    res = api.optimize(sys.argv[1], target="cuda", budget=float(sys.argv[2]), out=sys.argv[3], store=sys.argv[4],
                       progress=say)
    doc = {"status": "ok", "speedup": res.speedup if hasattr(res, "speedup") else None,
           "best": res.best.candidate.strategy if res.best else None,
           "evaluations": len(res.evaluations), "notes": list(res.notes)}
except KernelgateError as e:
    doc = {"status": "error", "reason": e.reason.value if e.reason else None, "message": str(e)[:500]}
except Exception as e:  # noqa: BLE001
    doc = {"status": "crash", "message": f"{type(e).__name__}: {e}"[:500]}
doc["wall_s"] = time.monotonic() - t0
print("KGMEM " + json.dumps(doc))
"""


def problems(root: Path, only: str | None) -> list[Path]:
    files = sorted(p for p in root.glob("level*/*.py"))
    return [p for p in files if not only or fnmatch.fnmatch(p.name, only) or fnmatch.fnmatch(str(p), only)]


def load(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"kgmem_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def input_bytes(path: Path) -> int:
    try:
        mod = load(path)
        torch.manual_seed(0)
        try:        # shapes only: no memory taken
            with torch.device("meta"):
                xs = mod.get_inputs()
        except Exception:  # noqa: BLE001 - inputs that need real values
            xs = mod.get_inputs()
        return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))
    except Exception:  # noqa: BLE001 - a problem that cannot build its inputs ranks last
        return -1


def ref_peak(path: Path) -> int | None:
    mod = load(path)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval().cuda()
    torch.manual_seed(0)
    try:
        return peak(model, mod.get_inputs(), "cuda")
    finally:
        del model
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dev_dir", nargs="?")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--merge", nargs="+")
    ap.add_argument("--largest", type=int, default=15)
    ap.add_argument("--budget", type=float, default=90.0)
    ap.add_argument("--only")
    ap.add_argument("--out", default="memory.json")
    ap.add_argument("--child-timeout", type=float, help="seconds before a problem's optimize is killed "
                    "(default: twice the budget plus 60)")
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge, args.out)
    if not args.dev_dir:
        ap.error("DEV_DIR is required (or --merge)")
    ranked = sorted(((input_bytes(p), p) for p in problems(Path(args.dev_dir), args.only)), key=lambda t: -t[0])
    chosen = ranked[args.skip:args.skip + args.largest]
    rows = []
    store = tempfile.mkdtemp(prefix="kgmem") + "/store.sqlite"
    argv = [os.path.basename(a) if a == args.out else a for a in sys.argv[2:]]
    command = " ".join(["python", "benchmarks/memory_h200.py", "DEV_DIR"] + argv)
    limit = args.child_timeout or 2 * args.budget + 60
    for rank, (nbytes, path) in enumerate(chosen, start=args.skip + 1):
        name = f"{path.parent.name}/{path.name}"
        row = {"rank": rank, "problem": name, "input_bytes": nbytes}
        try:
            row["ref_peak_bytes"] = ref_peak(path)
        except torch.cuda.OutOfMemoryError as e:
            row["ref_peak_bytes"] = None
            row["ref_oom"] = str(e)[:200]
        with tempfile.TemporaryDirectory() as out, Sampler("cuda") as s:
            try:
                p = subprocess.run([sys.executable, "-c", CHILD, str(path), str(args.budget), out, store],
                                   capture_output=True, text=True, cwd=ROOT, env=dict(os.environ),
                                   timeout=limit)
            except subprocess.TimeoutExpired as e:
                p = subprocess.CompletedProcess(e.cmd, -9, (e.stdout or b"").decode(errors="replace")
                                                if isinstance(e.stdout, bytes) else (e.stdout or ""),
                                                (e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes)
                                                 else e.stderr or "") + f"\nkilled after {limit:.0f} s")
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("KGMEM ")), None)
        row["progress"] = [ln for ln in (p.stderr or "").splitlines() if ln.startswith("[")][-40:]
        row.update(json.loads(line[6:]) if line else {"status": "crash", "message": (p.stderr or "")[-500:]})
        row["gate_peak_bytes"] = s.peak
        row["host_peak_bytes"] = s.host_peak        # the host's memory in use, every process
        row["host_holders"] = s.holders           # who held it near the peak
        row["ratio"] = s.peak / row["ref_peak_bytes"] if row.get("ref_peak_bytes") else None
        row["oom"] = "out of memory" in (p.stdout + p.stderr).lower()
        row["over_budget"] = row.get("wall_s", 0) > 1.1 * args.budget
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        doc = {"command": command, "conditions": conditions("cuda"), "budget_s": args.budget,
               "created": time.time(), "rows": rows}
        Path(args.out).write_text(json.dumps(doc, indent=1))
    table(rows)


def merge(parts: list[str], out: str) -> None:
    docs = [json.loads(Path(p).read_text()) for p in parts]
    rows = sorted((r for d in docs for r in d["rows"]), key=lambda r: r.get("rank", 0))
    doc = {"commands": [d["command"] for d in docs], "conditions": [d["conditions"] for d in docs],
           "budget_s": docs[0]["budget_s"], "created": max(d["created"] for d in docs), "rows": rows,
           "summary": {"problems": len(rows), "gate_ooms": sum(bool(r["oom"]) for r in rows),
                       "max_ratio": max((r["ratio"] for r in rows if r.get("ratio")), default=None),
                       "over_budget": [r["problem"] for r in rows if r.get("over_budget")]}}
    Path(out).write_text(json.dumps(doc, indent=1))
    table(rows)


def table(rows: list[dict]) -> None:
    print(f"{'problem':44} {'ref GiB':>8} {'gate GiB':>9} {'ratio':>6} {'host GiB':>8} {'wall s':>7} {'oom':>4} status")
    for r in rows:
        ref = (r.get("ref_peak_bytes") or 0) / 2**30
        print(f"{r['problem'][:44]:44} {ref:8.2f} {r['gate_peak_bytes'] / 2**30:9.2f} "
              f"{(r['ratio'] or 0):6.2f} {(r.get('host_peak_bytes') or 0) / 2**30:8.1f} {r.get('wall_s', 0):7.1f} "
              f"{str(r['oom']):>4} {r.get('status')}")


if __name__ == "__main__":
    main()
