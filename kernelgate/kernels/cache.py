"""The source cache: generated source -> a name from its content hash -> a file -> the module it loads as.

`_kg_cache_load(prefix, source, make)` is the one memo of both renderers: the same text always gives the
same name and, in a process, the same module; `make(name, source)` writes the file and loads it the first
time. The two makers:
- C++ (`_kg_cache_cpp`): torch.utils.cpp_extension.load_inline under that name writes the source into the
  name's build folder (only when it changed, so a warm folder rebuilds nothing), builds and imports it;
- Triton (triton_launch._kg_tf_module): @triton.jit reads its function's source from a real file, so the
  source is written under that name in the temp directory and imported from there.
So a C++ candidate holds no file handling of its own (gate/screen.py notes file access in a candidate's text).

A runtime module (kernels/manifest.py): imports nothing of kernelgate.
"""

import hashlib

import torch

_KG_CACHE = {}                   # name -> module


def _kg_cache_name(prefix, text):
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:24]


def _kg_cache_load(prefix, source, make, salt=""):
    """The module of this source (and salt: what else the build depends on), made once per process."""
    name = _kg_cache_name(prefix, source + salt)
    mod = _KG_CACHE.get(name)
    if mod is None:
        mod = _KG_CACHE[name] = make(name, source)
    return mod


def _kg_cache_cpp(source, cflags, ldflags):
    """Generated C++ source (defining its module as TORCH_EXTENSION_NAME) as a built extension, named by the
    hash of the source, the flags and the torch version."""
    def build(name, text):
        from torch.utils.cpp_extension import load_inline
        return load_inline(name, [text], extra_cflags=list(cflags), extra_ldflags=list(ldflags),
                           no_implicit_headers=True, with_cuda=False)
    return _kg_cache_load("kg_cpp_", source, build, " ".join(list(cflags) + list(ldflags)) + torch.__version__)
