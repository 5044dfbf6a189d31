"""The source cache (kernels/cache.py): source -> a name from its content hash -> one module per text, made
by the C++ maker (load_inline) or the Triton one (a file imported, triton_launch._kg_tf_module)."""
import inspect
import sys

import pytest

from kernelgate.kernels import cache, triton_launch


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(cache, "_KG_CACHE", {})


def test_one_module_per_text_and_salt(fresh):
    made = []

    def make(name, source):
        made.append((name, source))
        return object()
    a = cache._kg_cache_load("kg_t_", "x = 1\n", make)
    assert cache._kg_cache_load("kg_t_", "x = 1\n", make) is a and len(made) == 1
    assert made[0] == (cache._kg_cache_name("kg_t_", "x = 1\n"), "x = 1\n")
    assert cache._kg_cache_load("kg_t_", "x = 2\n", make) is not a
    assert cache._kg_cache_load("kg_t_", "x = 1\n", make, salt="-O2") is not a and len(made) == 3


def test_cpp_source_is_built_once_per_text_flags_and_torch(fresh, monkeypatch):
    import torch.utils.cpp_extension as ext
    built = []

    def load_inline(name, sources, **kw):
        built.append((name, sources, kw))
        return object()
    monkeypatch.setattr(ext, "load_inline", load_inline)
    a = cache._kg_cache_cpp("int a;\n", ["-O3"], ["-fopenmp"])
    assert cache._kg_cache_cpp("int a;\n", ["-O3"], ["-fopenmp"]) is a
    b = cache._kg_cache_cpp("int a;\n", ["-O2"], ["-fopenmp"])
    assert b is not a and len(built) == 2 and built[0][1] == ["int a;\n"]
    assert built[0][0].startswith("kg_cpp_") and built[0][0] != built[1][0]
    assert built[0][2] == {"extra_cflags": ["-O3"], "extra_ldflags": ["-fopenmp"], "no_implicit_headers": True,
                           "with_cuda": False}
    monkeypatch.setattr(cache.torch, "__version__", "0.0")
    cache._kg_cache_cpp("int a;\n", ["-O3"], ["-fopenmp"])             # another torch: another build
    assert len(built) == 3 and built[2][0] != built[0][0]


def test_triton_source_is_imported_from_its_own_file(fresh, tmp_path, monkeypatch):
    monkeypatch.setattr(triton_launch.tempfile, "gettempdir", lambda: str(tmp_path))
    src = "def kg_f():\n    return 41 + 1\n"
    mod = cache._kg_cache_load("kg_test_gen_", src, triton_launch._kg_tf_module)
    try:
        assert mod.kg_f() == 42 and mod.__name__ == cache._kg_cache_name("kg_test_gen_", src)
        path = tmp_path / "kernelgate_kernels" / (mod.__name__ + ".py")
        assert path.read_text() == src and mod.__file__ == str(path)
        assert inspect.getsource(mod.kg_f) == src                    # real source: what @triton.jit reads
        assert cache._kg_cache_load("kg_test_gen_", src, triton_launch._kg_tf_module) is mod
        other = cache._kg_cache_load("kg_test_gen_", src.replace("41", "40"), triton_launch._kg_tf_module)
        assert other is not mod and other.kg_f() == 41
    finally:
        for name in [m for m in sys.modules if m.startswith("kg_test_gen_")]:
            del sys.modules[name]
