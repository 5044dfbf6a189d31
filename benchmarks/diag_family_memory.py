"""The host memory one input family's trial takes on a large input: each family that works in float64 run on a 1 GiB
fp32 input in a fresh process, its peak resident memory above the input's (ru_maxrss), with the time it took.

    python benchmarks/diag_family_memory.py [--gib 1] [--label L] [--out F]

Run it at two commits (a clean clone each, PYTHONPATH at it) to compare them: the package is the one imported.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("non-positive", "zeros", "constant", "binary", "repeated entries", "some repeated entries",
         "common offset", "channel offsets", "row offsets", "probability rows", "unit rows", "scaled up", "smooth",
         "sparse, bf16-exact", "integer-valued", "constant rows", "constant feature", "one-hot rows", "padded", "masked")

CHILD = r"""
import json, random, resource, sys, time, torch
from kernelgate.gate import families
from kernelgate.records import Contract
kind, n = sys.argv[1], int(sys.argv[2])
x = torch.randn(n // (1024 * 4096), 1024, 4096)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
y = families.make(kind, [x], Contract(), random.Random(0))
s = time.perf_counter() - t0
extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"kind": kind, "extra_peak_gib": round(extra / 2 ** 20, 3), "input_gib": round(x.numel() * 4 / 2 ** 30, 3),
                  "seconds": round(s, 2), "made": y is not None}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kernelgate.versions import conditions
    import kernelgate
    print("package:", Path(kernelgate.__file__).parent if "PYTHONPATH" not in os.environ else os.environ["PYTHONPATH"])
    n = int(a.gib * 2 ** 28) // (1024 * 4096) * (1024 * 4096)
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH") or str(ROOT))
    rows = []
    for kind in KINDS:
        # from a neutral directory: `-c` puts the working directory first on the path (PYTHONPATH picks the package)
        got = subprocess.run([sys.executable, "-c", CHILD, kind, str(n)], env=env, capture_output=True, text=True,
                             cwd=tempfile.gettempdir())
        if got.returncode:
            print(got.stderr[-2000:], file=sys.stderr)
            return 1
        rows.append(json.loads(got.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{kind:18s} input {r['input_gib']:.2f} GiB  extra peak {r['extra_peak_gib']:.2f} GiB  {r['seconds']:.2f} s")
    doc = {"label": a.label, "command": " ".join(sys.argv), "conditions": conditions("cpu"), "rows": rows}
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
