"""Suite tests: problem directories written by the tests themselves, and a stand-in child that acts out what a
problem's file asks for (a `# FAKE:` line) in a fraction of a second, so that the pool, the retries, the
status files and --resume are tested without running optimize."""
import json
import sys
import textwrap
from pathlib import Path

import pytest

PROBLEM = """import torch
import torch.nn as nn
{fake}
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return {expr}
def get_inputs():
    return [torch.randn({shape})]
def get_init_inputs():
    return []
"""

# argv: model out attempt slot device
FAKE_CHILD = textwrap.dedent('''
    import json, os, re, signal, sys, time
    model, out, attempt, slot, device = sys.argv[1:6]
    text = open(model).read()
    m = re.search(r"^# FAKE: (.*)$", text, re.M)
    acts = dict(a.split("=", 1) if "=" in a else (a, "1") for a in (m.group(1).split() if m else []))
    os.makedirs(out, exist_ok=True)
    seen = {"attempt": int(attempt), "slot": slot, "device": device, "pid": os.getpid(),
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "omp": os.environ.get("OMP_NUM_THREADS"),
            "store": os.environ.get("KERNELGATE_STORE")}
    with open(os.path.join(out, "seen.jsonl"), "a") as f:
        f.write(json.dumps(seen) + "\\n")
    print("progress line", flush=True)
    if "sleep" in acts:
        time.sleep(float(acts["sleep"]))
    if "die" in acts and int(attempt) <= int(acts["die"]):
        os.kill(os.getpid(), signal.SIGKILL)
    if "killparent" in acts and int(attempt) <= int(acts["killparent"]):
        os.kill(os.getppid(), signal.SIGKILL)          # the worker running this child (a Ray worker) dies
        time.sleep(5)
    if "degenerate" in acts:
        print("OUTCOME " + json.dumps({"status": "error", "reason": "degenerate", "message": "zeros mutant passes"}))
        sys.exit(2)
    if "error" in acts:
        print("OUTCOME " + json.dumps({"status": "error", "reason": acts["error"], "message": "task error"}))
        sys.exit(2)
    if "store" in acts:                                # a record in the store this child was given
        from kernelgate.store import Store
        Store(os.environ["KERNELGATE_STORE"]).add("optimize", "fake-" + os.path.basename(model), "h", None, None,
                                                  "cpu", "cpu", "accepted", None, "fake", {"fake": True})
    if "crash" in acts:
        raise RuntimeError("the child fell over")
    sp = float(acts.get("speedup", "1.0"))
    claimed = sp > 1.02
    doc = {"speedup": sp, "speedup_claimed": claimed, "speedup_ci": [sp * 0.95, sp * 1.05],
           "best_strategy": "fake:" + ("x" if claimed else "baseline"), "baseline_kind": "eager",
           "baseline_ms": 1.0, "best_ms": 1.0 / sp, "candidates": 2, "accepted": 1, "device": "cpu", "seconds": 0.1}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(doc, f)
    setup = float(acts.get("setup", "2.0"))
    print("OUTCOME " + json.dumps({"status": "ok", "seconds": 0.1, "setup_s": setup, "first_result_s": setup + 1}))
''')


@pytest.fixture
def problems(tmp_path):
    """problems({"level1/a": "speedup=1.5", ...}) writes DIR/level1/a.py (with its FAKE line) and returns DIR."""
    def make(spec: dict, root: Path | None = None, expr: str = "torch.relu(x) * 2.0 + 1.0",
             shape: str = "16, 16") -> Path:
        root = root or tmp_path / "problems"
        for pid, fake in spec.items():
            p = root / f"{pid}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(PROBLEM.format(fake=f"# FAKE: {fake}" if fake else "", expr=expr, shape=shape))
        return root
    return make


@pytest.fixture
def fake_child(tmp_path):
    """An argv template for Settings.command running the stand-in child."""
    p = tmp_path / "fake_child.py"
    p.write_text(FAKE_CHILD)
    return [sys.executable, str(p), "{model}", "{out}", "{attempt}", "{slot}", "{device}"]


def seen(out: Path, pid: str) -> list[dict]:
    """What the stand-in child saw on each attempt of a problem (attempt, slot, env)."""
    f = out / pid / "seen.jsonl"
    return [json.loads(ln) for ln in f.read_text().splitlines()] if f.exists() else []


@pytest.fixture
def seen_by():
    return seen
