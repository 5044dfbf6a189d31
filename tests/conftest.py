import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    # Triton kernels run in its interpreter on CPU tensors; Triton reads this when it is first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = Path(__file__).resolve().parent / "corpus"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _store(tmp_path, monkeypatch):
    """Every test writes to its own store, never the user's."""
    monkeypatch.setenv("KERNELGATE_STORE", str(tmp_path / "store.sqlite"))
    yield


@pytest.fixture
def write(tmp_path):
    """Write a Python file into the test's directory and return its path."""
    def _write(name: str, text: str) -> str:
        p = tmp_path / name
        p.write_text(text)
        return str(p)
    return _write


# ------------------------------------------------------------------ the small workload optimize's tests run

PROJ = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d, mid):
        super().__init__()
        self.down = nn.Linear(d, mid)
        self.up = nn.Linear(mid, d)
    def forward(self, x):
        return self.up(self.down(x))
def get_inputs():
    return [torch.randn({rows}, {d})]
def get_init_inputs():
    return [{d}, {mid}]
"""


@pytest.fixture(scope="session")
def proj_source():
    """The source of a projection workload (a down then an up linear map): make(rows, d, mid) -> str."""
    def make(rows: int = 256, d: int = 128, mid: int = 96) -> str:
        return PROJ.format(rows=rows, d=d, mid=mid)
    return make


@pytest.fixture(scope="session")
def proj(proj_source):
    """The projection workload at its small size (256 rows of 128, through 96)."""
    return proj_source()


@pytest.fixture(scope="session")
def fast_search():
    """A search configuration whose measurements are short (CPU runs of one or two candidates)."""
    from kernelgate.config import TimingConfig
    from kernelgate.search import SearchConfig
    return SearchConfig(per_generation=2, timing=TimingConfig(warmup_ms=20, rounds=2, iters=5))


@pytest.fixture(scope="session")
def optimize_tiny(fast_search):
    """A tiny optimize run on the CPU: optimize_tiny(folder, source, **more api.optimize keywords) writes the
    source to folder/proj.py and optimizes it (one candidate, out folder/out, its own store folder/store.sqlite);
    returns the run's files, result and progress lines."""
    import json
    from types import SimpleNamespace

    def run(d: Path, source: str, **kw) -> SimpleNamespace:
        from kernelgate import api
        ref = d / "proj.py"
        ref.write_text(source)
        store = str(d / "store.sqlite")
        lines: list[str] = []
        args = {"target": "cpu", "budget": 300, "max_candidates": 1, "out": str(d / "out"), "store": store,
                "progress": lines.append, "search_config": fast_search, **kw}
        res = api.optimize(str(ref), **args)
        run_id = json.loads((Path(args["out"]) / "run.json").read_text())["run_id"]
        return SimpleNamespace(dir=d, ref=ref, out=Path(args["out"]), store=store, result=res, lines=lines,
                               run_id=run_id)
    return run
