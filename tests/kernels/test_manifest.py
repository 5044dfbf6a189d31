"""kernels/manifest.py: the runtime files follow the rules that let them travel in a candidate file, the
manifest lists what each runtime needs, and a bundle runs on its own in a process where kernelgate cannot
be imported."""
import ast
import inspect
import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

from kernelgate.graph import analyse
from kernelgate.kernels import cpp_launch, manifest
from kernelgate.proposers import Context
from kernelgate.proposers.library import fx_rewrites, library, precision, triton_kernels
from kernelgate.records import Contract

STDLIB = set(sys.stdlib_module_names)
PREFIXES = ("kg_", "_kg_", "KG_", "_KG_")


def _tree(name):
    return ast.parse((manifest.HERE / name).read_text(), name)


def _imported(tree):
    return {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names}


def _defined(tree):
    """Names a module binds at its top level outside import statements (inside top-level if / try too)."""
    names, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try)):
            todo += node.body + node.orelse + getattr(node, "finalbody", [])
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]
    return names


def test_every_runtime_file_is_listed_and_every_runtime_is_complete():
    on_disk = {p.name for p in manifest.HERE.glob("*.py")} - {"__init__.py", "manifest.py"}
    assert set(manifest.RUNTIME_FILES) == on_disk
    for runtime, files in manifest.MANIFEST.items():
        assert manifest.files([runtime]) == list(files)             # listed in bundle order
        for name in files:                                           # a file's imports travel with it
            tree = _tree(name)
            needs = {f"{n.module}.py" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
            assert needs <= set(files), (runtime, name, needs - set(files))


@pytest.mark.parametrize("name", manifest.RUNTIME_FILES)
def test_runtime_files_import_nothing_of_kernelgate(name):
    tree = _tree(name)
    before = manifest.RUNTIME_FILES[:manifest.RUNTIME_FILES.index(name)]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 1 and node in tree.body and f"{node.module}.py" in before, (name, node.module)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for m in mods:
                assert m.split(".")[0] in STDLIB | {"torch", "triton", "jax"}, (name, m)
                assert m != "__future__", name                           # it would have to open the candidate


def test_top_level_names_are_prefixed_and_unique_in_a_candidates_namespace():
    """A candidate holds the reference's names, fx_rewrites' and triton_kernels' pasted functions, precision.py's,
    and the bundle in one namespace: each kernels/ name is the one file's."""
    owners = {}
    for name in manifest.RUNTIME_FILES:
        tree = _tree(name)
        own = _defined(tree) - _imported(tree)                       # `triton = None` after a failed import
        assert not [n for n in own if not n.startswith(PREFIXES)], name
        for n in own:
            assert n not in owners, f"{n} is defined in {owners[n]} and {name}"
            owners[n] = name
    pasted = {"fx_rewrites": inspect.getsource(fx_rewrites).split("REWRITES = {")[0],
              "triton_kernels": inspect.getsource(triton_kernels).split("TRITON_REWRITES = {")[0],
              "precision": precision.source()}
    for where, text in pasted.items():
        clash = _defined(ast.parse(text)) & set(owners)
        assert not clash, f"{where} defines {sorted(clash)} too"


def test_bundle_drops_relative_imports_and_refuses_one_it_cannot_satisfy():
    text = manifest.bundle(list(manifest.MANIFEST))
    assert not [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.level]
    assert re.findall(r"^# ---- kernels/(\S+) ----$", text, re.M) == list(manifest.RUNTIME_FILES)
    with pytest.raises(ValueError, match="bundled before"):
        manifest._without_relative_imports("x.py", "from .ir import _KG_OPS\n", [])
    with pytest.raises(ValueError, match="top-level"):
        manifest._without_relative_imports("x.py", "def f():\n    from .ir import _KG_OPS\n", ["ir.py"])
    assert manifest._without_relative_imports("x.py", "import os\nfrom .ir import (a,\n    b)\nx = 1\n",
                                               ["ir.py"]) == "import os\nx = 1\n"


_STANDALONE = r'''
import os, sys

class _NoKernelgate:
    def find_spec(self, name, path=None, target=None):
        if name == "kernelgate" or name.startswith("kernelgate."):
            raise ImportError("kernelgate is not importable here")

sys.meta_path.insert(0, _NoKernelgate())
os.environ["TRITON_INTERPRET"] = "1"
import torch, torch.fx
ns = {"__name__": "kg_candidate"}
exec(compile(open(sys.argv[1]).read(), "bundle.py", "exec"), ns)

class M(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * 2.0 + torch.log(x.abs() + 1)

m, x = M(), torch.randn(64, 32)
ran = []
if ns.get("triton") is not None:
    gm = torch.fx.symbolic_trace(m)
    assert ns["kg_rewrite_triton_pointwise"](gm) == 1
    with torch.no_grad():
        assert torch.allclose(gm(x), m(x), atol=1e-5, rtol=1e-5)
    assert len(ns["_KG_TF_KERNELS"]) == 1
    ran.append("triton")
if ns["kg_cpp_compiler"]() is not None:
    gm = torch.fx.symbolic_trace(m)
    assert ns["kg_rewrite_cpp_pointwise"](gm) == 1
    with torch.no_grad():
        assert torch.allclose(gm(x), m(x), atol=1e-5, rtol=1e-5)
    assert [k for k in ns["_KG_CPP_BUILT"] if k.startswith("kg_pw_")] and not ns["_KG_CPP_PENDING"]
    ran.append("cpp")
print("ran", *ran)
print("kernelgate modules:", len([k for k in sys.modules if k.startswith("kernelgate")]))
'''


@pytest.mark.slow
def test_a_bundle_runs_where_kernelgate_cannot_be_imported(tmp_path):
    try:
        import triton  # noqa: F401
        want = ["triton"]
    except ImportError:
        want = []
    want += ["cpp"] if cpp_launch.kg_cpp_compiler() is not None else []
    (tmp_path / "bundle.py").write_text(manifest.bundle(["triton", "cpp"]))
    (tmp_path / "run.py").write_text(_STANDALONE)
    done = subprocess.run([sys.executable, "-I", "run.py", "bundle.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ran {' '.join(want)}".strip() in done.stdout and "kernelgate modules: 0" in done.stdout, done.stdout


def _ctx():
    class Model(nn.Module):
        def forward(self, x):
            return torch.softmax(torch.sigmoid(x) * 2, -1)
    return Context("", "Model", "cpu", "test", Contract(), analyse(Model(), None, {}), (), {})


@pytest.mark.parametrize("names, runtimes", [(["cpp:pointwise"], ["cpp"]), (["triton:pointwise"], ["triton"]),
                                             (["cpp:softmax", "triton:row", "cpp:pointwise"], ["cpp", "triton"]),
                                             (["rewrite:fold-bn"], [])])
def test_candidates_bundle_what_their_rewrites_need(names, runtimes):
    by = {s.name: s for s in library.STRATEGIES}
    src = library.render(_ctx(), [(by[n], {}) for n in names])
    assert re.findall(r"^# ---- kernels/(\S+) ----$", src, re.M) == manifest.files(runtimes)
    assert "import kernelgate" not in src and "from kernelgate" not in src and "from ." not in src.replace(
        "from .fx_rewrites import", "")                                  # triton_kernels' own guarded import
    if runtimes:
        assert manifest.bundle(runtimes) in src


def test_a_cpp_candidate_holds_no_file_or_interpreter_access_of_its_own(tmp_path):
    """The C++ runtime's files leave file writing and imports to torch (cache.py: load_inline), so the gate's
    static screen has nothing to note on a C++ candidate; Triton's maker writes and imports a file itself."""
    from kernelgate.gate import screen
    by = {s.name: s for s in library.STRATEGIES}
    notes = {}
    for name in ("cpp:pointwise", "triton:pointwise"):
        path = tmp_path / f"{name.replace(':', '_')}.py"
        path.write_text(library.render(_ctx(), [(by[name], {})]))
        notes[name] = screen.scan(str(path))
    assert notes["cpp:pointwise"] == []
    assert any("files" in n for n in notes["triton:pointwise"])               # the screen does see file access
