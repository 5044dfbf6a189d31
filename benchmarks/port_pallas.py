"""Ports to Pallas, measured: `kernelgate port` on each kernel implementation, then the port set beside the source
(Triton or CUDA C++), the source under torch.compile and the same operation in eager PyTorch, timed side by side by
`kernelgate bench` in one harness.

    python benchmarks/port_pallas.py --target cuda --budget 120 --out $OUT/port_pallas_h200.json
    TRITON_INTERPRET=1 python benchmarks/port_pallas.py --target cpu --only triton_softmax --budget 90 --out ...

Per implementation (examples/ports/*.py, or --impl files): `python -m kernelgate port IMPL --to pallas --target T
--budget B --out WORK/NAME --json` (its own store), which writes port.py (the fastest verified Pallas port) and
port.json (the source's constructs and their handling, the forms matched, every port candidate's verdict and time);
then, when a port was verified, `python -m kernelgate bench TORCH.py SOURCE.py PORT.py --target T --json`, where
TORCH.py is the matched operation in eager PyTorch with the implementation's constructor and parameters
(port/render.torch_module), SOURCE.py the implementation itself as a candidate; bench verifies both candidates
against it and times eager PyTorch, torch.compile of it, the source and the port in one harness, interleaved.

Writes one JSON document (conditions, the commands, per implementation port.json's summary and the bench rows);
prints a table last. Exit 0 when every implementation gave a verified port, 1 otherwise, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate.port import match, render  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

IMPLS = sorted((ROOT / "examples" / "ports").glob("*.py"))


def _run(cmd: list[str], timeout: float) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout", \
            time.monotonic() - t0


def _form(doc: dict) -> match.Form | None:
    best = doc.get("best") or {}
    for f in doc.get("forms", []):
        if f["form"] == (best.get("params") or {}).get("form"):
            return match.Form(f["kind"], tuple(f["inputs"]), tuple(f["params"].items()), f["act"], f["eps"])
    return None


def one(impl: Path, args: argparse.Namespace, work: Path) -> dict:
    name = impl.stem
    out = work / name
    # no --json: the port's progress lines come on stderr (kept as port_log); its figures are read from port.json
    cmd = [sys.executable, "-m", "kernelgate", "port", str(impl), "--to", "pallas", "--target", args.target,
           "--budget", str(args.budget), "--out", str(out), "--store", str(work / f"{name}.sqlite")]
    rc, so, se, wall = _run(cmd, args.timeout)
    row: dict = {"impl": impl.relative_to(ROOT).as_posix() if impl.is_relative_to(ROOT) else impl.name,
                 "port_exit": rc, "port_wall_s": round(wall, 1), "port_command": " ".join(
                     ["python -m kernelgate port", row_path(impl), "--to pallas --target", args.target, "--budget",
                      str(args.budget)])}
    row["port_log"] = se[-3000:]                   # the search's progress lines: why no candidate was tried
    if not (out / "port.json").exists():
        row["error"] = (se or so)[-1500:]
        return row
    doc = json.loads((out / "port.json").read_text())
    row["port"] = {k: doc[k] for k in ("source", "handling", "source_ms", "compile_ms", "best", "port_vs_source",
                                       "candidates", "notes")}
    row["port"]["forms"] = [f["form"] for f in doc["forms"][:6]]
    form = _form(doc)
    if form is None or not (out / "port.py").exists():
        return row
    src = impl.read_text()
    torch_ref = work / f"{name}_torch.py"
    torch_ref.write_text(src + render.torch_module(form))
    source = work / f"{name}_source.py"
    source.write_text(src + "\n\nModelNew = Model\n")
    port = work / f"{name}_port.py"
    port.write_text((out / "port.py").read_text())
    bcmd = [sys.executable, "-m", "kernelgate", "bench", str(torch_ref), str(source), str(port), "--target",
            args.target, "--store", str(work / f"{name}.sqlite"), "--json"]
    rc, so, se, wall = _run(bcmd, args.timeout)
    row["bench_exit"], row["bench_wall_s"] = rc, round(wall, 1)
    row["bench_command"] = f"python -m kernelgate bench {name}_torch.py {name}_source.py {name}_port.py " \
                           f"--target {args.target}"
    try:
        row["bench"] = json.loads(so)
    except json.JSONDecodeError:
        row["bench_error"] = (se or so)[-1500:]
    return row


def row_path(impl: Path) -> str:
    return impl.relative_to(ROOT).as_posix() if impl.is_relative_to(ROOT) else impl.name


def table(rows: list[dict]) -> str:
    lines = [f"{'implementation':<34} {'source ms':>10} {'port ms':>10} {'port/src':>9}  form"]
    for r in rows:
        p = r.get("port") or {}
        best = p.get("best") or {}
        ratio = p.get("port_vs_source")
        lines.append(f"{Path(r['impl']).stem:<34} {p.get('source_ms') or 0:>10.4g} {best.get('ms') or 0:>10.4g} "
                     f"{(ratio or 0):>8.2f}x  {(best.get('params') or {}).get('form', r.get('error', 'no port'))[:60]}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--budget", type=float, default=120)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per port or bench process")
    ap.add_argument("--impl", action="append", default=[], help="implementation files (default examples/ports/)")
    ap.add_argument("--only", action="append", default=[], help="names (file stems) to keep")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    impls = [Path(p).resolve() for p in args.impl] or IMPLS
    if args.only:
        impls = [p for p in impls if p.stem in args.only]
    if not impls:
        print("no implementation selected", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="kg_port_") as tmp:
        for impl in impls:
            rows.append(one(impl, args, Path(tmp)))
            doc = {"benchmark": "port_pallas", "conditions": conditions(args.target), "budget_s": args.budget,
                   "rows": rows}
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(doc, indent=1, default=str) + "\n")   # after each: nothing lost
    print(table(rows))
    return 0 if all((r.get("port") or {}).get("best") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
