"""The worker's interpreter guard: candidate code may not reach the harness through Python itself.

The harness that runs, checks and commits to a candidate's outputs shares the candidate's process. Its
functions are bound before the candidate's import, but code that walks frames, gc or raw memory, traces
calls, patches the classes and functions the harness runs on, or leaves a torch mode active after
`forward` could still make the harness report values `forward` never returned. This module closes those
routes with CPython's audit hooks (PEP 578), which cannot be removed from Python once added:

- an operation in `_DENY_ALWAYS` (frames through `sys._getframe`, tracebacks, generators and coroutines;
  tracing and profiling hooks; gc's object graph; memory read by address; symbols of the interpreter or
  the C library through ctypes; new audit hooks) is refused with `Denied` when candidate code asks for it;
- replacing the code, defaults or attributes of a function loaded before the candidate (torch's, the
  standard library's, the harness's own) is refused;
- compiling code, or building a code object, that claims a file of torch, triton, kernelgate,
  site-packages or the standard library is refused (the guard tells candidate code from library code by
  the file a frame's code comes from).

"Candidate code" is the first frame, walking out from the operation, whose code is not the standard
library's; it is trusted when its file lies under the trusted roots (torch, triton, kernelgate,
site-packages: read-only to the candidate under isolation), so torch.compile, Triton and the harness
keep working; so is a directory the user vouches for (`library`: KERNELGATE_LIBRARY_PATH, checked by the judge).
Trusted code may take its caller's frame, never one beyond the nearest candidate frame (a library that hands back
its caller's caller's locals would hand over the harness's). Every refusal is recorded; the worker turns a non-empty record into an `introspection`
rejection. What stays open (docs/GATE.md): native code the candidate loads (a C++ extension, or
`ctypes.memmove` on addresses, which CPython does not audit) can still write anywhere in its process.
A signal handler, which CPython hands the frame it interrupted without an audit event, is kept from the harness
by where the harness runs (a thread of its own: kernelgate/sandbox/worker.py, `main`), not by this module.

Two checks close what auditing does not see. `integrity()`, run after every call: the namespaces the
harness's code looks names up in (kernelgate's modules and classes, torch, torch.Tensor, builtins, json,
struct, the connection classes) hold the same objects as before the candidate's import (module and class
attributes are not audited; a class must keep exactly its names, a module of torch or the standard library
may gain names that do not shadow a builtin, as torch's lazy submodules do), and no torch function or
dispatch mode is left active. `window()`,
around the harness's work on an output: a trace function notes any Python function of candidate code
that runs in that window (a `__del__`, a weakref finalizer or a gc callback fired by the harness's own
allocations), which would otherwise run between the check and the use.
"""
from __future__ import annotations

import builtins
import gc
import operator
import os
import site
import sys
import sysconfig
import threading
from types import FunctionType
from typing import Any, Callable

# bound now, before any candidate code: replacing them later changes nothing here
_getframe = sys._getframe
_is = operator.is_
_settrace = sys.settrace
_basename = os.path.basename
_local = threading.local()
_BUILTIN_NAMES = frozenset(vars(builtins))
#: names the harness uses only before any candidate code runs, which libraries replace when loaded lazily
#: (torch._dynamo wraps torch.manual_seed on import)
_UNWATCHED = {"torch": {"manual_seed"}}

_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_DENY_ALWAYS = {
    "sys._getframe": "frames of the call stack (sys._getframe)",
    "sys._current_frames": "frames of every thread (sys._current_frames)",
    "sys._current_exceptions": "tracebacks of every thread (sys._current_exceptions)",
    "sys.settrace": "a tracing hook (sys.settrace)",
    "sys.setprofile": "a profiling hook (sys.setprofile)",
    "sys.monitoring.register_callback": "a monitoring callback (sys.monitoring)",
    "sys.addaudithook": "an audit hook (sys.addaudithook)",
    "gc.get_objects": "gc's list of objects (gc.get_objects)",
    "gc.get_referrers": "gc's referrers (gc.get_referrers)",
    "gc.get_referents": "gc's referents (gc.get_referents)",
    "ctypes.cdata": "memory by address (ctypes from_address)",
    "ctypes.string_at": "memory by address (ctypes.string_at)",
    "ctypes.wstring_at": "memory by address (ctypes.wstring_at)",
    "ctypes.dlsym/handle": "a symbol by raw handle (ctypes)",
}
_SYSTEM_LIBS = ("libc.so", "libc-", "libpython", "ld-linux", "libdl.so", "libpthread")
_PROTECTED = ("torch", "triton", "kernelgate", "builtins")


class Denied(PermissionError):
    """Raised into candidate code that asked for something the guard refuses."""


def _roots(library: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(trusted roots, standard library roots), as absolute directory prefixes. `library`: further directories
    of library code the judge vouches for (PYTHONPATH directories the worker cannot write and that hold no
    candidate: kernelgate/sandbox/host.py `Worker.library_paths`)."""
    import importlib.util
    trusted = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}     # the kernelgate package
    trusted.update(os.path.abspath(p) for p in library if p and os.path.isabs(p))
    for name in ("torch", "triton"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            trusted.add(os.path.dirname(os.path.abspath(spec.origin)))
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        trusted.add(os.path.abspath(paths[key]))
    for p in list(getattr(site, "getsitepackages", lambda: [])()) + [getattr(site, "getusersitepackages", lambda: "")()]:
        if p:
            trusted.add(os.path.abspath(p))
    # an install location on the path by the site machinery (a .pth file, a venv's system packages); not one named
    # in PYTHONPATH, which anyone could call site-packages (a directory the user vouches for comes as `library`)
    spelled = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    for p in sys.path:
        if p and _basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages") and os.path.abspath(p) not in spelled:
            trusted.add(os.path.abspath(p))
    stdlib = {os.path.abspath(paths["stdlib"]), os.path.abspath(paths["platstdlib"])}
    return (tuple(sorted(r.rstrip(os.sep) + os.sep for r in trusted)),
            tuple(sorted(r.rstrip(os.sep) + os.sep for r in stdlib)))


def _same_text(source: Any, filename: str) -> bool:
    """The source is that file's own text."""
    try:
        with open(filename, "rb") as f:
            real = f.read()
    except OSError:
        return False
    if isinstance(source, str):
        source = source.encode()
    return isinstance(source, (bytes, bytearray, memoryview)) and bytes(source) == real


def _names_used(modules: list[Any]) -> frozenset[str]:
    """Every name the code of these modules' functions and classes looks up (co_names, recursively)."""
    names: set[str] = set()
    seen: set[int] = set()
    stack = []
    for m in modules:
        for v in vars(m).values():
            for f in ([v] if not isinstance(v, type) else list(vars(v).values())):
                f = getattr(f, "__func__", f)
                c = getattr(f, "__code__", None)
                if c is not None and getattr(f, "__module__", None) == m.__name__:
                    stack.append(c)
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return frozenset(names)


class Guard:
    """The audit hook and its record. Install once per worker, before the candidate's import."""

    def __init__(self, enforce: bool = True, library: tuple[str, ...] = (), candidate: str = "") -> None:
        self.enforce = enforce            # False: the same work, nothing refused (a baseline's worker)
        self.trusted, self.stdlib = _roots(library)
        self.candidate = os.path.realpath(candidate) if candidate else ""
        self.pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.denied: list[str] = []
        self.preloaded = frozenset(sys.modules)
        self._namespaces: list[tuple[str, dict, int, tuple, bool]] = []
        self._modes: tuple[Callable[[], int], ...] = ()
        self._intruder: str | None = None
        # code libraries generated before the candidate's import (Triton's launch binder of the digest kernel,
        # dataclass methods: source with no file of its own), by identity; the objects are kept so ids stay valid
        self._generated: dict[int, Any] = {}

    # ------------------------------------------------------------ who asked
    def _trusted_file(self, filename: str) -> bool:
        return filename.startswith(self.trusted)

    def _library_file(self, filename: str) -> bool:
        return filename.startswith(self.stdlib) or filename.startswith("<frozen ")

    def _is_generated(self, code: Any) -> bool:
        """Whether `code` is one of the code objects generated before the candidate's import (install)."""
        return self._generated.get(id(code)) is code

    def _origin(self) -> str | None:
        """The file of the first frame outside the standard library, walking out from the audited
        operation (skipping this module's own frames); None when it is trusted code."""
        f = _getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if self._trusted_file(name):
                return None
            if not self._library_file(name):
                return f"{name}:{f.f_lineno}"
            f = f.f_back
        return "<no caller outside the standard library>"

    # ------------------------------------------------------------ the hook
    def _claims_trusted(self, filename: Any) -> bool:
        """The name passes for a library's file, as written (the prefix test the origin check makes) or once
        normalised (`kernelgate/../../tmp/x.py` is both a trusted prefix and a file elsewhere)."""
        try:
            name = os.fsdecode(filename)
        except TypeError:
            return False
        return (self._trusted_file(name) or self._library_file(name)
                or self._trusted_file(os.path.abspath(name)) or self._library_file(os.path.abspath(name)))

    def _genuine(self, source: Any, filename: Any) -> bool:
        """Source compiled under a library's file name is that file's own text, and the name is the file's
        plain absolute path (an import compiling a module that has no bytecode cache)."""
        name = os.fsdecode(filename)
        if name != os.path.normpath(name) or not os.path.isabs(name):
            return False
        if not (self._trusted_file(name) or self._library_file(name)):
            return False
        return _same_text(source, name)

    def _import_path(self) -> str | None:
        """The file the import system is loading, when the audited event comes from it (a loader's
        get_code or exec_module frame on the stack), else None."""
        f = _getframe(1)
        while f is not None:
            code = f.f_code
            if code.co_filename.startswith("<frozen importlib._bootstrap") and code.co_name in ("get_code", "exec_module"):
                loader = f.f_locals.get("self")
                path = getattr(loader, "path", None)
                return path if isinstance(path, str) else None
            f = f.f_back
        return None

    def _loaded_from_library(self, code: Any) -> bool:
        """A code object that claims a library's file may run only when the import system loaded it from a
        file under the trusted roots (read-only to the candidate)."""
        path = self._import_path()
        if path is None:
            return False
        real = os.path.realpath(path)
        return self._trusted_file(real) or self._library_file(real)

    def _past_candidate(self, frame: Any) -> str | None:
        """Where the nearest candidate frame is, when trusted code asked for `frame` and that frame is older than
        it (the harness's, beyond the candidate: a library that looks up its caller's caller and hands back its
        locals, as pydantic's parent_frame_namespace does, would hand over the harness's); None otherwise."""
        f = _getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if not (self._trusted_file(name) or self._library_file(name)):
                g = f.f_back
                while g is not None:
                    if g is frame:
                        return f"{name}:{f.f_lineno}"
                    g = g.f_back
                return None
            f = f.f_back
        return None

    def _hint(self, origin: str) -> str:
        """For code refused as the candidate's that sits in a directory on PYTHONPATH: how to vouch for it."""
        path = origin.rsplit(":", 1)[0]
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            root = os.path.abspath(entry) if entry else ""
            if root and root != self.pkg_parent and path.startswith(root.rstrip(os.sep) + os.sep) \
                    and os.path.realpath(path) != self.candidate:
                return (f"; if {root} holds library code you trust, name it in KERNELGATE_LIBRARY_PATH (a directory"
                        " on PYTHONPATH is the candidate's otherwise)")
        return ""

    def _verdict(self, event: str, args: tuple) -> str | None:
        """What the event would give candidate code, or None when it is harmless whoever asks."""
        if event in _DENY_ALWAYS:
            return _DENY_ALWAYS[event]
        if event == "object.__getattr__":
            return f"frames through .{args[1]}" if len(args) > 1 and args[1] in _FRAME_ATTRS else None
        if event in ("object.__setattr__", "object.__delattr__"):
            obj = args[0]
            if len(args) > 2 and args[1] == "__code__" and self._is_generated(args[2]):
                return "a function given a library's generated code (it may run in the harness's window)"
            if isinstance(obj, type) or callable(obj):
                mod = getattr(obj, "__module__", None) or ""
                if isinstance(mod, str) and (mod in self.preloaded or mod.split(".")[0] in _PROTECTED):
                    what = "set" if event == "object.__setattr__" else "deleted"
                    return f"{what} {getattr(obj, '__qualname__', type(obj).__name__)}.{args[1]} (code the harness runs on)"
            return None
        if event == "ctypes.dlopen":
            return "the interpreter's own symbols (ctypes.CDLL(None))" if args and args[0] is None else None
        if event == "ctypes.dlsym":
            lib = getattr(args[0], "_name", "") if args else ""
            if lib is None or (isinstance(lib, str) and _basename(lib).startswith(_SYSTEM_LIBS)):
                return f"the interpreter's or the C library's symbol {args[1] if len(args) > 1 else '?'} (ctypes)"
            return None
        if event == "compile":
            if len(args) > 1 and self._claims_trusted(args[1]) and not self._genuine(args[0], args[1]):
                return f"code compiled as {args[1]!r} (a library's file)"
            return None
        if event == "function.__new__" and args and self._is_generated(args[0]):
            return "a function made from a library's generated code (it may run in the harness's window)"
        if event in ("exec", "function.__new__"):
            code = args[0] if args else None
            fn = getattr(code, "co_filename", None)
            if fn is not None and self._claims_trusted(fn) and not self._loaded_from_library(code):
                return f"a code object claiming {fn!r} run ({event})"
            return None
        if event in ("marshal.loads", "marshal.load"):
            return None if self._import_path() is not None else "code objects from bytes (marshal)"
        if event == "code.__new__":
            return f"a code object claiming {args[1]!r}" if len(args) > 1 and self._claims_trusted(args[1]) else None
        return None

    def hook(self, event: str, args: tuple) -> None:
        if getattr(_local, "busy", False):
            return
        if not (event in _DENY_ALWAYS or event.startswith(("object.", "ctypes.", "compile", "code.", "exec", "function.", "marshal."))):
            return
        _local.busy = True
        try:
            what = self._verdict(event, args)
            origin = self._origin() if what is not None else None
            if what is not None and origin is None and event == "sys._getframe" and args:
                origin = self._past_candidate(args[0])
                what = "a frame beyond its own, through library code (sys._getframe)" if origin else None
            hint = self._hint(origin) if origin is not None else ""
        finally:
            _local.busy = False
        if what is None or origin is None or not self.enforce:
            return
        message = f"kernelgate refused candidate code {what} at {origin}{hint}"
        if len(self.denied) < 32:
            self.denied.append(message)
        raise Denied(message + " (the harness shares this process; docs/GATE.md)")

    def install(self) -> None:
        # functions generated before this point (the harness's own Triton launch binders, built when the worker
        # primes its digest kernel) were made before any candidate code existed in this process
        for o in gc.get_objects():
            if type(o) is FunctionType:
                code = o.__code__
                if code.co_filename.startswith("<") and not self._library_file(code.co_filename):
                    self._generated[id(code)] = code
        sys.addaudithook(self.hook)

    # ------------------------------------------------------------ after every call
    def watch(self, spaces: list[Any], code: list[Any], modes: tuple[Callable[[], int], ...]) -> None:
        """Snapshot what the harness's code looks up by name: every name its functions use (the modules in
        `code`: global, builtin and attribute names, nested functions and methods included) wherever it
        can resolve, in each namespace of `spaces` (modules and classes). For a class that is every such
        name it resolves through its MRO, so a name added to a subclass's own dict to shadow a base's
        method is a change; for a module, the names the harness's code uses that it holds and, for a module in
        `code`, the builtins its own code uses (a new global would shadow one)."""
        used = _names_used(code)
        self._namespaces = []
        for m in spaces:
            name = getattr(m, "__name__", "?") if not isinstance(m, type) else f"{m.__module__}.{m.__qualname__}"
            d = vars(m)
            if isinstance(m, type):
                keys = used & set(dir(m))
            elif any(m is c for c in code):   # and builtins its own code uses, which a new global would shadow
                keys = (used & set(d)) | (_names_used([m]) & _BUILTIN_NAMES)
            else:
                keys = used & set(d)
            keys -= _UNWATCHED.get(name, set())
            keys = tuple(sorted(keys))
            self._namespaces.append((name, d, keys, list(map(d.get, keys))))
        self._modes = modes

    def integrity(self) -> str | None:
        """None when nothing the harness runs on was replaced; else one line saying what was."""
        for name, d, keys, values in self._namespaces:
            if not all(map(_is, map(d.get, keys), values)):
                changed = next(k for k, v in zip(keys, values) if d.get(k) is not v)
                return f"candidate code changed {name}.{changed} (the harness's code looks it up there)"
        for count in self._modes:
            if count():
                return "forward returned with a torch function or dispatch mode still active"
        return None

    def _tracer(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and self._intruder is None:
            code = frame.f_code
            name = code.co_filename
            if not (self._trusted_file(name) or self._library_file(name) or self._is_generated(code)):
                self._intruder = f"{frame.f_code.co_name} ({name}:{frame.f_lineno})"
        return None

    def window_open(self) -> None:
        """From here to `window_close`, the harness works on an output: no candidate code may run."""
        self._intruder = None
        _settrace(self._tracer)

    def window_close(self) -> str | None:
        _settrace(None)
        who, self._intruder = self._intruder, None
        return None if who is None else f"candidate code ran inside the harness's checks of an output: {who}"
