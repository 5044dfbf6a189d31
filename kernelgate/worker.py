"""The candidate's process: builds one model, runs calls and timed loops on request, reports what it saw.

Everything the verdict depends on (reference outputs, the comparison, the seed) stays in the judge.
What this process reports (flags, timers, threads, aliasing) is also cross-checked from outside where possible.
Run as `python -m kernelgate.worker FD`.
"""
from __future__ import annotations

# Clocks are captured by gate/timing.py, imported before any candidate code.
import os  # noqa: E402
import time as _time  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import weakref  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from . import wire  # noqa: E402
from .gate import timing  # noqa: E402
from .workload import CANDIDATE_CLASS, import_file  # noqa: E402
from .errors import KernelgateError  # noqa: E402

_CUDA_SYNC = torch.cuda.synchronize


def numerics_flags() -> dict[str, Any]:
    """Global settings that change numerical results."""
    return {
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
        "default_dtype": str(torch.get_default_dtype()),
        "num_threads": torch.get_num_threads(),
    }


_THREAD_ORIGIN: "weakref.WeakKeyDictionary[threading.Thread, str]" = weakref.WeakKeyDictionary()
_THREAD_START = threading.Thread.start
_PLUMBING = ("threading", "concurrent.futures", "kernelgate.worker")


def _creator() -> str:
    """Module of the first frame outside threading plumbing that started a thread."""
    f = sys._getframe(2)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if not mod.startswith(_PLUMBING):
            return mod
        f = f.f_back
    return ""


def _tracked_start(self: threading.Thread) -> None:
    _THREAD_ORIGIN[self] = _creator()
    _THREAD_START(self)


threading.Thread.start = _tracked_start


def _torch_owned(t: threading.Thread) -> bool:
    origin = _THREAD_ORIGIN.get(t, "")
    return origin.startswith(("torch.", "triton.")) or origin in ("torch", "triton")


def candidate_threads() -> int:
    """Live Python threads, not counting those started from torch's or triton's own code
    (torch.compile's compile and autotuning pools)."""
    return sum(1 for t in threading.enumerate() if not _torch_owned(t))


def torch_threads() -> int:
    """Live Python threads started from torch's or triton's own code."""
    return sum(1 for t in threading.enumerate() if _torch_owned(t))


def timer_ids() -> dict[str, int]:
    """Identity of every clock and timing function a harness could rely on."""
    import statistics
    objs = {
        "time.perf_counter": _time.perf_counter, "time.perf_counter_ns": _time.perf_counter_ns,
        "time.time": _time.time, "time.monotonic": _time.monotonic, "time.monotonic_ns": _time.monotonic_ns,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "statistics.median": statistics.median, "threading.Thread.start": threading.Thread.start,
        "kernelgate.timing.perf_counter_ns": timing._perf_ns, "kernelgate.timing.monotonic": timing._monotonic,
        "kernelgate.timing.synchronize": timing._CUDA_SYNC, "kernelgate.timing.Event": timing._EVENT,
        "kernelgate.timing.timed_loop": timing.timed_loop, "kernelgate.timing.warm_up": timing.warm_up,
    }
    return {k: id(v) for k, v in objs.items()}


class Harness:
    def __init__(self, conn: Connection):
        self.conn = conn
        self.model: torch.nn.Module | None = None
        self.device = "cpu"
        self.flags0 = numerics_flags()
        self.timers0 = timer_ids()
        self.threads0 = candidate_threads()
        self.ref_path = ""
        self.reservoir: list[tuple[int, list[torch.Tensor]]] = []
        self.pool: list[list[Any]] = []
        self.scalable: list[bool] = []
        self.rms: list[list[float]] = []
        self.seen = 0
        self.rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    # ------------------------------------------------------------ environment checks
    def observations(self) -> dict[str, Any]:
        flags = numerics_flags()
        timers = timer_ids()
        mods = []
        if self.ref_path:
            base = os.path.basename(self.ref_path)
            for m in list(sys.modules.values()):
                f = getattr(m, "__file__", None)
                if isinstance(f, str) and os.path.basename(f) == base and os.path.realpath(f) == self.ref_path:
                    mods.append(m.__name__)
        return {
            "flags_changed": {k: [self.flags0[k], v] for k, v in flags.items() if self.flags0[k] != v},
            "timers_changed": sorted(k for k, v in timers.items() if self.timers0.get(k) != v),
            "py_threads": [self.threads0, candidate_threads()],
            "torch_threads": torch_threads(),
            "loaded_reference": mods,
        }

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            _CUDA_SYNC()

    # ------------------------------------------------------------ ops
    def op_hello(self, msg: dict) -> dict:
        return {"pid": os.getpid(), "torch": str(torch.__version__)}

    def op_build(self, msg: dict) -> dict:
        self.device = msg["device"]
        if self.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(self.device).index or 0)
            torch.empty(1, device=self.device)
            self.sync()
        self.ref_path = msg.get("ref_path", "")
        self.flags0 = numerics_flags()
        self.timers0 = timer_ids()
        self.threads0 = candidate_threads()
        try:
            module = import_file(msg["path"], name="kernelgate_candidate")
        except KernelgateError as e:
            return {"error": "build_error", "message": str(e)}
        cls_name = msg.get("cls") or CANDIDATE_CLASS
        cls = getattr(module, cls_name, None)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            return {"error": "build_error", "message": f"{Path(msg['path']).name} defines no nn.Module class '{cls_name}'"}
        torch.manual_seed(msg.get("seed", 0))
        try:
            model = cls(*msg.get("init_inputs", []))
        except Exception as e:  # noqa: BLE001
            return {"error": "build_error", "message": f"constructing {cls_name} failed: {type(e).__name__}: {e}"}
        try:
            model.load_state_dict(msg["state"], strict=True)
        except Exception as e:  # noqa: BLE001
            return {"error": "build_error", "message": f"load_state_dict(strict=True) failed: {_first_line(e)}"}
        model = model.eval().to(self.device)
        if msg.get("compile"):
            model = torch.compile(model, **msg.get("compile_options", {}))
        self.model = model
        return {"ok": True, "observations": self.observations()}

    def op_load(self, msg: dict) -> dict:
        assert self.model is not None
        target = getattr(self.model, "_orig_mod", self.model)
        try:
            target.load_state_dict({k: v.to(self.device) for k, v in msg["state"].items()}, strict=True)
        except Exception as e:  # noqa: BLE001
            return {"error": "build_error", "message": f"load_state_dict(strict=True) failed: {_first_line(e)}"}
        return {"ok": True}

    def poison(self, nbytes: int) -> None:
        """Hand the allocator NaN-filled blocks so an unwritten output cannot hold a plausible value."""
        n = max(nbytes // 4, 1 << 16)
        for _ in range(2):
            t = torch.full((n,), float("nan"), device=self.device)
            del t
        self.sync()

    def op_call(self, msg: dict) -> dict:
        assert self.model is not None
        xs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in msg["inputs"]]
        self.poison(msg.get("poison_bytes", 0))
        in_ptrs = _storages(xs)
        with torch.no_grad():
            out = self.model(*xs)
        self.sync()
        desc = describe_output(out, in_ptrs, self.device)
        if "error" in desc:
            return desc
        return {"ok": True, "output": desc, "observations": self.observations(),
                "inputs_after": [x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in xs]}

    def op_pool(self, msg: dict) -> dict:
        """Store the input pool on the device once; timed loops draw from it."""
        self.pool = [[x.to(self.device) if isinstance(x, torch.Tensor) else x for x in xs] for xs in msg["pool"]]
        self.scalable = msg["scalable"]
        self.rms = [timing.rms(xs, self.scalable) for xs in self.pool]
        self.reservoir, self.seen = [], 0          # outputs of earlier loops belong to earlier plans
        return {"ok": True}

    def _make(self, j: int, s: float, seed: int) -> list[Any]:
        return timing.fresh(self.pool[j], s, seed, self.scalable, self.rms[j], self.device)

    def op_warmup(self, msg: dict) -> dict:
        n = timing.warm_up(self.model, self._make, msg["plan"], self.device, msg["warmup_ms"], msg["warmup_min"])
        return {"ok": True, "calls": n, "observations": self.observations()}

    def op_time(self, msg: dict) -> dict:
        """One timed batch (gate/timing.py); outputs are reservoir-sampled for re-checking."""
        assert self.model is not None
        keep_bytes = msg.get("keep_bytes", 256 << 20)
        samples = timing.timed_loop(self.model, self._make, msg["plan"], self.device, msg.get("flush_bytes", 0),
                                    lambda tag, out: self.retain(tag, out, keep_bytes), msg["tag"])
        return {"ok": True, "samples_ms": samples, "observations": self.observations()}

    def retain(self, tag: int, out: Any, keep_bytes: int) -> None:
        """Reservoir-sample outputs of the timed loop for re-checking; which ones is not predictable."""
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        outs = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs]
        size = sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))
        capacity = max(1, min(64, keep_bytes // max(size, 1)))
        self.seen += 1
        if len(self.reservoir) < capacity:
            self.reservoir.append((tag, outs))
        else:
            k = self.rng.randrange(self.seen)
            if k < capacity:
                self.reservoir[k] = (tag, outs)

    def op_fetch(self, msg: dict) -> dict:
        """Return up to `count` retained timed-loop outputs, chosen at random, with their iteration tags."""
        chosen = self.rng.sample(self.reservoir, min(msg["count"], len(self.reservoir)))
        return {"ok": True, "outputs": [[tag, [o.cpu() if isinstance(o, torch.Tensor) else o for o in outs]]
                                        for tag, outs in chosen]}

    def serve(self) -> None:
        while True:
            try:
                msg = wire.decode(self.conn.recv_bytes())
            except EOFError:
                return
            op = msg.get("op")
            if op == "exit":
                return
            try:
                reply = getattr(self, f"op_{op}")(msg)
            except SystemExit as e:
                reply = {"error": "exit", "message": f"candidate called sys.exit({e.code})"}
            except torch.cuda.OutOfMemoryError as e:
                reply = {"error": "crash", "message": f"out of memory: {_first_line(e)}"}
            except Exception as e:  # noqa: BLE001 - every failure becomes a reply
                reply = {"error": "crash", "message": f"{type(e).__name__}: {_first_line(e)}",
                         "traceback": traceback.format_exc()[-4000:]}
            self.conn.send_bytes(wire.encode(reply))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:500] if text else type(e).__name__


def _storages(xs: list[Any]) -> set[int]:
    return {x.untyped_storage().data_ptr() for x in xs if isinstance(x, torch.Tensor) and x.numel() > 0}


def describe_output(out: Any, in_ptrs: set[int], device: str) -> dict:
    """Check the output's kind, then ship plain copies plus metadata the judge compares."""
    single = not isinstance(out, (tuple, list))
    outs = [out] if single else list(out)
    meta, tensors = [], []
    for k, o in enumerate(outs):
        if type(o) is not torch.Tensor:
            kind = type(o).__name__ if not isinstance(o, torch.Tensor) else f"tensor subclass {type(o).__name__}"
            return {"error": "output_type", "message": f"output {k} is {kind}, expected a plain torch.Tensor"}
        if o.layout != torch.strided or o.is_meta:
            return {"error": "output_type", "message": f"output {k} has layout {o.layout}; expected strided with storage"}
        aliased = o.numel() > 0 and o.untyped_storage().data_ptr() in in_ptrs
        meta.append({"dtype": str(o.dtype), "shape": list(o.shape), "stride": list(o.stride()),
                     "device": str(o.device), "aliased": aliased})
        tensors.append(o.detach().to("cpu", copy=True))
    return {"single": single, "meta": meta, "tensors": tensors}


def main() -> None:
    fd = int(sys.argv[1])
    conn = Connection(fd)
    Harness(conn).serve()
    conn.close()
    # no interpreter teardown: candidate atexit hooks and thread joins cannot delay the judge
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
