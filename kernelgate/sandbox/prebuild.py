"""C++/CUDA extensions built outside the candidate's worker: a trusted, content-hashed build cache, and builds
in parallel while other candidates are judged.

A candidate that calls `torch.utils.cpp_extension.load_inline` with literal arguments (its sources as string
constants, module-level names bound to them, or sums of those) has them read from its text (`specs`: the
syntax tree, nothing of the candidate runs). Only plain builds qualify (`normalize`): compiler flags from an
allow-list (none that runs, loads or reads other code: no -wrapper, -fplugin, -B, pass-throughs to the
linker, include paths) and sources whose only file reads are system headers. Each is built by a confined
builder process (`_build`): a worker's confinement (it writes only its own fresh directory, cannot leave its
session) and scrubbed environment, running kernelgate's builder code, which calls torch's own build with the
import of the result switched off; its whole process tree is killed when the build ends, and frozen while
implementations are timed (`paused`). The library lands in the cache under a key of the arguments and what
else the build depends on (torch, CUDA, compiler, Python, the GPU's capability, the build's environment
variables); only the judge's process moves it there, after the builder's tree is gone.

The judge copies the libraries of a candidate's arguments into the worker's private directory, and the
worker's harness wraps `load_inline` before the import (`install`): a call whose arguments are exactly
those of a copied library imports it instead of building; any other call builds in the worker, as before.
So a library is only ever loaded for the very source and flags it was built from, and no candidate's worker
can write the cache (a cache the candidates could write would let one candidate's library stand in for
another's source). A failed build is kept for the run: the same call raises its compiler error at once.

Off where the worker is not confined to its own files (isolation.confines_files), and with
KERNELGATE_PREBUILD=0.
"""
from __future__ import annotations

import ast
import atexit
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

#: load_inline's parameters, in order (torch 2.11-2.13); a call naming any other is not prebuilt
PARAMS = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags", "extra_cuda_cflags",
          "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "build_directory", "verbose", "with_cuda",
          "with_sycl", "is_python_module", "with_pytorch_error_handling", "keep_intermediates", "use_pch",
          "no_implicit_headers")
#: those that do not change what is built
_IGNORED = ("verbose", "keep_intermediates")
#: those a prebuilt call must leave at their defaults (a directory of the candidate's; SYCL; a library that is
#: not a Python module)
_DEFAULT_ONLY = {"sycl_sources": None, "extra_sycl_cflags": None, "extra_include_paths": None,
                 "build_directory": None, "with_sycl": None, "is_python_module": True}
_DEFAULTS = {"cuda_sources": None, "functions": None, "extra_cflags": None, "extra_cuda_cflags": None,
             "extra_ldflags": None, "with_cuda": None, "with_pytorch_error_handling": True, "use_pch": False,
             "no_implicit_headers": False, **_DEFAULT_ONLY}
#: environment variables a build reads
_BUILD_ENV = ("CXX", "CC", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "NVCC_APPEND_FLAGS",
              "NVCC_PREPEND_FLAGS", "CPATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH")


def _strings(v: Any) -> list[str] | None:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v):
        return list(v)
    return None


#: the compiler and linker flags a prebuilt call may carry: optimisation, language, macros, warnings, code
#: generation, debug info, target architectures, libraries by name. Anything else (gcc's -wrapper, -fplugin,
#: -B, -specs, a linker plugin, -Wl/-Wa/-Wp/-Xlinker/-Xcompiler pass-throughs, include or library paths) can
#: run or read code the key does not cover: such a call is built in the worker, as without the cache (red
#: team 26: `-wrapper` ran the candidate's Python in the builder, whose daemons slowed the baselines).
_FLAG = re.compile(r"^(-O[0-3sgz]?|-std=[\w+]+|-[DU]\w+(=[\w.+-]*)?|-w|-W(?![lap],)[\w=+-]+|-f(?!plugin)[\w=+-]+"
                   r"|-m[\w=.+-]+|-g\d?|-pthread|-fopenmp|-l\w[\w.+-]*|--?use_fast_math|-lineinfo"
                   r"|--expt-relaxed-constexpr|--expt-extended-lambda|-arch=\w+|-code=[\w,]+"
                   r"|-gencode=arch=\w+,code=\w+|--gpu-architecture=\w+|-maxrregcount=\d+"
                   r"|-Xptxas=-?[\w=,-]+|--ptxas-options=-?[\w=,-]+|--restrict|-DNDEBUG)$")
#: #include lines a prebuilt source may hold: system headers by relative name (torch, CUDA, the C++ library:
#: covered by the key's versions); a quoted or absolute include reads a file the key does not cover
_INCLUDE = re.compile(r"^\s*#\s*include\s*<(?!/)(?!.*\.\.)[\w./+-]+>\s*(//.*)?$")
_READS = re.compile(r"#\s*include|#\s*embed|__has_include|\.incbin|\bincbin\b")


def _plain(sources: list[str]) -> bool:
    """Every line of the sources that reads another file is a system header's #include."""
    for text in sources:
        for line in text.splitlines():
            if _READS.search(line) and not _INCLUDE.match(line):
                return False
    return True


def normalize(args: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments of one load_inline call (names -> values) in one canonical form, or None where it is not
    one to prebuild (other parameters set, flags outside `_FLAG`, sources reading files outside the system
    headers). The same form from the judge's reading of the text and the worker's view of the call."""
    if set(args) - set(PARAMS) or "name" not in args or "cpp_sources" not in args:
        return None
    full = {**_DEFAULTS, **args}
    if any(full[k] != v for k, v in _DEFAULT_ONLY.items()):
        return None
    name = full["name"]
    if not isinstance(name, str) or not name.isidentifier():
        return None
    out: dict[str, Any] = {"name": name}
    for k in ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
        out[k] = _strings(full[k])
        if out[k] is None:
            return None
    fn = full["functions"]
    if isinstance(fn, dict):
        if not all(isinstance(a, str) and isinstance(b, str) for a, b in fn.items()):
            return None
        out["functions"] = sorted(fn.items())
    else:
        out["functions"] = _strings(fn)
        if out["functions"] is None:
            return None
    for k in ("with_cuda", "with_pytorch_error_handling", "use_pch", "no_implicit_headers"):
        if full[k] not in (None, True, False):
            return None
        out[k] = full[k]
    if not all(_FLAG.match(f) for k in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags") for f in out[k]):
        return None
    if not _plain(out["cpp_sources"] + out["cuda_sources"]):
        return None
    return out


def digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def call_args(fn_args: tuple, fn_kwargs: dict) -> dict[str, Any] | None:
    """A call's positional and keyword arguments as names -> values (None: more positionals than parameters)."""
    if len(fn_args) > len(PARAMS):
        return None
    named = dict(zip(PARAMS, fn_args))
    if set(named) & set(fn_kwargs):
        return None
    return {k: v for k, v in {**named, **fn_kwargs}.items() if k not in _IGNORED}


# ------------------------------------------------------------------ reading the text (the judge)
_UNKNOWN = object()


def _value(node: ast.AST, names: dict[str, Any]) -> Any:
    """A literal expression's value: constants, lists, tuples and dicts of them, names bound once at module
    level to such, and sums (string or list concatenation); _UNKNOWN for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        vs = [_value(e, names) for e in node.elts]
        return _UNKNOWN if any(v is _UNKNOWN for v in vs) else vs
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return _UNKNOWN
        ks, vs = [_value(k, names) for k in node.keys], [_value(v, names) for v in node.values]  # type: ignore
        if any(v is _UNKNOWN for v in ks + vs):
            return _UNKNOWN
        return dict(zip(ks, vs))
    if isinstance(node, ast.Name):
        return names.get(node.id, _UNKNOWN)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _value(node.left, names), _value(node.right, names)
        if isinstance(a, str) and isinstance(b, str) or isinstance(a, list) and isinstance(b, list):
            return a + b
    return _UNKNOWN


def _module_names(tree: ast.Module) -> dict[str, Any]:
    """Names bound exactly once in the module (at any depth) whose one binding is a module-level assignment of
    a literal value."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] = counts.get(node.name, 0) + 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                n = (a.asname or a.name).split(".")[0]
                counts[n] = counts.get(n, 0) + 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for n in node.names:
                counts[n] = counts.get(n, 0) + 2
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            n = node.targets[0].id
            v = _value(node.value, names)
            if counts.get(n) == 1 and v is not _UNKNOWN:
                names[n] = v
    return names


def specs(text: str) -> list[dict[str, Any]]:
    """The canonical arguments (normalize) of every load_inline call in a file's text whose arguments are all
    literal; the others are left to the worker."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = _module_names(tree)
    out: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if not (isinstance(f, ast.Name) and f.id == "load_inline"
                or isinstance(f, ast.Attribute) and f.attr == "load_inline"):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        pos = [_value(a, names) for a in node.args]
        kw = {k.arg: _value(k.value, names) for k in node.keywords}
        if any(v is _UNKNOWN for v in pos + list(kw.values())):
            continue
        args = call_args(tuple(pos), kw)
        spec = normalize(args) if args is not None else None
        if spec is not None and spec not in out:
            out.append(spec)
    return out


# ------------------------------------------------------------------ the cache and the builders (the judge)
def enabled() -> bool:
    from . import isolation
    return os.environ.get("KERNELGATE_PREBUILD", "1") != "0" and isolation.confines_files()


_STAMP: str | None = None


def _first_line(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr).strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def stamp() -> str:
    """What a build depends on besides its arguments: torch and its CUDA, Python, the machine, the compilers,
    the GPU's capability (the default architecture), the build's environment variables."""
    global _STAMP
    if _STAMP is None:
        import platform

        import torch
        from torch.utils import cpp_extension
        cap = ""
        if torch.cuda.is_available():
            cap = ".".join(map(str, torch.cuda.get_device_capability()))
        cuda_home = getattr(cpp_extension, "CUDA_HOME", None) or ""
        parts = [torch.__version__, str(torch.version.cuda), sys.version, platform.machine(), cap,
                 _first_line([os.environ.get("CXX", "c++"), "--version"]),
                 _first_line([os.path.join(cuda_home, "bin", "nvcc"), "--version"]) if cuda_home else "",
                 json.dumps({k: os.environ.get(k) for k in _BUILD_ENV}, sort_keys=True)]
        _STAMP = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return _STAMP


def _cuda_toolkit() -> bool:
    from torch.utils import cpp_extension
    return getattr(cpp_extension, "CUDA_HOME", None) is not None


class Built:
    """One spec's outcome: `library` (the built .so) or `error` (the build's failure, kept for the run)."""

    def __init__(self, spec: dict[str, Any], library: Path | None = None, error: str = "", seconds: float = 0.0,
                 cached: bool = False):
        self.spec, self.library, self.error, self.seconds, self.cached = spec, library, error, seconds, cached


class Prebuilder:
    """The cache under `root` and a pool of builders (`jobs` at a time). `ahead(text)` starts a text's builds;
    `ready(text, timeout)` waits for them."""

    def __init__(self, root: Path, jobs: int | None = None):
        self.root = Path(root)
        self.jobs = jobs or max(1, min(4, (os.cpu_count() or 2) // 2))
        self._slots = threading.Semaphore(self.jobs)
        self._lock = threading.Lock()
        self._futures: dict[str, Future] = {}

    def _submit(self, spec: dict[str, Any], key: str, timeout: float) -> Future:
        """A build on a daemon thread, `jobs` at a time (a build still running when the judge exits is killed
        with it, not waited for: `_RUNNING`)."""
        f: Future = Future()

        def run() -> None:
            with self._slots:
                if not f.set_running_or_notify_cancel():
                    return
                try:
                    f.set_result(self._get(spec, key, timeout))
                except BaseException as e:  # noqa: BLE001
                    f.set_exception(e)
        threading.Thread(target=run, name="kg-prebuild", daemon=True).start()
        return f

    def key(self, spec: dict[str, Any]) -> str:
        return digest(spec)[:32] + "-" + stamp()

    def ahead(self, text: str, timeout: float = 600.0) -> list[tuple[str, Future]]:
        """Start the builds of `text`'s literal load_inline calls (one per key however often asked, until `ready`
        takes it)."""
        out = []
        with self._lock:
            for spec in specs(text):
                if spec["cuda_sources"] and not _cuda_toolkit():
                    continue            # no nvcc here: the worker's own build says so, as without the cache
                k = self.key(spec)
                f = self._futures.get(k)
                if f is None:
                    f = self._futures[k] = self._submit(spec, k, timeout)
                out.append((k, f))
        return out

    def ready(self, text: str, timeout: float = 600.0) -> list[Built]:
        """Every literal load_inline call's outcome in `text`; a build that does not end within `timeout` is left
        to the worker (left out). A failure is kept for the run; a library is read from the cache next time."""
        out = []
        for k, f in self.ahead(text, timeout):
            try:
                b = f.result(timeout=timeout)
            except Exception:  # noqa: BLE001 - a builder that failed to run leaves the build to the worker
                continue
            if b.library is not None:
                with self._lock:
                    self._futures.pop(k, None)
            out.append(b)
        return [b for b in out if b.library is not None or b.error]

    def _get(self, spec: dict[str, Any], key: str, timeout: float) -> Built:
        import time
        lib = self.root / key / f"{spec['name']}.so"
        if lib.is_file():
            return Built(spec, lib, cached=True)
        t0 = time.monotonic()
        lib_or_error = _build(spec, self.root, key, timeout)
        s = time.monotonic() - t0
        return Built(spec, lib_or_error, seconds=s) if isinstance(lib_or_error, Path) else \
            Built(spec, None, lib_or_error, seconds=s)


#: builders running now: frozen while implementations are timed (`paused`), killed with the judge
_RUNNING: set = set()
_STATE = threading.Condition()
_PAUSES = 0


@contextlib.contextmanager
def paused():
    """Every builder's whole process tree stopped (SIGSTOP) while the block runs, and none started meanwhile:
    a build's compilers take cores an implementation being timed would have (gate/measure.py)."""
    global _PAUSES
    with _STATE:
        _PAUSES += 1
        held = list(_RUNNING)
    for w in held:
        w.freeze()
    try:
        yield
    finally:
        for w in held:
            w.thaw()
        with _STATE:
            _PAUSES -= 1
            _STATE.notify_all()


def _build(spec: dict[str, Any], root: Path, key: str, timeout: float) -> Path | str | None:
    """One build in a confined builder process: the library's path in the cache, the compiler's error, or None
    (it did not finish, or the builder could not run). The builder is a sandbox Worker's process in all but
    its program: confined to its own directory, setsid refused, and its whole tree (found by session and
    process group) killed once the build ends, before its library is read."""
    from . import isolation
    from .compiler import compiler_error
    from .host import Worker, scrubbed_env
    root.mkdir(parents=True, exist_ok=True)
    isolation.judge_setup()                 # orphans of the builder's come back to the judge (subreaper)
    w = Worker("builder")
    work = w.workdir
    try:
        out = work / "build"
        out.mkdir()
        env = scrubbed_env(work)
        with _STATE:
            _STATE.wait_for(lambda: _PAUSES == 0)
            confine = isolation.Confinement(work)
            try:
                w.proc = subprocess.Popen([sys.executable, "-m", "kernelgate.sandbox.prebuild", str(out)], env=env,
                                          cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          pass_fds=confine.pass_fds, preexec_fn=confine.apply)
            finally:
                confine.close()
            _RUNNING.add(w)
        try:
            log, _ = w.proc.communicate(json.dumps(spec).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            with _STATE:
                _RUNNING.discard(w)
            w.kill()                        # everything the build left behind, before its output is read
        lib = out / f"{spec['name']}.so"
        if w.proc.returncode is None:
            return None
        if w.proc.returncode != 0 or not lib.is_file():
            text = log.decode(errors="replace")
            if "BUILD-FAILED: " not in text:
                return None             # the builder did not get to the build: the worker builds
            line = compiler_error(text)
            return f"Error building extension '{spec['name']}'" + (f": {line}" if line else "") + "\n" + \
                text[-20000:]
        dest = root / key
        staged = Path(tempfile.mkdtemp(prefix=".staged-", dir=root))
        shutil.copy2(lib, staged / lib.name)
        try:
            os.replace(staged, dest)
        except OSError:                 # another builder's copy of the same key got there first
            shutil.rmtree(staged, ignore_errors=True)
        return dest / lib.name
    finally:
        w.close()


@atexit.register
def _kill_running() -> None:
    for w in list(_RUNNING):
        w.kill()


def offer(built: list[Built], workdir: Path) -> dict[str, dict[str, str]]:
    """The table the worker's `install` takes: each library copied into the worker's private directory (the
    worker may do as it likes with its copy, never with the cache), failures with their message."""
    table: dict[str, dict[str, str]] = {}
    for b in built:
        d = digest(b.spec)
        if b.library is not None:
            dest = workdir / "prebuilt" / d[:32]
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(b.library, dest / b.library.name)
            table[d] = {"name": b.spec["name"], "dir": str(dest)}
        else:
            table[d] = {"name": b.spec["name"], "error": b.error[:20000]}
    return table


# ------------------------------------------------------------------ the worker's side
def install(table: dict[str, dict[str, str]]) -> None:
    """Wrap load_inline (before the candidate's import): a call whose canonical arguments are in `table`
    imports the library built for them, or raises the build's error; any other call is torch's own."""
    if not table:
        return
    from torch.utils import cpp_extension
    original = cpp_extension.load_inline
    importer = cpp_extension._import_module_from_library

    def load_inline(*args, **kwargs):
        named = call_args(args, kwargs)
        spec = normalize(named) if named is not None else None
        entry = table.get(digest(spec)) if spec is not None else None
        if entry is None:
            return original(*args, **kwargs)
        if "error" in entry:
            raise RuntimeError(entry["error"])
        return importer(entry["name"], entry["dir"], True)

    load_inline.__doc__, load_inline.__wrapped__ = original.__doc__, original
    cpp_extension.load_inline = load_inline


def _builder_main(out: str) -> int:
    """The builder process: torch's build of one spec (read from stdin) into `out`, the import switched off."""
    spec = json.loads(sys.stdin.read())
    from torch.utils import cpp_extension
    cpp_extension._import_module_from_library = lambda *a, **k: None
    kwargs = {k: v for k, v in spec.items() if k not in ("functions",)}
    fn = spec["functions"]
    kwargs["functions"] = dict(fn) if fn and isinstance(fn[0], list) else (fn or None)
    for k in ("cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
        kwargs[k] = kwargs[k] or None
    try:
        cpp_extension.load_inline(build_directory=out, **kwargs)
    except Exception as e:  # noqa: BLE001
        # torch's wording for a failed compile or link; anything else (the builder's own trouble) leaves the
        # build to the worker
        mark = "BUILD-FAILED: " if str(e).startswith("Error building extension") else "BUILDER-ERROR: "
        print(f"{mark}{type(e).__name__}: {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_builder_main(sys.argv[1]))
