"""The keyed positional digests of a module's parameters and buffers (a worker's state checks around every load of
a trial's state): one tensor at a time (`digest.positional`) against one pass per batch (`digest.positional_many`),
on the workloads' own modules; the values must agree.

    python benchmarks/diag_state_digests.py <workload.py> [...] [--device cuda] [--repeats 5] [--out F]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelgate import digest  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def _module(path: str) -> torch.nn.Module:
    spec = importlib.util.spec_from_file_location("workload", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model(*mod.get_init_inputs())


def _time(fn, device: str, repeats: int) -> float:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    key = 0x5DEECE66D1234567
    rows = []
    for path in a.workloads:
        m = _module(path).to(a.device)
        ts = [t.detach() for t in list(m.parameters()) + list(m.buffers())]
        one = [digest.positional(t, key) for t in ts]          # warm both forms
        many = digest.positional_many(ts, key)
        rows.append({"workload": Path(path).name, "tensors": len(ts), "mib": sum(t.numel() * t.element_size()
                                                                                 for t in ts) / 2 ** 20,
                     "agree": one == many,
                     "one_at_a_time_ms": _time(lambda: [digest.positional(t, key) for t in ts], a.device, a.repeats),
                     "batched_ms": _time(lambda: digest.positional_many(ts, key), a.device, a.repeats)})
        print(f"{rows[-1]['workload'][:36]:36s} {len(ts):4d} tensors {rows[-1]['mib']:8.1f} MiB  agree "
              f"{rows[-1]['agree']}  one at a time {rows[-1]['one_at_a_time_ms']:8.2f} ms  batched "
              f"{rows[-1]['batched_ms']:8.2f} ms")
    if a.out:
        Path(a.out).write_text(json.dumps({"conditions": conditions(a.device), "command": " ".join(sys.argv),
                                           "repeats": a.repeats, "rows": rows}, indent=1))
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
