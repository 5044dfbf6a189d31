"""Extensions built outside the candidate's worker (kernelgate/sandbox/prebuild.py): the literal load_inline
calls read from a candidate's text, the same canonical form from the worker's view of the call, the worker's
wrapper, and end to end a C++ candidate built by a confined builder, then taken from the cache."""
import shutil
import time
from pathlib import Path

import pytest

from kernelgate.sandbox import prebuild

CPP = 'torch::Tensor twice(torch::Tensor x) { return x * 2; }'

LITERAL = '''
import torch
from torch.utils.cpp_extension import load_inline
SRC = """%s"""
FLAGS = ["-O2"]
ext = load_inline("twice_ext", SRC, functions=["twice"], extra_cflags=FLAGS + ["-DKG_TEST=1"], verbose=False)
''' % CPP


def test_literal_calls_are_read_from_the_text():
    (spec,) = prebuild.specs(LITERAL)
    assert spec["name"] == "twice_ext" and spec["cpp_sources"] == [CPP]
    assert spec["extra_cflags"] == ["-O2", "-DKG_TEST=1"] and spec["functions"] == ["twice"]


@pytest.mark.parametrize("change", [
    'SRC = SRC + "// changed"\n',                       # a name bound twice: its value is not the literal
    'import os\nSRC2 = os.environ.get("X", "")\n',      # harmless, but the call below uses a non-literal
])
def test_non_literal_arguments_are_left_to_the_worker(change):
    text = LITERAL.replace("ext = load_inline", change + "ext = load_inline")
    if "SRC2" in change:
        text = text.replace('load_inline("twice_ext", SRC,', 'load_inline("twice_ext", SRC2,')
    assert prebuild.specs(text) == []


@pytest.mark.parametrize("call", [
    'load_inline("e", SRC, build_directory="/tmp/x")',    # a directory of the candidate's choosing
    'load_inline("e", SRC, extra_include_paths=["/x"])',  # headers the key would not cover
    'load_inline(f"e{1}", SRC)',                          # not a literal
    'load_inline("e", SRC, is_python_module=False)',      # an operator library, not a module
    'load_inline(*ARGS)',
])
def test_calls_outside_the_literal_form_are_not_prebuilt(call):
    assert prebuild.specs(f'SRC = "x"\nARGS = ["e", "x"]\n{call}\n') == []


@pytest.mark.parametrize("flags", [
    '["-wrapper", "/bin/sh,/tmp/w.sh"]',        # gcc runs a program of the candidate's before each step
    '["-fplugin=/tmp/p.so"]', '["-B/tmp/bin"]', '["-specs=/tmp/s"]', '["-I/tmp/inc"]', '["-include", "/x.h"]',
])
def test_flags_that_run_or_read_other_code_are_left_to_the_worker(flags):
    """Red team 26: `-wrapper` ran the candidate's Python in the builder (its daemons outlived the build and
    slowed the baselines while they were timed: 4.7-7.6x claimed for a copy of the reference)."""
    assert prebuild.specs(f'load_inline("e", "int x;", extra_cflags={flags})\n') == []
    assert prebuild.specs(f'load_inline("e", "int x;", extra_ldflags=["-Wl,-plugin=/x.so"])\n') == []
    assert prebuild.specs('load_inline("e", "int x;", extra_cflags=["-O3", "-DKG=1", "-march=native"])\n')


@pytest.mark.parametrize("line", ['#include "local.h"', '#include </etc/hostname>', '#include <../x.h>',
                                  'asm(".incbin \\"/etc/hostname\\"");', '#include KG_HEADER'])
def test_sources_reading_files_the_key_does_not_cover_are_left_to_the_worker(line):
    """The key covers the arguments and the versions of torch, CUDA and the compiler: a system header is
    covered, another file read at build time is not (an edited header would be served a stale library)."""
    src = f"#include <torch/extension.h>\n{line}\nint x;"
    assert prebuild.specs(f"SRC = {src!r}\nload_inline('e', SRC)\n") == []
    assert prebuild.specs("SRC = '#include <torch/extension.h>\\nint x;'\nload_inline('e', SRC)\n")


def test_the_text_and_the_call_give_the_same_digest():
    """The judge reads the text; the worker sees the call: one canonical form, whatever the spelling."""
    seen = []
    (spec,) = prebuild.specs(LITERAL)
    args = prebuild.call_args(("twice_ext", CPP), {"functions": ["twice"], "extra_cflags": ["-O2", "-DKG_TEST=1"],
                                                    "verbose": True})
    seen.append(prebuild.normalize(args))
    args = prebuild.call_args(("twice_ext", [CPP], None, None, ("twice",), ["-O2", "-DKG_TEST=1"]), {})
    seen.append(prebuild.normalize(args))
    assert all(prebuild.digest(s) == prebuild.digest(spec) for s in seen)
    other = prebuild.normalize(prebuild.call_args(("twice_ext", CPP), {"functions": ["twice"]}))
    assert prebuild.digest(other) != prebuild.digest(spec)       # other flags: another library


def test_the_wrapper_loads_only_for_exactly_the_built_arguments(monkeypatch):
    from torch.utils import cpp_extension
    calls = []
    monkeypatch.setattr(cpp_extension, "load_inline", lambda *a, **k: calls.append(("built", a[0])) or "own")
    monkeypatch.setattr(cpp_extension, "_import_module_from_library",
                        lambda name, d, py: calls.append(("imported", name, d)) or "prebuilt")
    (spec,) = prebuild.specs(LITERAL)
    bad = prebuild.normalize(prebuild.call_args(("bad", "x"), {}))
    prebuild.install({prebuild.digest(spec): {"name": "twice_ext", "dir": "/p"},
                      prebuild.digest(bad): {"name": "bad", "error": "Error building extension 'bad': x.cpp:1:1: error"}})
    load = cpp_extension.load_inline
    assert load("twice_ext", CPP, functions=["twice"], extra_cflags=["-O2", "-DKG_TEST=1"]) == "prebuilt"
    assert load("twice_ext", CPP, functions=["twice"]) == "own"          # other flags: torch's own build
    with pytest.raises(RuntimeError, match="Error building extension 'bad'"):
        load("bad", "x")
    assert calls == [("imported", "twice_ext", "/p"), ("built", "twice_ext")]


# ------------------------------------------------------------------ end to end (a C++ compiler, the sandbox)
REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(64, 32)]
def get_init_inputs():
    return []
"""

CAND = LITERAL + """
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
"""


def _compiler():
    return shutil.which("c++") or shutil.which("g++")


@pytest.mark.slow
@pytest.mark.skipif(not _compiler() or not prebuild.enabled(), reason="needs a C++ compiler and Landlock")
def test_a_cpp_candidate_is_built_outside_its_worker_then_taken_from_the_cache(write, tmp_path):
    from kernelgate import api
    ref, cand = write("ref.py", REF), write("cand.py", CAND)
    store = str(tmp_path / "s.sqlite")
    t0 = time.monotonic()
    first = api.verify(ref, cand, store=store)
    first_s = time.monotonic() - t0
    assert first.accepted, first.message
    assert any("extension twice_ext: built outside the worker" in n for n in first.notes), first.notes
    t0 = time.monotonic()
    second = api.verify(ref, cand, store=store)
    assert second.accepted, second.message
    assert any("extension twice_ext: from the build cache" in n for n in second.notes), second.notes
    assert time.monotonic() - t0 < first_s      # no compile the second time
    assert list((tmp_path / "s.sqlite.compile-cache" / "extensions").glob("*/twice_ext.so"))


@pytest.mark.slow
@pytest.mark.skipif(not _compiler() or not prebuild.enabled(), reason="needs a C++ compiler and Landlock")
def test_a_build_failure_outside_the_worker_is_the_candidates_compiler_error(write, tmp_path):
    from kernelgate import api
    ref = write("ref.py", REF)
    cand = write("cand.py", CAND.replace("return x * 2;", "return nope(x);"))
    v = api.verify(ref, cand, store=str(tmp_path / "s.sqlite"))
    assert not v.accepted and v.reason.value == "build_error", (v.reason, v.message)
    assert "nope" in v.message and "was not declared" in v.message, v.message
    assert any("its build failed outside the worker" in n for n in v.notes), v.notes


@pytest.mark.slow
@pytest.mark.skipif(not _compiler() or not prebuild.enabled(), reason="needs a C++ compiler and Landlock")
def test_whatever_a_build_leaves_running_is_killed_with_it(tmp_path):
    """The flag rules keep candidates' programs out of the builder; should one get in, nothing it starts
    outlives the build (here a wrapper, let past the rules, leaves a detached sleeper behind)."""
    marker = f"{7000 + (time.monotonic_ns() % 999)}.123"
    script = tmp_path / "w.sh"
    script.write_text(f'(nohup sleep {marker} >/dev/null 2>&1 &)\nexec "$@"\n')
    spec = prebuild.normalize({"name": "kg_left", "cpp_sources": "int kg_f() { return 1; }",
                               "no_implicit_headers": True})
    spec["extra_cflags"] = ["-wrapper", f"/bin/sh,{script}"]      # past normalize, as a bypass would be
    got = prebuild._build(spec, tmp_path / "root", "k", 120)
    assert isinstance(got, Path), got

    def sleepers():
        out = []
        for d in Path("/proc").iterdir():
            try:
                if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(d.name)
            except OSError:
                pass
        return out
    assert sleepers() == []


@pytest.mark.slow
@pytest.mark.skipif(not _compiler() or not prebuild.enabled(), reason="needs a C++ compiler and Landlock")
def test_the_builder_writes_nowhere_but_its_own_directory(tmp_path):
    """The builder's compiler and linker, confined like a worker, write only its fresh directory (here a linker
    flag, past the flag rules, asks for a map file beside the cache: refused, the build fails)."""
    outside = tmp_path / "escape.map"
    spec = prebuild.normalize({"name": "kg_escape", "cpp_sources": "int kg_f() { return 1; }",
                               "no_implicit_headers": True})
    spec["extra_ldflags"] = [f"-Wl,-Map={outside}"]      # refused by normalize; here as a bypass would be
    got = prebuild._build(spec, tmp_path / "root", "k", 120)
    assert not outside.exists()
    assert isinstance(got, str) and "Error building extension 'kg_escape'" in got, got
    fine = prebuild.normalize({"name": "kg_fine", "cpp_sources": "int kg_f() { return 1; }",
                               "no_implicit_headers": True})
    assert prebuild._build(fine, tmp_path / "root", "k2", 120) == tmp_path / "root" / "k2" / "kg_fine.so"
