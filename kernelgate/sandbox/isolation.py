"""Confinement of worker processes (Linux), from ctypes and the kernel alone.

In the worker's child, between fork and exec (`Confinement.apply`, a Popen preexec_fn; everything it
needs is prepared in the judge beforehand, so the child only makes system calls):
  - no new privileges (PR_SET_NO_NEW_PRIVS): no setuid binary or file capability gains anything;
  - as root: every capability dropped (bounding set, securebits NOROOT and NO_SETUID_FIXUP locked, capset
    empty), so a uid-0 worker cannot ptrace, signal other users' processes or override file permissions;
  - Landlock: files may be written only beneath the worker's private directory (and a few device nodes),
    read anywhere; from ABI 6 signals and abstract unix sockets are scoped to the worker's own processes.
    A Landlock domain also cannot ptrace (or open /proc/<pid>/mem of) a process outside it;
  - seccomp: no ptrace, process_vm_readv/writev, pidfd_getfd, process_madvise, and no setsid (so every
    descendant stays in the worker's session, where the judge finds it); where Landlock cannot scope
    signals, signals only to the worker itself.
After the build, the worker installs one more filter on every thread (`lockdown_self`: no fork, vfork,
clone of a process, exec, no change of a signal's action), which the judge verifies from /proc, not from the
worker's reply.

The judge itself (`judge_setup`) becomes non-dumpable (a same-uid process without capabilities cannot
open its /proc/<pid>/mem or ptrace it) and a child subreaper (orphans of its workers are reparented to it).
Everything degrades: a missing kernel feature leaves a working, less confined worker, and says so.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import struct
import sys
from pathlib import Path

#: set to "off" to start workers without confinement (debugging only)
SWITCH = "KERNELGATE_ISOLATION"

_LINUX = sys.platform.startswith("linux")

# prctl options
PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 4, 22, 24, 28
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 36, 38, 47, 4
SECBITS_ALL = 0xEF          # NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE (each locked), KEEP_CAPS locked off
SECBITS_OLD = 0x0F          # kernels before ambient capabilities (4.3)
CLONE_THREAD = 0x00010000

# seccomp
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_RET_ALLOW = 0x7FFF0000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06

_ARCHES = {
    "x86_64": dict(audit=0xC000003E, x32=True, kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129,
                   rt_tgsigqueueinfo=297, ptrace=101, process_vm_readv=310, process_vm_writev=311, setsid=112,
                   fork=57, vfork=58, clone=56, execve=59, execveat=322, seccomp=317, setpriority=141,
                   sched_setparam=142, sched_setscheduler=144, sched_setaffinity=203, sched_setattr=314,
                   prlimit64=302, ioprio_set=251, rt_sigaction=13),
    "aarch64": dict(audit=0xC00000B7, x32=False, kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138,
                    rt_tgsigqueueinfo=240, ptrace=117, process_vm_readv=270, process_vm_writev=271, setsid=157,
                    clone=220, execve=221, execveat=281, seccomp=277, setpriority=140, sched_setparam=118,
                    sched_setscheduler=119, sched_setaffinity=122, sched_setattr=274, prlimit64=261, ioprio_set=30,
                    rt_sigaction=134),
}
_COMMON = dict(pidfd_send_signal=424, clone3=435, pidfd_getfd=438, process_madvise=440,
               landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446)
_NR = dict(_ARCHES.get(platform.machine(), {}), **_COMMON) if platform.machine() in _ARCHES else {}

# Landlock
_FS = dict(write_file=1 << 1, remove_dir=1 << 4, remove_file=1 << 5, make_char=1 << 6, make_dir=1 << 7,
           make_reg=1 << 8, make_sock=1 << 9, make_fifo=1 << 10, make_block=1 << 11, make_sym=1 << 12,
           refer=1 << 13, truncate=1 << 14)
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2
_RULE_PATH_BENEATH = 1
#: device nodes a worker may open for writing (CUDA opens /dev/nvidia* read-write); never block devices
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "kfd")
_DEVICE_DIRS = ("nvidia-caps", "dri")

_LIBC = ctypes.CDLL(None, use_errno=True) if _LINUX else None
if _LIBC is not None:
    _LIBC.syscall.restype = ctypes.c_long
    _LIBC.prctl.restype = ctypes.c_int
    _LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class _FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _prctl(option: int, a: int = 0, b: int = 0) -> int:
    assert _LIBC is not None
    return _LIBC.prctl(option, a, b, 0, 0)


def _syscall(nr: int, *args) -> int:
    assert _LIBC is not None
    return _LIBC.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])


# ------------------------------------------------------------------ what this machine offers
_ABI: int | None = None


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel, 0 where there is none (or it is disabled)."""
    global _ABI
    if _ABI is None:
        _ABI = 0
        if _LIBC is not None and _NR:
            v = _syscall(_NR["landlock_create_ruleset"], ctypes.c_void_p(None), 0, 1)
            _ABI = int(v) if v > 0 else 0
    return _ABI


def seccomp_supported() -> bool:
    """seccomp filters can be installed (Linux, a known architecture, errno actions)."""
    if not _NR or _LIBC is None:
        return False
    try:
        return "errno" in Path("/proc/sys/kernel/seccomp/actions_avail").read_text().split()
    except OSError:
        return os.path.exists("/proc/self/status") and "Seccomp:" in Path("/proc/self/status").read_text()


def sealed_memory() -> bool:
    """Shared regions can be memfds sealed against shrinking (see wire.Bulk)."""
    import fcntl
    return hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS")


def disabled() -> bool:
    return os.environ.get(SWITCH, "").lower() in ("off", "0", "no", "false")


def available() -> dict[str, str]:
    """Each protection a worker started now would get on this machine: a description, or why it is missing
    (for docs and the CLI). What a given worker actually got is `sandbox.Worker.protections`."""
    abi, root = landlock_abi(), _LINUX and os.geteuid() == 0
    out: dict[str, str] = {}
    if disabled():
        out["isolation"] = f"missing: turned off ({SWITCH}=off)"
    out["no new privileges"] = "prctl(PR_SET_NO_NEW_PRIVS)" if _LINUX else "missing: not Linux"
    out["capabilities"] = ("dropped (bounding set, securebits, capset): a root worker has none" if root else
                           "not root: the worker runs as this user, without capabilities")
    out["filesystem"] = (f"landlock abi {abi}: read-only outside the worker's private directory" if abi else
                         "missing: no Landlock in this kernel: the worker can write wherever this user can")
    out["signals"] = ("landlock: signals and abstract unix sockets scoped to the worker" if abi >= 6 else
                      "seccomp: signals only to the worker itself" if seccomp_supported() else
                      "missing: neither Landlock >= 6 nor seccomp: the worker can signal this user's processes")
    out["ptrace"] = ("seccomp: no ptrace, process_vm_readv/writev, pidfd_getfd; judge not dumpable"
                     if seccomp_supported() else "missing: no seccomp" + ("; judge not dumpable" if _LINUX else ""))
    out["scheduling"] = ("seccomp: priority, scheduler, affinity and resource limits only of the worker itself, "
                         "no affinity change after the build" if seccomp_supported()
                         else "missing: no seccomp: the worker can demote this user's processes")
    out["no new processes after build"] = ("seccomp filter on every thread, verified from /proc"
                                           if seccomp_supported() else "missing: no seccomp")
    out["signal handlers"] = ("candidate code runs off the main thread, the only one where Python runs handlers"
                              + ("; no handler changes after build (seccomp)" if seccomp_supported() else
                                 " (no seccomp: handler changes after build not refused)"))
    out["descendants"] = ("session kept (setsid refused), subreaper; killed with the worker" if seccomp_supported()
                          else "process group and parent links only (a setsid daemon may escape)" if _LINUX else
                          "missing: not Linux")
    out["shared memory"] = ("memfd sealed against shrinking, passed as a file descriptor" if sealed_memory() else
                            "missing: no memfd sealing: a worker could truncate a shared region")
    return out


# ------------------------------------------------------------------ judge side
_JUDGE: tuple[str, ...] | None = None


def confines_files() -> bool:
    """Whether workers can write only beneath their own directories here (Landlock available and
    isolation on): then a directory no candidate's worker is given cannot be written by one."""
    return bool(_LINUX and not disabled() and landlock_abi() > 0)


def judge_setup() -> tuple[str, ...]:
    """Once per judge process: not dumpable, child subreaper. Returns what took effect."""
    global _JUDGE
    if _JUDGE is None:
        got = []
        if _LIBC is not None:
            if _prctl(PR_SET_DUMPABLE, 0) == 0:
                got.append("judge not dumpable")
            if _prctl(PR_SET_CHILD_SUBREAPER, 1) == 0:
                got.append("descendants killed (subreaper)")
        _JUDGE = tuple(got)
    return _JUDGE


def worker_setup() -> None:
    """In the worker before any candidate code: not dumpable either, so a candidate in another worker (same
    uid, no capabilities) cannot open this one's /proc/<pid>/mem even without Landlock."""
    if _LIBC is not None:
        _prctl(PR_SET_DUMPABLE, 0)


# ------------------------------------------------------------------ seccomp programs
def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _ret(k: int) -> bytes:
    return _ins(_RET_K, 0, 0, k)


def _err(e: int) -> int:
    return 0x00050000 | e


_LD_NR, _LD_ARCH, _LD_ARG0 = _ins(_LD_W_ABS, 0, 0, 0), _ins(_LD_W_ABS, 0, 0, 4), _ins(_LD_W_ABS, 0, 0, 16)
_LD_ARG1, _LD_ARG1_HI = _ins(_LD_W_ABS, 0, 0, 24), _ins(_LD_W_ABS, 0, 0, 28)      # little-endian halves


def _block(nr: int, rest: list[bytes]) -> list[bytes]:
    """If the syscall is `nr`, run `rest` (which ends in a return); else skip it."""
    return [_LD_NR, _ins(_JEQ_K, 0, len(rest), nr)] + rest


def _arg0_in(values: list[int]) -> list[bytes]:
    """Allow when the low 32 bits of the first argument are one of `values` (pid_t is 32 bits), else EPERM.
    Returns the instructions and, for patching in the child, the index of each value's instruction."""
    n = len(values)
    return ([_LD_ARG0] + [_ins(_JEQ_K, n - j, 0, v) for j, v in enumerate(values)]
            + [_ret(_err(errno.EPERM)), _ret(_RET_ALLOW)])


def _self_only(first: int) -> list[bytes]:
    """setpriority/ioprio_set(which, who, ...): allow only `which` == `first` (a single process) and who in
    {0, the worker's pid}, else EPERM."""
    return [_LD_ARG0, _ins(_JEQ_K, 0, 3, first), _LD_ARG1, _ins(_JEQ_K, 2, 0, 0), _ins(_JEQ_K, 1, 0, _PID_MARK),
            _ret(_err(errno.EPERM)), _ret(_RET_ALLOW)]


def _prologue() -> list[bytes]:
    out = [_LD_ARCH, _ins(_JEQ_K, 1, 0, _NR["audit"]), _ret(_err(errno.EPERM))]
    if _NR.get("x32"):
        out += [_LD_NR, _ins(_JGE_K, 0, 1, 0x40000000), _ret(_err(errno.EPERM))]
    return out


_PID_MARK = 0x7FFFFFF0      # placeholder for the worker's pid, patched in the child
_NEG_PID_MARK = 0x7FFFFFF1  # placeholder for -pid (kill of its own process group)


def _base_program(signals: bool) -> bytes:
    """Always: no ptrace, process_vm_*, pidfd_getfd, process_madvise, setsid; scheduling, priorities and
    resource limits only of the worker itself (pid 0 or its own; its other threads' tids are refused too, a
    price nothing in torch pays by default). With `signals`: kill and friends only to the worker's own pid
    (0, pid, -pid for kill), pidfd_send_signal refused."""
    prog = _prologue()
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "setsid"):
        prog += _block(_NR[name], [_ret(_err(errno.EPERM))])
    for name in ("sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr", "prlimit64"):
        prog += _block(_NR[name], _arg0_in([0, _PID_MARK]))
    prog += _block(_NR["setpriority"], _self_only(0))       # PRIO_PROCESS
    prog += _block(_NR["ioprio_set"], _self_only(1))        # IOPRIO_WHO_PROCESS
    if signals:
        prog += _block(_NR["kill"], _arg0_in([0, _PID_MARK, _NEG_PID_MARK]))
        for name in ("tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
            prog += _block(_NR[name], _arg0_in([_PID_MARK]))
        prog += _block(_NR["pidfd_send_signal"], [_ret(_err(errno.EPERM))])
    prog.append(_ret(_RET_ALLOW))
    return b"".join(prog)


def _lockdown_program() -> bytes:
    """No fork, vfork, clone without CLONE_THREAD (EPERM), no new thread (clone with CLONE_THREAD: EAGAIN), clone3
    (ENOSYS: glibc falls back to clone), execve/execveat (EPERM), no affinity change (EPERM); no rt_sigaction that
    sets an action (EPERM; a query, act == NULL, is allowed): no signal handler changes from here on, Python's
    (`signal.signal` calls sigaction before it records the handler, so a refused call records none) or native
    code's."""
    prog = _prologue()
    for name in ("fork", "vfork", "execve", "execveat"):
        if name in _NR:
            prog += _block(_NR[name], [_ret(_err(errno.EPERM))])
    prog += _block(_NR["clone3"], [_ret(_err(errno.ENOSYS))])
    # no affinity change either, its own included: the judge puts each timed worker on one CPU a round, every row
    # of that round on the same one (gate/measure.py), and a worker that moved itself would pick a faster CPU
    prog += _block(_NR["sched_setaffinity"], [_ret(_err(errno.EPERM))])
    # no thread either (EAGAIN, what a thread limit gives): the judge has seen that none of the candidate's is
    # left at the lockdown, so nothing of the candidate's runs beside the harness from here on
    prog += _block(_NR["clone"], [_LD_ARG0, _ins(_JSET_K, 1, 0, CLONE_THREAD), _ret(_err(errno.EPERM)),
                                  _ret(_err(errno.EAGAIN))])
    # act (the second argument, a 64-bit pointer) non-NULL in either half: refused
    prog += _block(_NR["rt_sigaction"], [_LD_ARG1, _ins(_JEQ_K, 0, 2, 0), _LD_ARG1_HI, _ins(_JEQ_K, 1, 0, 0),
                                         _ret(_err(errno.EPERM)), _ret(_RET_ALLOW)])
    prog.append(_ret(_RET_ALLOW))
    return b"".join(prog)


def _fprog(code: bytes) -> tuple[_FProg, ctypes.Array]:
    buf = ctypes.create_string_buffer(code, len(code))
    return _FProg(len(code) // 8, ctypes.addressof(buf)), buf


def lockdown_self() -> None:
    """Worker side, after the build: no new processes and no signal handler changes from here on, on every
    thread (TSYNC).
    Raises OSError where the filter cannot be installed."""
    if not seccomp_supported():
        raise OSError(errno.ENOSYS, "seccomp filters are not available here")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    prog, keep = _fprog(_lockdown_program())
    r = _syscall(_NR["seccomp"], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog))
    del keep
    if r > 0:
        raise OSError(errno.EAGAIN, f"seccomp: thread {r} could not be synchronized")
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"seccomp: {os.strerror(e)}")


# ------------------------------------------------------------------ the child, between fork and exec
class Confinement:
    """Prepared in the judge (files opened, programs assembled, structures allocated); `apply` runs in the
    forked child before exec and only makes system calls; `report` reads what it achieved afterwards."""

    def __init__(self, workdir: Path, writable: tuple[Path, ...] = ()):
        self.enabled = _LINUX and not disabled()
        self.abi = landlock_abi() if self.enabled else 0
        self.seccomp = self.enabled and seccomp_supported()
        self.root = _LINUX and os.geteuid() == 0
        self.fds: list[int] = []
        self._mm = mmap.mmap(-1, 4096) if self.enabled else None      # shared with the child: its report
        if not self.enabled:
            return
        # capabilities
        try:
            self.last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        except (OSError, ValueError):
            self.last_cap = 63
        self.cap_header = _CapHeader(0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3
        self.cap_data = (_CapData * 2)()
        # Landlock: the ruleset and its rules, with the paths opened here (O_PATH, close-on-exec)
        self.rules: list[ctypes.Array] = []
        if self.abi:
            handled = sum(v for k, v in _FS.items() if k not in ("refer", "truncate"))
            handled |= (_FS["refer"] if self.abi >= 2 else 0) | (_FS["truncate"] if self.abi >= 3 else 0)
            self.scoped = (_SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX) if self.abi >= 6 else 0
            size = 24 if self.abi >= 6 else 16 if self.abi >= 4 else 8
            self.ruleset_attr = ctypes.create_string_buffer(struct.pack("=QQQ", handled, 0, self.scoped)[:size], size)
            file_rights = _FS["write_file"] | (_FS["truncate"] if self.abi >= 3 else 0)
            paths = [(str(workdir), handled)] + [(str(w), handled) for w in writable]
            dev = Path("/dev")
            paths += [(str(dev / n), file_rights) for n in _DEVICES]
            try:
                paths += [(str(p), file_rights) for p in sorted(dev.glob("nvidia*")) if not p.is_dir()]
            except OSError:
                pass
            paths += [(str(dev / n), file_rights) for n in _DEVICE_DIRS]
            for path, access in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                self.fds.append(fd)
                self.rules.append(ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12))
            self.workdir_ok = bool(self.fds) and paths[0][0] == str(workdir) and os.path.isdir(workdir)
            # The worker's own /proc/<pid>/task: threads are named through task/<tid>/comm (the CUDA driver
            # fails to initialise without it). Opened in the child, on a descriptor number reserved here that
            # survives exec (`pass_fds`): it keeps that directory's dentry, hence the inode the rule names.
            self.task_fd = os.open(os.devnull, os.O_RDONLY)
            self.fds.append(self.task_fd)
            self.rules.append(ctypes.create_string_buffer(struct.pack("=Qi", file_rights, self.task_fd), 12))
        # seccomp: the base program, with the pid placeholders patched in the child
        if self.seccomp:
            self.signal_filter = self.abi < 6
            code = _base_program(self.signal_filter)
            self.filter_buf = ctypes.create_string_buffer(code, len(code))
            self.pid_slots = [i for i in range(0, len(code), 8) if struct.unpack_from("=I", code, i + 4)[0]
                              in (_PID_MARK, _NEG_PID_MARK) and code[i:i + 2] == struct.pack("=H", _JEQ_K)]
            self.fprog = _FProg(len(code) // 8, ctypes.addressof(self.filter_buf))

    def apply(self) -> None:
        """In the child (preexec_fn). Never raises: each step that fails is left out of the report."""
        if not self.enabled:
            return
        done: list[str] = []
        try:
            if _prctl(PR_SET_NO_NEW_PRIVS, 1) == 0:
                done.append("nnp")
            if self.root:
                if _prctl(PR_SET_SECUREBITS, SECBITS_ALL) != 0:
                    _prctl(PR_SET_SECUREBITS, SECBITS_OLD)
                for cap in range(self.last_cap + 1):
                    _prctl(PR_CAPBSET_DROP, cap)
                _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
                if _LIBC.capset(ctypes.byref(self.cap_header), self.cap_data) == 0:
                    done.append("caps")
            if self.abi and self.workdir_ok:
                try:
                    task = os.open("/proc/self/task", os.O_PATH | os.O_DIRECTORY)
                    os.dup2(task, self.task_fd)
                    os.close(task)
                except OSError:
                    pass
                fd = _syscall(_NR["landlock_create_ruleset"], self.ruleset_attr, len(self.ruleset_attr), 0)
                if fd >= 0:
                    ok = _syscall(_NR["landlock_add_rule"], fd, _RULE_PATH_BENEATH, self.rules[0], 0) == 0
                    for rule in self.rules[1:]:
                        _syscall(_NR["landlock_add_rule"], fd, _RULE_PATH_BENEATH, rule, 0)
                    if ok and _syscall(_NR["landlock_restrict_self"], fd, 0) == 0:
                        done.append(f"landlock={self.abi}")
                        if self.scoped:
                            done.append("scoped")
                    os.close(fd)
            if self.seccomp:
                pid = os.getpid()
                for slot in self.pid_slots:
                    mark = struct.unpack_from("=I", self.filter_buf, slot + 4)[0]
                    struct.pack_into("=I", self.filter_buf, slot + 4, pid if mark == _PID_MARK else (-pid) & 0xFFFFFFFF)
                if _syscall(_NR["seccomp"], SECCOMP_SET_MODE_FILTER, 0, ctypes.byref(self.fprog)) == 0:
                    done.append("seccomp")
                    if self.signal_filter:
                        done.append("signals")
        except Exception:  # noqa: BLE001 - a failed step leaves the worker less confined, never unstarted
            pass
        assert self._mm is not None
        self._mm[:len(";".join(done))] = ";".join(done).encode()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """Descriptors the child must keep across exec (add to Popen's pass_fds)."""
        return (self.task_fd,) if getattr(self, "task_fd", None) is not None else ()

    def report(self) -> set[str]:
        """What `apply` achieved in the child (read after exec)."""
        if self._mm is None:
            return set()
        raw = self._mm[:].split(b"\0", 1)[0].decode(errors="replace")
        return {s for s in raw.split(";") if s}

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        if self._mm is not None:
            self._mm.close()
            self._mm = None


# ------------------------------------------------------------------ reading a process from outside
def proc_status(pid: int, tid: int | None = None) -> dict[str, str]:
    """/proc/<pid>/status (or a thread's) as a dict; empty where unreadable."""
    path = f"/proc/{pid}/task/{tid}/status" if tid else f"/proc/{pid}/status"
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def thread_ids(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def thread_stamps(pid: int) -> dict[int, int]:
    """The process's threads, each with its start time (clock ticks since boot, /proc/<pid>/task/<tid>/stat field
    22): a thread is the same one only if both match (a thread id can come back after the id space wraps)."""
    out = {}
    for tid in thread_ids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                rest = f.read().rpartition(b")")[2].split()
            out[tid] = int(rest[19])          # field 22 (fields 3.. follow the command name's parenthesis)
        except (OSError, IndexError, ValueError):
            pass
    return out


def thread_names(pid: int) -> dict[int, str]:
    """The process's threads and their names (/proc/<pid>/task/<tid>/comm), for messages."""
    out = {}
    for tid in thread_ids(pid):
        try:
            out[tid] = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            pass
    return out


def seccomp_filters(pid: int) -> list[int]:
    """Seccomp filter count of each thread of `pid` (-1 for a thread that is not in filter mode)."""
    out = []
    for tid in thread_ids(pid):
        st = proc_status(pid, tid)
        if not st:
            continue                    # the thread ended meanwhile
        mode = st.get("Seccomp", "0")
        out.append(int(st.get("Seccomp_filters", "1" if mode == "2" else "0")) if mode == "2" else -1)
    return out


def verify_start(pid: int, report: set[str]) -> tuple[str, ...]:
    """The protections a just-started worker has: what the child reported, confirmed from /proc/<pid>/status
    where the kernel shows it. Entries for what is missing start with 'missing:'."""
    if not _LINUX:
        return ("missing: not Linux: the worker runs unconfined (a process of its own only)",)
    if disabled():
        return (f"missing: isolation turned off ({SWITCH}=off)",) + judge_setup()
    st = proc_status(pid)
    out: list[str] = []
    if st.get("NoNewPrivs", "1") == "1" and "nnp" in report:
        out.append("no new privileges")
    else:
        out.append("missing: no_new_privs")
    caps = [int(st.get(k, "f"), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")] if st else [1]
    if st and not any(caps):
        if os.geteuid() == 0 and int(st.get("CapBnd", "1"), 16) == 0 and "caps" in report:
            out.append("capabilities dropped")
        elif os.geteuid() != 0:
            out.append("no capabilities (not root)")
        else:
            out.append("missing: capability bounding set not empty")
    else:
        out.append("missing: capabilities not dropped")
    abi = next((int(s.split("=")[1]) for s in report if s.startswith("landlock=")), 0)
    if abi:
        out.append(f"landlock abi {abi}: read-only filesystem outside a private dir")
        if "scoped" in report:
            out.append("landlock: signals scoped")
    else:
        out.append("missing: landlock: files outside the private dir are writable"
                   + ("" if landlock_abi() else " (not in this kernel)"))
    if "seccomp" in report and st.get("Seccomp", "2") == "2":
        out.append("seccomp: no ptrace / process_vm / setsid"
                   + ("" if "Seccomp" in st else " (unverified: this kernel's /proc shows no seccomp state)"))
        if "signals" in report:
            out.append("seccomp: signals only to itself")
    else:
        out.append("missing: seccomp" + ("" if seccomp_supported() else " (not available)"))
    if "scoped" not in report and "signals" not in report:
        out.append("missing: signals: the worker can signal this user's processes")
    return tuple(out) + judge_setup()
