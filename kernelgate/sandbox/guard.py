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
import os
import site
import sys
import sysconfig
import threading
from types import FunctionType
from typing import Any, Callable

import torch

from . import audit

# bound now, before any candidate code: replacing them later changes nothing here
_settrace = sys.settrace
_basename = os.path.basename
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
#: operations that reach past the thread that asks: refused on every thread but the harness's once it is sealed,
#: whoever asks (code there runs for the candidate, and library code can be steered by rebinding its globals)
_GLOBAL_REACH = frozenset({"sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
                           "sys.monitoring.register_callback", "gc.get_objects",
                           "gc.get_referrers", "gc.get_referents", "ctypes.cdata", "ctypes.string_at",
                           "ctypes.wstring_at", "ctypes.dlsym/handle"})
_SYSTEM_LIBS = ("libc.so", "libc-", "libpython", "ld-linux", "libdl.so", "libpthread")
#: symbols of runtimes that run a function pointer on threads they already have (OpenMP's teams and tasks, in
#: libgomp, LLVM's and Intel's runtimes; CUDA's host functions), whichever library they are looked up through
_POOL_SYMBOLS = ("GOMP_", "omp_", "kmp_", "__kmpc_", "ompt_", "GOMPX_")
_CALLBACK_SYMBOLS = frozenset({"cuLaunchHostFunc", "cuLaunchHostFunc_ptsz", "cudaLaunchHostFunc",
                               "cudaLaunchHostFunc_ptsz", "cuStreamAddCallback", "cuStreamAddCallback_ptsz",
                               "cudaStreamAddCallback", "cudaStreamAddCallback_ptsz"})
#: the C library's functions that reach past a library of one's own (raw system calls, memory maps and protection,
#: the allocator's settings, processes, signals, threads, scheduling, dynamic loading), refused through any library:
#: a lookup also searches a library's dependencies (red team 48: `ctypes.CDLL("libm.so.6").syscall`)
_LIBC_SYMBOLS = frozenset({
    "syscall", "mallopt", "malloc_trim", "mprotect", "pkey_mprotect", "mmap", "mmap64", "munmap", "mremap",
    "madvise", "ptrace", "process_vm_readv", "process_vm_writev", "kill", "tkill", "tgkill", "sigqueue",
    "pthread_kill", "pthread_create", "fork", "vfork", "clone", "clone3", "execve", "execv", "execvp", "system",
    "popen", "posix_spawn", "posix_spawnp", "prctl", "setrlimit", "prlimit", "prlimit64", "sched_setaffinity",
    "sched_setattr", "sched_setscheduler", "pthread_setaffinity_np", "setpriority", "sigaction", "signal",
    "dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dlinfo", "memcpy", "memmove", "memset"})
_PROTECTED = ("torch", "triton", "kernelgate", "builtins")


class Denied(PermissionError):
    """Raised into candidate code that asked for something the guard refuses."""


#: the methods of torch's dispatcher library handles that put a kernel in front of an operator (or every operator)
_REGISTERING = ("impl", "impl_t_t", "impl_with_aoti_compile", "fallback", "fallback_fallthrough",
                "register_ad_inplace_or_view_fallback")
_KERNEL_METHODS = frozenset({"impl", "impl_t_t", "impl_with_aoti_compile"})     # the rest register fallbacks
#: namespaces whose operators the harness's own tensor work runs through
_HARNESS_NAMESPACES = frozenset({"aten"})


def seal_dispatcher(denied: list[str], enforce: bool, libraries: list[Any] = ()) -> None:
    """No kernel of the candidate's in front of an operator the harness runs. Every torch op on the harness's
    thread goes through the dispatcher; a kernel registered for it from Python (`torch.library`: a function, or a
    chain of C callables that no trace sees) ran there: red team 16 (`detach_fixup`) registered one for
    `aten::detach`, which wrote the right values into the zeros forward returned whenever the harness detached an
    output to describe it. From the guard's install on (before the candidate's import), a registration for an
    operator of `aten`, a fallback (which stands in front of every operator), or one through a library handle not
    made by torch's own factory, is refused and recorded, whoever asks (torch itself registers none there once
    imported: torch.compile's lazy libraries are other namespaces). The originals are held in the wrappers'
    defaults, which the guard does not let candidate code read (kernelgate/sandbox/audit.py). `libraries`: the
    torch.library.Library objects torch made before (its own, at import), whose handles are known."""
    M = torch._C._DispatchModule
    made: dict[int, tuple[Any, str]] = {}

    def _dispatch_library(kind: Any, ns: Any, *rest: Any, _orig=torch._C._dispatch_library, _made=made,
                          _id=id, _str=str, _type=type) -> Any:
        m = _orig(kind, ns, *rest)
        _made[_id(m)] = (m, ns if _type(ns) is _str else "")
        return m

    def wrap(name: str, orig: Any) -> Any:
        def registering(self: Any, *args: Any, _orig=orig, _name=name, _made=made, _denied=denied,
                        _enforce=enforce, _id=id, _type=type, _str=str, _ours=_HARNESS_NAMESPACES,
                        _Denied=Denied, **kwargs: Any) -> Any:
            entry = _made.get(_id(self))
            ns = entry[1] if entry is not None and entry[0] is self else None
            why = None
            if _name not in _KERNEL_METHODS:
                why = "a dispatcher fallback (" + _name + "), which stands in front of every operator"
            elif ns is None:
                why = "an operator kernel through a library handle torch's factory did not make"
            else:
                op = args[0] if args else kwargs.get("name")
                op = op if _type(op) is _str else ""
                target = op.split("::", 1)[0] if "::" in op else ns
                if target in _ours or target == "_" or not target:
                    why = "a kernel for " + (op if "::" in op else ns + "::" + op) + " (torch.library)"
            if why is not None and _enforce:
                msg = why + ": the harness's own tensor operations run through the dispatcher"
                _denied.append(msg)
                raise _Denied(msg)
            return _orig(self, *args, **kwargs)
        registering.__qualname__ = f"_DispatchModule.{name}"
        return registering

    for o in libraries:
        m, ns = getattr(o, "m", None), getattr(o, "ns", "")
        if m is not None:
            made[id(m)] = (m, ns if type(ns) is str else "")
    for name in _REGISTERING:
        orig = M.__dict__.get(name)
        if orig is not None:
            setattr(M, name, wrap(name, orig))
    torch._C._dispatch_library = _dispatch_library


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
        self.pythonpath = tuple(os.path.abspath(e) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e)
        self.denied: list[str] = []
        self.preloaded = frozenset(sys.modules)
        self._namespaces: list[tuple[str, dict, int, tuple, bool]] = []
        self._modes: tuple[Callable[[], int], ...] = ()
        self._intruder: str | None = None
        self._hook: audit.Hook | None = None
        self._generated: frozenset[int] = frozenset()
        self._keep: tuple[Any, ...] = ()
        self._tracer: Callable | None = None
        self._fatal = audit.make_fatal()
        self._integrity: Callable[[], str | None] = audit.make_integrity((), ())

    def _hint(self, origin: str) -> str:
        """For code refused as the candidate's that sits in a directory on PYTHONPATH: how to vouch for it (words
        for the message only: the decision is taken before this runs)."""
        path = origin.rsplit(":", 1)[0]
        for root in self.pythonpath:
            if root != self.pkg_parent and path.startswith(root.rstrip(os.sep) + os.sep) and path != self.candidate:
                return (f"; if {root} holds library code you trust, name it in KERNELGATE_LIBRARY_PATH (a directory"
                        " on PYTHONPATH is the candidate's otherwise)")
        return ""

    def install(self) -> None:
        """Add the audit hook (audit.make: its state frozen now). Functions generated before this point (the
        harness's own Triton launch binders, built when the worker primes its digest kernel; dataclass methods)
        were made before any candidate code existed in this process: they may run on the harness's thread."""
        keep, libraries = [], []
        for o in gc.get_objects():           # one walk: generated functions, and torch's dispatcher libraries
            t = type(o)
            if t is FunctionType:
                code = o.__code__
                if code.co_filename.startswith("<") and not code.co_filename.startswith(self.stdlib + ("<frozen ",)):
                    keep.append(code)
            elif t.__name__ == "Library" and t.__module__ == "torch.library":
                libraries.append(o)
        self._keep = tuple(keep)
        self._generated = frozenset(id(c) for c in keep)
        seal_dispatcher(self.denied, self.enforce, libraries)
        import ctypes
        self._hook = audit.make(
            trusted=self.trusted, stdlib=self.stdlib, preloaded=self.preloaded, protected=_PROTECTED,
            generated=self._generated, deny=dict(_DENY_ALWAYS), global_reach=_GLOBAL_REACH, frame_attrs=_FRAME_ATTRS,
            system_libs=_SYSTEM_LIBS, pool_symbols=_POOL_SYMBOLS, callback_symbols=_CALLBACK_SYMBOLS,
            libc_symbols=_LIBC_SYMBOLS, harness_dicts=_harness_dicts(),
            dll_types=(ctypes.CDLL, ctypes.PyDLL), hint=self._hint, enforce=self.enforce,
            denied=self.denied, fatal=self._fatal, denied_type=Denied)
        sys.addaudithook(self._hook.hook)

    def seal(self) -> None:
        """From now on this thread is the harness's (kernelgate/sandbox/worker.py): no frame, gc or tracing event
        may happen on it but the harness's own (`own`), a refusal anywhere ends the worker instead of raising
        into candidate code (which could catch it and go on), the operations that reach past a thread are refused
        on every other thread whoever asks, and candidate code run on this thread ends the worker (`watch_thread`)."""
        assert self._hook is not None
        if self.enforce:
            self._hook.seal(threading.get_ident())
        self.watch_thread()

    def own(self, event: str, fn: Callable, *args: Any) -> Any:
        """fn(*args) with its one audit event `event` exempted (the harness's own sys._current_frames)."""
        assert self._hook is not None
        return self._hook.own(event, fn, *args)

    def watch_thread(self) -> None:
        """(Re)arm the trace function on this thread for good: candidate code called here ends the worker when
        enforcing, and is noted otherwise (a baseline's worker pays the same cost)."""
        if self._tracer is None:
            report = self._fatal if self.enforce else self._note
            self._tracer = audit.make_tracer(self.trusted, self.stdlib, self._generated, report)
        if sys.gettrace() is not self._tracer:
            self._settrace(self._tracer)

    def _settrace(self, fn: Any) -> None:
        if self._hook is not None:
            self._hook.own("sys.settrace", _settrace, fn)
        else:
            _settrace(fn)

    def _note(self, message: str) -> None:
        if self._intruder is None:
            self._intruder = message

    def window_open(self) -> None:
        """From here to `window_close`, no candidate code may run on this thread (noted, not fatal: tests)."""
        self._intruder = None
        self._settrace(audit.make_tracer(self.trusted, self.stdlib, self._generated, self._note))

    def window_close(self) -> str | None:
        self._settrace(None)
        who, self._intruder = self._intruder, None
        return who

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
            self._namespaces.append((name, d, keys, tuple(map(d.get, keys))))
        self._modes = modes
        self._integrity = audit.make_integrity(tuple(self._namespaces), tuple(modes))

    def integrity(self) -> str | None:
        """None when nothing the harness runs on was replaced; else one line saying what was (audit.make_integrity:
        bound when `watch` ran, so rebinding what it would look up changes nothing)."""
        return self._integrity()


def _harness_dicts() -> tuple:
    """The namespaces of kernelgate's modules loaded now (the worker's `__main__` among them when it is kernelgate's):
    a function made in one is the harness's (audit.make `harness_dicts`)."""
    out = []
    for name, mod in list(sys.modules.items()):
        spec = getattr(mod, "__spec__", None)
        real = getattr(spec, "name", name) if spec is not None else name
        if isinstance(real, str) and (real == "kernelgate" or real.startswith("kernelgate.")):
            out.append(vars(mod))
    return tuple(out)


def harness_namespaces(main: str) -> tuple[list[Any], list[Any]]:
    """(namespaces, code): the modules and classes in which the harness's code looks names up at call time,
    and the modules whose code that is (kernelgate/sandbox/guard.py watches every such name: neither module nor
    class attributes are audited by CPython). `main`: the worker module's name (__main__ in a worker process)."""
    import json
    import json.encoder
    import multiprocessing.connection as mpc
    from types import ModuleType
    std = [sys.modules[n] for n in ("json", "json.encoder", "struct", "multiprocessing.connection") if n in sys.modules]
    ours = [sys.modules[n] for n in (main, "kernelgate.digest", "kernelgate.clock", "kernelgate.sandbox.loop",
                                      "kernelgate.sandbox.handle", "kernelgate.sandbox.history",
                                      "kernelgate.sandbox.ipc", "kernelgate.sandbox.guard", "kernelgate.sandbox.sensors")]
    import pathlib
    # and every module the harness's own modules name (os, os.path, sys, time, ...): a function the harness calls
    # through one, replaced by a chain of C callables (no trace sees it), would run in the harness's frame
    named = {id(v): v for m in ours for v in vars(m).values() if isinstance(v, ModuleType)}
    named[id(os.path)] = os.path
    spaces: list[Any] = [torch, torch._C, torch.cuda, sys.modules["builtins"], *std, *ours,
                         *[v for v in named.values() if not any(v is k for k in (torch, torch._C, torch.cuda, *std, *ours))],
                         torch.Tensor, torch._C.TensorBase, mpc.Connection, mpc._ConnectionBase, json.JSONEncoder,
                         *type(pathlib.Path()).__mro__[:-1]]
    for m in ours:
        spaces += [v for v in vars(m).values() if isinstance(v, type) and v.__module__ == m.__name__]
    return spaces, ours + std
