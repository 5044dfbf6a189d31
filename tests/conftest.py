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
