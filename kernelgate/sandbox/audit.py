"""What runs inside the worker's audit hook and trace function: closures made once, over frozen state.

Candidate code can rebind any module or class attribute (CPython audits neither) and put it back before its
call returns; a check after the call would see nothing. So nothing the hook decides with is looked up when an
event comes: every name its code uses is bound here, when it is made (closure cells of functions that nothing
outside the guard references, or default arguments, whose replacement is itself audited); its tables are
frozen; its own frame lookups are exempted one event at a time, not by a flag candidate code could set; and it
reads candidate objects only through C-level descriptors of exact types, so no candidate code runs inside it.
tests/sandbox/test_audit.py checks the bytecode of every function here: no global or builtin lookup.

Three rules on top of who asked (kernelgate/sandbox/guard.py holds the policy and its reasons):
- the harness's thread is sealed: after the candidate's import no frame, gc or tracing event may happen there
  at all, except the harness's own lookups (`Hook.own_frames`); whoever asks, the worker ends at once;
- on every other thread, the operations that reach past the thread (gc's object graph, other threads' frames,
  tracing and audit hooks, memory by address) are refused whoever asks: all code there runs for the candidate,
  and trusted code can be steered into calling them (its module globals are the candidate's to rebind);
- everywhere else the decision is by origin, as before: candidate code is refused, trusted code is not.
"""
from __future__ import annotations

import _thread
import io
import marshal
import operator
import os
import stat
import sys
from types import CodeType, FunctionType
from typing import Any, Callable

#: the exit status of a worker ended by the guard (kernelgate/sandbox/host.py reads it as an introspection verdict)
EXIT_INTRUSION = 86


def make_fatal() -> Callable[[str], None]:
    """A function that writes one line to stderr and ends the process at once (no handler, no cleanup, nothing
    candidate code could intercept). Its dependencies are default arguments: replacing them is audited."""
    def fatal(message: str, _write=os.write, _exit=os._exit, _encode=str.encode, _code=EXIT_INTRUSION) -> None:
        try:
            _write(2, _encode("\n" + message + "\n", "utf-8", "replace"))
        finally:
            _exit(_code)
    return fatal


def make_tracer(trusted: tuple[str, ...], stdlib: tuple[str, ...], generated: frozenset[int],
                on_intrusion: Callable[[str], None]) -> Callable:
    """The harness thread's trace function: any Python function of candidate code called there (a finalizer, a
    weakref or gc callback, a method of an object the harness touches) is an intrusion, reported before its first
    line runs. Only default arguments (immutable, and replacing them is audited): `sys.gettrace()` hands this
    function to anyone on that thread, and its closure cells would be writable."""
    def tracer(frame: Any, event: str, arg: Any, _type=type, _str=str, _id=id, _trusted=trusted, _stdlib=stdlib,
               _generated=generated, _report=on_intrusion) -> None:
        if event == "call":
            code = frame.f_code
            name = code.co_filename
            if _type(name) is not _str:
                _report("candidate code ran on the harness's thread: a function whose file name is not a str")
            elif not (name.startswith(_trusted) or name.startswith(_stdlib) or name.startswith("<frozen ")
                      or _id(code) in _generated):
                _report("candidate code ran on the harness's thread: " + code.co_name + " (" + name + ":"
                        + _str(frame.f_lineno) + ")")
        return None
    return tracer


def make_integrity(namespaces: tuple, modes: tuple) -> Callable[[], Any]:
    """The check after each job (kernelgate/sandbox/guard.py `Guard.watch` builds the snapshot): every watched name
    of every namespace holds the object it held, and no torch mode is left active on this thread."""
    def integrity(_ns=namespaces, _modes=modes, _len=len, _range=range, _all=all, _map=map,
                  _is=operator.is_) -> Any:
        for name, d, keys, values in _ns:
            get = d.get
            if _all(_map(_is, _map(get, keys), values)):      # identity only: no candidate code runs here
                continue
            for i in _range(_len(keys)):
                if get(keys[i]) is not values[i]:
                    return "candidate code changed " + name + "." + keys[i] + " (the harness's code looks it up there)"
        for count in _modes:
            if count():
                return "forward returned with a torch function or dispatch mode still active"
        return None
    return integrity


class Hook:
    """The audit hook's functions, made by `make` (the hook itself, and the harness's exempted frame lookups)."""
    __slots__ = ("hook", "own", "seal")

    def __init__(self, hook: Callable, own: Callable, seal: Callable) -> None:
        self.hook, self.own, self.seal = hook, own, seal


def make(*, trusted: tuple[str, ...], stdlib: tuple[str, ...], preloaded: frozenset[str], protected: tuple[str, ...],
         generated: frozenset[int], deny: dict[str, str], global_reach: frozenset[str], frame_attrs: frozenset[str],
         pool_symbols: tuple[str, ...] = (), callback_symbols: frozenset[str] = frozenset(),
         libc_symbols: frozenset[str] = frozenset(), harness_dicts: tuple = (),
         system_libs: tuple[str, ...], dll_types: tuple[type, ...], hint: Callable[[str], str], enforce: bool, denied: list[str],
         fatal: Callable[[str], None], denied_type: type) -> Hook:
    """The hook over frozen copies of its tables. `denied` is the record (appended to); `fatal`, once the harness
    thread is sealed (`seal(ident)`), ends the worker on a refusal instead of raising into candidate code.
    `harness_dicts`: the namespaces of kernelgate's modules (kept alive here), by which a function is known as the
    harness's whatever its writable `__module__` says (red team 50 renamed it to read a function's defaults)."""
    # every name used below, bound now
    _getframe = sys._getframe
    _get_ident = _thread.get_ident
    _type, _str, _bytes, _bytearray, _memoryview, _len, _id = type, str, bytes, bytearray, memoryview, len, id
    _CodeType, _FunctionType, _typetype, _issubclass = CodeType, FunctionType, type, issubclass
    _type_module = type.__dict__["__module__"].__get__
    _type_qualname = type.__dict__["__qualname__"].__get__
    _func_globals = FunctionType.__dict__["__globals__"].__get__      # read-only, and reading it raises no event
    _func_qualname = FunctionType.__dict__["__qualname__"].__get__
    _pinned = tuple(harness_dicts)
    _harness_dicts = frozenset(map(id, _pinned))
    _obj_getattr = object.__getattribute__
    _dict, _tuple, _frozenset = dict, tuple, frozenset
    _open, _lstat, _readlink, _S_ISLNK, _getcwd = io.open, os.lstat, os.readlink, stat.S_ISLNK, os.getcwd
    _decode, _encode = bytes.decode, str.encode
    _OSError, _BaseException, _Denied = OSError, BaseException, denied_type
    _marshal_loads, _compile = marshal.loads, compile
    _sys = sys
    _prefix0 = sys.pycache_prefix
    _tag = sys.implementation.cache_tag
    _deny = _dict(deny)                                        # a private copy
    _plain_consts = (int, float, complex, str, bytes, tuple, frozenset, bool, type(None), type(Ellipsis), CodeType)
    _enforce = bool(enforce)
    _denied, _hint, _fatal = denied, hint, fatal
    busy: dict[int, str] = {}          # thread -> the one event the guard's own lookup is raising there now
    sealed = [0]                       # the harness thread's ident, once sealed
    genuine_code: dict[str, Any] = {}  # a library file -> the code object compiled from it (`matches_file`)
    checked_source: dict[str, bool] = {}

    def own_frame(depth: int) -> Any:
        """sys._getframe(depth), counted from the caller, without the guard refusing its own lookup."""
        ident = _get_ident()
        busy[ident] = "sys._getframe"
        try:
            return _getframe(depth + 1)
        finally:
            busy.pop(ident, None)

    def own(event: str, fn: Callable, *args: Any) -> Any:
        """fn(*args) for the guard or the harness (sys._current_frames for the runner's idle check, sys.settrace
        for the harness thread's tracer), its one audit event `event` exempted like `own_frame`'s."""
        ident = _get_ident()
        busy[ident] = event
        try:
            return fn(*args)
        finally:
            busy.pop(ident, None)

    def harness_own(event: str, fn: Callable, *args: Any) -> Any:
        """`own` for the harness, on its own thread only once sealed (a copy that leaked to candidate code would
        otherwise exempt anything, anywhere)."""
        if sealed[0] and _get_ident() != sealed[0]:
            _fatal("kernelgate ended the worker: the harness's exemption was used on another thread")
        return own(event, fn, *args)

    def seal(ident: int) -> None:
        sealed[0] = ident

    def one_of(t: Any, types: tuple) -> bool:
        for u in types:
            if t is u:
                return True
        return False

    def normabs(p: str) -> str:
        """The absolute, normalised form of a POSIX path (str operations only)."""
        if not p.startswith("/"):
            p = _getcwd() + "/" + p
        parts: list[str] = []
        for c in p.split("/"):
            if c == "" or c == ".":
                continue
            if c == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(c)
        return "/" + "/".join(parts)

    def realpath(p: str) -> str:
        """normabs with every symbolic link resolved (lstat and readlink only)."""
        todo = normabs(p)[1:].split("/")
        done, hops = "", 0
        while todo:
            c = todo.pop(0)
            if c == "" or c == ".":
                continue
            if c == "..":
                done = done[:done.rfind("/")] if done else ""
                continue
            step = done + "/" + c
            try:
                mode = _lstat(step).st_mode
            except _OSError:
                done = step
                continue
            if _S_ISLNK(mode):
                hops += 1
                if hops > 40:
                    return step
                target = _readlink(step)
                if target.startswith("/"):
                    done = ""
                todo = target.split("/") + todo
            else:
                done = step
        return done or "/"

    def library(name: str) -> bool:
        return name.startswith(stdlib) or name.startswith("<frozen ")

    def claims(name: str) -> bool:
        """The name passes for a library's file, as written or once normalised."""
        if name.startswith(trusted) or library(name):
            return True
        a = normabs(name)
        return a.startswith(trusted) or a.startswith(stdlib)

    def plain_name(x: Any) -> Any:
        t = _type(x)
        if t is _str:
            return x
        if t is _bytes:
            return _decode(x, "utf-8", "surrogateescape")
        return None

    def file_bytes(name: str) -> Any:
        try:
            f = _open(name, "rb")
        except _OSError:
            return None
        try:
            return f.read()
        finally:
            f.close()

    def genuine_text(source: Any, name: str) -> bool:
        """Source compiled under a library's file name is that file's own text, and the name is its plain
        absolute path (an import compiling a module that has no bytecode cache)."""
        if normabs(name) != name or not (name.startswith(trusted) or name.startswith(stdlib)):
            return False
        t = _type(source)
        if t is _str:
            data = _encode(source, "utf-8")
        elif t is _bytes:
            data = source
        elif t is _bytearray or t is _memoryview:
            data = _bytes(source)
        else:
            return False
        real = file_bytes(name)
        return real is not None and data == real

    def code_files(code: Any) -> Any:
        """The file names of a code object and of those nested in its constants; None when one is not a plain str
        or a constant is of a type marshal could not have made (its comparison could run candidate code)."""
        names: list[str] = []
        stack = [code]
        while stack:
            c = stack.pop()
            n = c.co_filename
            if _type(n) is not _str or _len(names) > 200000:
                return None
            names.append(n)
            consts = c.co_consts
            todo = [consts]
            while todo:
                items = todo.pop()
                for k in items:
                    kt = _type(k)
                    if kt is _CodeType:
                        stack.append(k)
                    elif kt is _tuple or kt is _frozenset:
                        todo.append(k)
                    elif not one_of(kt, _plain_consts):
                        return None
        return names

    def reference_code(name: str) -> Any:
        """The module code compiled from the library file `name` (its bytecode cache beside it when that holds the
        same code, else its source), once per file; None when it cannot be read."""
        if name in genuine_code:
            return genuine_code[name]
        ref = None
        head, _, tail = name.rpartition("/")
        stem = tail[:-3] if tail.endswith(".py") else ""
        cached = file_bytes(head + "/__pycache__/" + stem + "." + _tag + ".pyc") if stem and _tag else None
        if cached is not None and _len(cached) > 16:
            try:
                ref = own("marshal.loads", _marshal_loads, cached[16:])
            except _BaseException:
                ref = None
        if ref is None:
            text = file_bytes(name)
            if text is not None:
                try:
                    ref = own("compile", _compile, text, name, "exec", 0, True)
                except _BaseException:
                    ref = None
        genuine_code[name] = ref
        return ref

    def matches_file(code: Any, name: str) -> bool:
        """`code` is the module code of the library file `name`, or a function's code nested in it, compiled from
        the file's own text (not from bytecode someone else wrote)."""
        real = realpath(name)
        if not (real.startswith(trusted) or real.startswith(stdlib)):
            return False
        ref = reference_code(name)
        if ref is None:
            return False
        if ref == code:
            return True
        if name in checked_source:       # the cache beside it may be stale: the source decides
            return False
        checked_source[name] = True
        text = file_bytes(name)
        try:
            fresh = own("compile", _compile, text, name, "exec", 0, True) if text is not None else None
        except _BaseException:
            fresh = None
        if fresh is not None and fresh == code:
            genuine_code[name] = ref = fresh
        stack = [ref]
        while stack:
            c = stack.pop()
            if c == code:
                return True
            for k in c.co_consts:
                if _type(k) is _CodeType:
                    stack.append(k)
        return False

    def importing(f: Any) -> bool:
        """An import system loader's get_code or exec_module frame is on the stack."""
        while f is not None:
            code = f.f_code
            fn, cn = code.co_filename, code.co_name
            if (_type(fn) is _str and _type(cn) is _str and fn.startswith("<frozen importlib._bootstrap")
                    and (cn == "get_code" or cn == "exec_module")):
                return True
            f = f.f_back
        return False

    def origin(f: Any) -> Any:
        """file:line of the first frame outside the standard library, walking out from `f`; None when trusted."""
        while f is not None:
            name = f.f_code.co_filename
            if _type(name) is not _str:
                return "<a frame whose file name is not a str>"
            if name.startswith(trusted):
                return None
            if not library(name):
                return name + ":" + _str(f.f_lineno)
            f = f.f_back
        return "<no caller outside the standard library>"

    def past_candidate(f: Any, frame: Any) -> Any:
        """Where the nearest candidate frame is, when trusted code asked for `frame` and that frame is older than it."""
        while f is not None:
            name = f.f_code.co_filename
            if _type(name) is not _str or not (name.startswith(trusted) or library(name)):
                g = f.f_back
                while g is not None:
                    if g is frame:
                        return origin(f) or "<candidate>"
                    g = g.f_back
                return None
            f = f.f_back
        return None

    def module_of(obj: Any) -> Any:
        """(module, qualname) of a function or class, read through the types' own descriptors; None otherwise."""
        t = _type(obj)
        if t is _FunctionType:
            return obj.__module__, obj.__qualname__
        if _issubclass(t, _typetype):
            return _type_module(obj), _type_qualname(obj)
        return None

    def code_claims(value: Any) -> Any:
        if _type(value) is not _CodeType:
            return None
        names = code_files(value)
        if names is None:
            return "a code object with a file name that is not a plain str"
        for n in names:
            if claims(n):
                return n
        return None

    def verdict(event: str, args: tuple, caller: Any) -> Any:
        """What the event would give candidate code, or None when it is harmless whoever asks."""
        if event in _deny:
            return _deny[event]
        if event == "object.__getattr__":
            if _len(args) > 1 and _type(args[1]) is _str and args[1] in frame_attrs:
                return "frames through ." + args[1]
            if _len(args) > 1 and (args[1] == "__defaults__" or args[1] == "__kwdefaults__"):
                # the harness binds what it runs on as defaults (the runner's jobs, the dispatcher's originals, the
                # C mixes' function pointers); a function is the harness's by the module namespace it was made in
                if _type(args[0]) is _FunctionType and _id(_func_globals(args[0])) in _harness_dicts:
                    return "!the defaults of the harness's function " + _str(_func_qualname(args[0]))
                found = module_of(args[0])
                if found is not None and _type(found[0]) is _str and found[0].split(".")[0] == "kernelgate":
                    return "!the defaults of the harness's function " + _str(found[1])
            return None
        if event == "object.__setattr__" or event == "object.__delattr__":
            if _len(args) < 2 or _type(args[1]) is not _str:
                return "an attribute whose name is not a str"
            name = args[1]
            if _len(args) > 2 and name == "__code__" and _type(args[2]) is _CodeType:
                if _id(args[2]) in generated:
                    return "a function given a library's generated code (it may run on the harness's thread)"
                claimed = code_claims(args[2])
                if claimed is not None:
                    return "a function given code that claims " + claimed
            found = module_of(args[0])
            if found is None:
                return None
            mod, qual = found
            if _type(mod) is not _str or _type(qual) is not _str:
                return "an attribute of an object whose module is not a str"
            if mod in preloaded or mod.split(".")[0] in protected:
                what = "set " if event == "object.__setattr__" else "deleted "
                # the code a library function runs: refused whoever asks, once sealed (trusted code can be
                # steered); a class's docstring, name or bases (libraries set them at import) only to candidate code
                strict = "!" if name == "__code__" or name == "__defaults__" or name == "__kwdefaults__" else ""
                return strict + what + qual + "." + name + " (code the harness runs on)"
            return None
        if event == "ctypes.dlopen":
            return "the interpreter's own symbols (ctypes.CDLL(None))" if args and args[0] is None else None
        if event == "ctypes.dlsym":
            sym = args[1] if _len(args) > 1 else None
            if _type(sym) is _str and (sym.startswith(pool_symbols) or sym.partition("@")[0] in callback_symbols):
                # refused whoever asks (a hook can make torch's own frame do the lookup): a runtime that runs a
                # function pointer on a thread it already has (an OpenMP team's docked worker: red team 18,
                # `omp_team_hijack`; a CUDA host function) runs candidate code beside the harness, no new thread
                return "!the runtime's " + sym + ", which runs code on the threads of its pools (ctypes)"
            if _type(sym) is _str and sym.partition("@")[0] in libc_symbols:
                # a lookup through any library also searches its dependencies: libm's `syscall` is the C library's
                # (red team 48), libm's `mallopt` the allocator's (red team 49)
                return "the C library's " + sym + ", through whichever library it is looked up (ctypes)"
            lib = args[0] if args else None
            if not one_of(_type(lib), dll_types):      # a subclass's attributes could run its code
                return "a symbol through a library object of type " + _type_qualname(_type(lib)) + " (ctypes)"
            attrs = _obj_getattr(lib, "__dict__")
            path = attrs.get("_name")
            if path is None:
                return "a symbol of the interpreter's own library (ctypes)"
            if _type(path) is not _str:
                return "a symbol of a library whose name is not a str (ctypes)"
            if path.rpartition("/")[2].startswith(system_libs):
                sym = args[1] if _len(args) > 1 and _type(args[1]) is _str else "?"
                return "the interpreter's or the C library's symbol " + sym + " (ctypes)"
            return None
        if event == "compile":
            if _len(args) < 2:
                return None
            name = plain_name(args[1])
            if name is None:
                return "code compiled under a file name that is not a str or bytes"
            if claims(name) and not genuine_text(args[0], name):
                return "code compiled as a library's file (" + name + ")"
            return None
        if event == "exec" or event == "function.__new__":
            code = args[0] if args else None
            if _type(code) is not _CodeType:
                return None
            if event == "function.__new__" and _id(code) in generated:
                return "a function made from a library's generated code (it may run on the harness's thread)"
            names = code_files(code)
            if names is None:
                return "a code object with a file name that is not a plain str (" + event + ")"
            top = names[0]
            for n in names:
                if n != top:
                    return "a code object holding code of another file (" + n + ") run (" + event + ")"
            if claims(top):
                if event == "exec" and importing(caller) and matches_file(code, top):
                    return None             # an import of a library's own module, whoever imports it
                return "a code object claiming " + top + " run (" + event + ")"
            return None
        if event == "marshal.loads" or event == "marshal.load":
            if _sys.pycache_prefix is not _prefix0:
                return "code objects from bytes after sys.pycache_prefix was changed"
            return None if importing(caller) else "code objects from bytes (marshal)"
        if event == "code.__new__":
            name = plain_name(args[1]) if _len(args) > 1 else None
            if name is None:
                return "a code object whose file name is not a str"
            return "a code object claiming " + name if claims(name) else None
        return None

    def refuse(message: str) -> None:
        if _len(_denied) < 32:
            _denied.append(message)
        if sealed[0]:
            _fatal(message)
        raise _Denied(message + " (the harness shares this process; docs/GATE.md)")

    def hook(event: str, args: tuple) -> None:
        if event == "sys.unraisablehook":
            # an exception nobody could raise (a finalizer's, a weakref callback's): the hook gets a traceback built
            # from the thread's current frame, with no other event; on the harness's thread that frame is its own
            if sealed[0] and _get_ident() == sealed[0]:
                _fatal("kernelgate ended the worker: an exception of a finalizer or callback went to "
                       "sys.unraisablehook on the harness's thread (candidate objects must not die there)")
            return
        if not (event in _deny or event.startswith("object.") or event.startswith("ctypes.")
                or event.startswith("compile") or event.startswith("code.") or event.startswith("exec")
                or event.startswith("function.") or event.startswith("marshal.")):
            return
        ident = _get_ident()
        if busy.get(ident) == event:
            busy.pop(ident, None)          # the guard's own lookup: its one event, nothing after it
            return
        if not _enforce:
            return
        try:
            what = verdict(event, args, own_frame(1) if event[:8] == "marshal." or event == "exec" else None)
        except _BaseException:
            what = "an operation the guard could not read (" + event + ")"
        if what is None:
            return
        strict = what[:1] == "!"            # refused on the candidate's threads whoever asks, once sealed
        if strict:
            what = what[1:]
        harness = sealed[0]
        if harness and ident == harness:
            _fatal("kernelgate ended the worker: " + what + " on the harness's thread (after the candidate's "
                   "import nothing there may ask for it)")
        if harness and (strict or event in global_reach):
            refuse("kernelgate refused " + what + " on a thread running candidate code (docs/GATE.md)")
        caller = own_frame(1)
        where = origin(caller)
        if where is None and event == "sys._getframe" and args:
            where = past_candidate(caller, args[0])
            if where is not None:
                what = "a frame beyond its own, through library code (sys._getframe)"
        if where is None:
            return
        refuse("kernelgate refused candidate code " + what + " at " + where + _hint(where))

    return Hook(hook, harness_own, seal)
