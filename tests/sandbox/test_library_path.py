"""Library directories outside the environment's own install locations (packages installed with
`pip --target`, a vendored tree) are candidate code to the worker's guard unless the user vouches for them in
KERNELGATE_LIBRARY_PATH (kernelgate/sandbox/host.py `Worker.library_paths`); being on PYTHONPATH is not enough,
since whoever writes a candidate can often write next to it. Trusted library code may look at its caller's
frame, never at frames beyond the candidate's (kernelgate/sandbox/guard.py)."""
import os

import pytest

from kernelgate import api
from kernelgate.sandbox import isolation

pytestmark = pytest.mark.slow

REF = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2
def get_inputs():
    return [torch.randn(64, 32)]
def get_init_inputs():
    return []
"""
# a library module in the style of typing_extensions: it looks at its caller's frame when called
LIB = """
import sys
def caller_module():
    return sys._getframe(1).f_globals.get("__name__", "")
def frame_locals(depth):
    return sys._getframe(depth).f_locals
"""
CAND = """
import torch
import kg_test_framelib
class ModelNew(torch.nn.Module):
    def forward(self, x):
        kg_test_framelib.caller_module()
        return torch.relu(x) * 2
"""
# wrong (zeros) unless it reaches the harness through the library: it then swaps the harness's model for a right one
REACH = """
import torch
import kg_test_framelib
class _Right(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2
class ModelNew(torch.nn.Module):
    def forward(self, x):
        for d in range(1, 60):
            try:
                ns = kg_test_framelib.frame_locals(d)
            except ValueError:
                break
            h = ns.get("self")
            if h is not None and hasattr(h, "model") and hasattr(h, "conn"):
                h.model = _Right()
                return torch.relu(x) * 2
        return torch.zeros_like(x)
"""
needs_landlock = pytest.mark.skipif(not isolation.confines_files(), reason="needs Landlock (workers confined to their own files)")


def _lib(root, sub="site"):
    d = root / sub
    d.mkdir(parents=True)
    (d / "kg_test_framelib.py").write_text(LIB)
    return d


def _env(monkeypatch, pythonpath, vouched=None):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(p) for p in pythonpath] + [os.environ.get("PYTHONPATH", "")]))
    if vouched is None:
        monkeypatch.delenv("KERNELGATE_LIBRARY_PATH", raising=False)
    else:
        monkeypatch.setenv("KERNELGATE_LIBRARY_PATH", os.pathsep.join(str(p) for p in vouched))


def _verify(tmp_path, write, cand_path):
    return api.verify(write("ref.py", REF), str(cand_path), store=str(tmp_path / "s.sqlite"))


def test_a_library_on_pythonpath_is_candidate_code_and_the_refusal_names_the_fix(tmp_path, monkeypatch, write):
    lib = _lib(tmp_path)
    _env(monkeypatch, [lib])
    v = _verify(tmp_path, write, write("cand.py", CAND))
    assert not v.accepted and v.reason.value == "introspection", v.message
    assert "KERNELGATE_LIBRARY_PATH" in v.message, v.message


@needs_landlock
def test_a_vouched_library_is_trusted_also_through_a_symlinked_entry(tmp_path, monkeypatch, write):
    lib = _lib(tmp_path)
    _env(monkeypatch, [lib], [lib])
    v = _verify(tmp_path, write, write("cand.py", CAND))
    assert v.accepted, v.message
    link = tmp_path / "libln"
    link.symlink_to(lib)
    _env(monkeypatch, [link], [link])
    v = _verify(tmp_path, write, write("cand2.py", CAND))
    assert v.accepted, v.message


@needs_landlock
def test_trusted_library_code_never_hands_out_frames_beyond_the_candidate(tmp_path, monkeypatch, write):
    lib = _lib(tmp_path)
    _env(monkeypatch, [lib], [lib])
    v = _verify(tmp_path, write, write("cand.py", REACH))
    assert not v.accepted and v.reason.value == "introspection", v.message


def test_pydantic_parent_frame_namespace_is_refused_beyond_the_candidate(tmp_path, write):
    """Red team 5: pydantic (site-packages) takes sys._getframe(depth) for its caller and returns f_locals."""
    pytest.importorskip("pydantic._internal._typing_extra")
    cand = write("cand.py", REACH.replace("import kg_test_framelib\n", "from pydantic._internal._typing_extra import "
                                          "parent_frame_namespace\n").replace(
        "kg_test_framelib.frame_locals(d)", "parent_frame_namespace(parent_depth=d, force=True) or {}"))
    v = _verify(tmp_path, write, cand)
    assert not v.accepted and v.reason.value == "introspection", v.message


@needs_landlock
def test_a_vouched_directory_holding_the_candidate_is_not_trusted(tmp_path, monkeypatch, write):
    lib = _lib(tmp_path)
    (lib / "cand.py").write_text(CAND.replace("kg_test_framelib.caller_module()", "__import__('sys')._getframe(0)"))
    _env(monkeypatch, [lib], [lib])
    v = _verify(tmp_path, write, lib / "cand.py")
    assert not v.accepted and v.reason.value == "introspection", v.message
    # red team 5: an entry through a symlink and '..' whose spelling holds the candidate but whose real path does not
    deep = tmp_path / "t" / "deep" / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / "t" / "lnk").symlink_to(deep)
    (tmp_path / "t" / "cand").mkdir()
    cand = tmp_path / "t" / "cand" / "cand.py"
    cand.write_text(CAND.replace("import kg_test_framelib\n", "").replace(
        "kg_test_framelib.caller_module()", "__import__('sys')._getframe(0)"))
    odd = f"{tmp_path / 't' / 'lnk'}/../.."
    _env(monkeypatch, [odd], [odd])
    v = _verify(tmp_path, write, cand)
    assert not v.accepted and v.reason.value == "introspection", v.message


def test_only_vouched_absolute_directories_the_worker_cannot_write(tmp_path, monkeypatch):
    """'.' means the worker's own (writable) directory there; the temp directory holds every worker's."""
    from kernelgate.sandbox.host import Worker
    w = Worker()
    w.start()
    try:
        lib = _lib(tmp_path)
        _env(monkeypatch, [lib])                                   # on PYTHONPATH only: not vouched for
        assert w.library_paths([str(tmp_path / "x" / "cand.py")]) == ()
        _env(monkeypatch, [], [".", "lib", w.workdir.parent, w.workdir])
        assert w.library_paths([str(tmp_path / "x" / "cand.py")]) == ()
        _env(monkeypatch, [], [lib])
        assert w.library_paths([str(lib / "cand.py")]) == ()
        assert w.library_paths([str(tmp_path / "x" / "cand.py")]) == (
            (str(lib),) if isolation.confines_files() else ())
    finally:
        w.close()
