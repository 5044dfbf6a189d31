"""The reference, run only in the judge: fp64 oracle outputs, task-dtype outputs, permitted-precision outputs.

Which lower-precision runs are permitted decides the tolerance (see gate/correctness.py):
- the task dtype itself (the reference as users run it);
- on CUDA, convolutions with TF32 operands when `torch.backends.cudnn.allow_tf32` is on (PyTorch's default):
  the reference's configuration lets cuDNN pick a TF32 algorithm, so whether its own error is 1e-7 or 1e-3
  depends on algorithm selection, not on the user's intent. We emulate the permitted TF32 rounding so the
  tolerance does not depend on that luck;
- whatever the contract declares: tf32 (matmul/conv operands rounded to TF32), bf16 or fp16 (the whole
  reference run in that dtype).
"""
from __future__ import annotations

import contextlib
import copy
import secrets
import threading
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from . import hostmem
from .errors import KernelgateError
from .records import Contract, Reason
from .sandbox.sensors import describe_output, rng_state
from .languages import kernel_languages
from .moves import (SEPARABLE_DRAWS, batch_axis, batch_moved, one_ulp, one_ulp_fp64, problems, to_fp64, upcast,
                    widened)
from .structure import structured
from .workload import Reference

RANDOM_OPS = ("rand", "bernoulli", "normal", "dropout", "multinomial", "exponential", "geometric", "cauchy",
              "log_normal", "uniform", "poisson")
MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention", "convolution",
              "_convolution", "cudnn_convolution")
CONV_OPS = ("convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose")


def as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def round_tf32(t: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to TF32 (10 explicit mantissa bits), nearest-even; non-finite values kept."""
    if t.dtype != torch.float32:
        return t
    i = t.contiguous().view(torch.int32).to(torch.int64)
    bias = ((i >> 13) & 1) + 0xFFF
    r = ((i + bias) & ~0x1FFF)
    r = torch.where(r > 0x7FFFFFFF, r - (1 << 32), r).to(torch.int32).view(torch.float32).view(t.shape)
    return torch.where(torch.isfinite(t), r, t)


class _RoundOperands(TorchDispatchMode):
    """Round the fp32 operands of the listed ops to TF32, as tensor cores do."""

    def __init__(self, ops: tuple[str, ...]):
        super().__init__()
        self.ops = set(ops)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in self.ops:
            args = tree_map(lambda a: round_tf32(a) if isinstance(a, torch.Tensor) else a, args)
        return func(*args, **(kwargs or {}))


#: ops that sum (or average, normalize, soft-max) over many terms: their reduction length widens the tolerance
#: (gate/correctness.order_term); the length is the input's elements per output element unless told below
REDUCING_OPS = ("sum", "mean", "nansum", "nanmean", "var", "std", "var_mean", "std_mean", "norm", "linalg_vector_norm",
                "logsumexp", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss",
                "multilabel_margin_loss", "cosine_similarity", "trace", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                "adaptive_avg_pool1d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d")
ALONG_DIM_OPS = ("_softmax", "_log_softmax", "cumsum", "logcumsumexp")      # (input, dim, ...)

#: ops that round floats onto an integer grid: an output with one on its way is judged in grid steps
QUANTIZING_OPS = ("round", "quantize_per_tensor", "quantize_per_channel", "fake_quantize_per_tensor_affine",
                  "fake_quantize_per_channel_affine")
#: the ops whose outputs keep a rounding mark: values on the grid moved, selected, reshaped, clamped, shifted or
#: scaled (a zero point, a scale, a dequantization, a cast), so one step off in an input is one step off there.
#: Anything else (an argmax, a comparison, a remainder, a floor_divide, a bit operation, a hash: a class or a
#: position computed from rounded values, where one step off is the wrong answer) ends the mark: an allow-list,
#: since a deny-list missed `remainder` (red team 23: 161 of 163840 hash buckets wrong, accepted)
GRID_KEEPING_OPS = (
    "_to_copy", "to", "copy", "copy_", "clone", "contiguous", "alias", "detach", "lift_fresh", "lift_fresh_copy",
    "view", "_unsafe_view", "reshape", "expand", "expand_as", "permute", "transpose", "t", "squeeze", "unsqueeze",
    "flatten", "unflatten", "slice", "select", "narrow", "split", "split_with_sizes", "chunk", "unbind", "cat",
    "stack", "as_strided", "index", "gather", "index_select", "take", "repeat", "flip", "roll",
    "clamp", "clamp_min", "clamp_max", "hardtanh", "relu", "add", "sub", "rsub", "neg", "mul", "div", "sum",
    "int_repr", "dequantize", "_make_per_tensor_quantized_tensor", "_make_per_channel_quantized_tensor",
    "amax", "amin", "maximum", "minimum")
#: ops continuous in their float arguments (an allow-list): where a reference has only these, runs on inputs moved
#: one ulp are more draws of its own error (gate/session.py `ill`); a rounding, comparison, sign bit, cast to
#: integers (`_RecordOps.stepped`) moves outputs by whole steps (red team 30's `special_values_wrong` passed beside)
CONTINUOUS_OPS = frozenset((
    "_to_copy", "to", "copy", "copy_", "clone", "contiguous", "alias", "detach", "lift_fresh", "lift_fresh_copy",
    "view", "_unsafe_view", "reshape", "expand", "expand_as", "permute", "transpose", "t", "squeeze", "unsqueeze",
    "flatten", "unflatten", "slice", "select", "narrow", "split", "split_with_sizes", "chunk", "unbind", "cat",
    "stack", "as_strided", "diagonal", "diag", "diag_embed", "repeat", "flip", "roll", "index_select", "gather",
    "index", "take", "embedding", "constant_pad_nd", "triu", "tril", "where", "masked_fill", "zeros_like",
    "ones_like", "empty_like", "full_like", "zeros", "ones", "empty", "full", "new_zeros", "new_ones", "new_empty",
    "new_full", "scalar_tensor", "fill", "fill_", "zero_", "eye", "arange", "_linalg_check_errors",
    "add", "sub", "rsub", "mul", "div", "neg", "abs", "addcmul", "addcdiv", "lerp", "reciprocal", "pow", "square",
    "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
    "sigmoid", "erf", "erfc", "atan", "atan2", "hypot", "relu", "leaky_relu", "elu", "gelu", "silu", "softplus",
    "mish", "hardtanh", "hardsigmoid", "hardswish", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "amax",
    "amin", "logsumexp", "_softmax", "_log_softmax", "sum", "mean", "var", "std", "var_mean", "std_mean", "norm",
    "linalg_vector_norm", "cumsum", "mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "dot", "mv", "linear",
    "convolution", "_convolution", "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "native_group_norm", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "upsample_bilinear2d",
    "upsample_linear1d", "_linalg_solve_ex", "linalg_solve_ex", "linalg_lu_factor_ex", "linalg_lu_solve",
    "linalg_inv_ex", "linalg_cholesky_ex", "cholesky_solve", "linalg_solve_triangular", "triangular_solve",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention", "mse_loss", "l1_loss",
    "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "cosine_similarity", "trace"))
#: factorizations and solves whose integer outputs (pivots, an error code) are bookkeeping, not values
FACTORING_OPS = ("_linalg_solve_ex", "linalg_solve_ex", "linalg_lu_factor_ex", "linalg_inv_ex", "linalg_cholesky_ex")
#: grid-keeping ops that select from their first argument by the others: only the first argument's mark passes
SELECTING_OPS = ("index", "gather", "index_select", "take", "select", "slice", "narrow", "as_strided")
#: ops returning (values, indices, ...): their values keep the mark, the rest do not
VALUES_THEN_INDEX_OPS = ("max", "min", "sort", "topk", "kthvalue", "mode", "median", "nanmedian", "cummax",
                         "cummin", "_unique", "_unique2", "unique_dim", "unique_consecutive")


def keeps_rounding(name: str, n: int) -> bool:
    """Whether output `n` of op `name` stays on the grid of a rounded input (GRID_KEEPING_OPS)."""
    return name in QUANTIZING_OPS or name in GRID_KEEPING_OPS or (name in VALUES_THEN_INDEX_OPS and n == 0)


def reduction_k(name: str, args: tuple, out: Any) -> int:
    """Terms summed per output element by one op call (0 when it sums nothing or cannot be told)."""
    try:
        if name in ("mm", "bmm", "_int_mm", "_scaled_mm", "mv", "dot", "vdot", "addmm", "baddbmm", "addmv", "addbmm",
                    "matmul", "linear"):
            x = args[1] if name.startswith("add") or name == "baddbmm" else args[0]
            return int(x.shape[-1] * (x.shape[0] if name == "addbmm" else 1))
        if name in ("convolution", "_convolution", "cudnn_convolution"):
            w = args[1]
            return int((w.shape[0] // int(args[8]) if len(args) > 8 and args[6] else w.shape[1]) * w[0, 0].numel())
        if name.startswith("_scaled_dot_product"):
            return int(max(args[0].shape[-1], args[1].shape[-2]))
        if name in ALONG_DIM_OPS:
            return int(args[0].shape[args[1]]) if args[0].dim() else 1
        if name == "native_layer_norm":
            return int(torch.Size(args[1]).numel())
        if name == "native_group_norm":                  # (input, weight, bias, N, C, HxW, group, eps)
            return int(args[4] // args[6] * args[5])
        if name in ("nll_loss", "nll_loss2d", "nll_loss_forward", "nll_loss2d_forward"):   # one term per sample
            x = args[0]
            return int(x.numel() // x.shape[1]) if x.dim() > 1 else 1
        if name in ("native_batch_norm", "_native_batch_norm_legit"):     # (input, ..., training, momentum, eps):
            x = args[0]                                                # statistics per channel when training
            return int(x.numel() // x.shape[1]) if len(args) > 5 and args[5] and x.dim() > 1 else 0
        if name in REDUCING_OPS:
            o = out[0] if isinstance(out, (tuple, list)) else out
            return int(args[0].numel() // max(o.numel(), 1))
    except Exception:  # noqa: BLE001 - an unexpected signature: no widening from this op
        return 0
    return 0


class _RecordOps(TorchDispatchMode):
    """The ops a forward runs, and per tensor what is on its way: the longest reduction (an op's own length or
    the longest of its tensor arguments', whichever is longer), and whether a rounding op is (QUANTIZING_OPS).
    Each output is judged by its own: a long loss beside another output must not widen that output's bound,
    and a rounded output beside an argmax must not give the argmax one-step leeway."""

    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()
        self.stepped: set[str] = set()          # ops that gave integers from floats, or divided with a rounding mode
        self.k = WeakTensorKeyDictionary()
        self.rounded = WeakTensorKeyDictionary()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops.add(name)
        out = func(*args, **(kwargs or {}))
        ins = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
        if name == "div" and "mode" in func._overloadname:
            self.stepped.add(name)                           # floor or trunc division: not continuous
        if name not in FACTORING_OPS and any(t.is_floating_point() for t in ins) and any(isinstance(
                t, torch.Tensor) and not (t.is_floating_point() or t.is_complex()) for t in tree_leaves(out)):
            self.stepped.add(name)                           # floats to integers or bools (a cast, indices)
        k = max([reduction_k(name, args, out)] + [self.k.get(t, 0) for t in ins])
        # a selection (index, gather, take, index_select) keeps the mark of the tensor it selects from, not of its
        # index: a table value chosen by a rounded position is not on a grid (red team 24: a lookup table had
        # one-step leeway)
        marked = [a for a in args[:1] if isinstance(a, torch.Tensor)] if name in SELECTING_OPS else ins
        rounded = name in QUANTIZING_OPS or any(self.rounded.get(t, False) for t in marked)
        for n, t in enumerate(tree_leaves(out)):
            if isinstance(t, torch.Tensor):
                self.k[t] = max(k, self.k.get(t, 0))
                if rounded and keeps_rounding(name, n):
                    self.rounded[t] = True
        return out

    def of(self, outs: list[Any]) -> list[int]:
        return [self.k.get(o, 0) if isinstance(o, torch.Tensor) else 0 for o in outs]

    def rounded_of(self, outs: list[Any]) -> list[bool]:
        return [bool(self.rounded.get(o, False)) if isinstance(o, torch.Tensor) else False for o in outs]


def shared_outputs(outs: list[Any]) -> list[bool]:
    """Per output: its storage overlaps an earlier output's (`return y, y`), as the worker describes a candidate's
    outputs (sandbox/sensors.py); a candidate may share memory between outputs only where the reference does
    (gate/checks.py Outputs)."""
    meta = describe_output(tuple(outs), [], "cpu").get("meta") or [{}] * len(outs)
    return [m.get("shares") is not None for m in meta]


@dataclass
class Runs:
    """Outputs of one trial: oracle G (fp64), reference B (task dtype), and permitted variants by name."""

    oracle: list[torch.Tensor]
    task: list[torch.Tensor]
    permitted: dict[str, list[torch.Tensor]]


OPAQUE_K = 1 << 20       # an own-precision reference's reductions: unknown length, taken past the order term's cap


def own_precision(source: str, device: str) -> bool:
    """The reference is a kernel implementation (Triton, CUDA C++, Pallas: languages.py) on a GPU:
    its kernels take their own dtype only (an fp64 run fails, or faults and takes the device context with it),
    so the oracle is the reference's own run and the tolerance its floor (docs/GATE.md, port mode). On the CPU
    such kernels run in interpreters that take fp64, and the oracle stays fp64."""
    return device.startswith("cuda") and bool(kernel_languages(source))


ROUNDING = "inputs' rounding (fp64 on inputs one ulp away)"      # a permitted run's name (Oracle.run, `rounding`)


class Pending:
    """The oracle's runs on one call's inputs in a thread of the judge (`Oracle.run_async`): `result()` joins and
    hands back the runs or raises what they raised; `wait()` joins and keeps any error (a failure elsewhere is
    being raised)."""

    def __init__(self, fn: Any, xs: list[Any], cuda_device: int | None = None):
        self._out: Any = None
        self._err: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, xs, cuda_device), name="kernelgate-oracle",
                                        daemon=True)
        self._thread.start()

    def _run(self, fn: Any, xs: list[Any], cuda_device: int | None) -> None:
        try:
            if cuda_device is not None:         # the current device is per thread: the caller's, as a reference
                torch.cuda.set_device(cuda_device)      # making tensors on "cuda" would have them
            self._out = fn(xs)
        except BaseException as e:  # noqa: BLE001 - handed to the thread that waits
            self._err = e

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._out


class Oracle:
    """Holds the reference model in the task dtype, an fp64 copy, and the permitted lower-precision copies."""

    def __init__(self, ref: Reference, device: str, contract: Contract, compute: str | None = None,
                 shape: Any = None, own: bool = False, lean: bool | None = None):
        """Outputs are returned on `device` (where the judge keeps its data); the runs happen on `compute`
        (default `device`): the lean memory plan keeps data on the host and computes on the task's device,
        giving the allocator's cache back after every run (gate/memory.py). `own`: the reference is a kernel
        implementation that runs only in its own dtype (`own_precision`): the oracle is its task-dtype run. `lean`:
        the lean memory plan (default: computing away from home), which gives the cache back after every run
        wherever it keeps its data."""
        self.ref, self.home, self.contract = ref, device, contract
        self.device = compute or device
        self.own = own
        self.lean = self.home != self.device if lean is None else lean   # the cache goes back after every run
        self.model = structured(ref.build(seed=0), shape).to(self.device)    # called with the leaves
        self.state0 = {k: v.detach().clone() for k, v in self.model.state_dict().items()}   # on the device
        self.at0 = True                           # the models hold state0 (`reset`)
        # the state's parameters, each with whether it requires grad (an optimizer's): a candidate's must match
        self.grads = {k: bool(p.requires_grad) for k, p in self.model.named_parameters(remove_duplicate=False)
                      if k in self.state0}
        # backward hooks on its parameters or submodules (a candidate's may carry them only where these do)
        self.hooked = any(bool(p._backward_hooks) or bool(getattr(p, "_post_accumulate_grad_hooks", None))
                          for p in self.model.parameters()) or any(
            bool(m._backward_hooks) or bool(m._backward_pre_hooks) for m in self.model.modules())
        self.uses_rng = False                     # the forward draws from or reseeds the global generators (probe)
        self.model64 = None if own else copy.deepcopy(self.model)._apply(widened)
        self.ops: set[str] = set()
        self.stepped: set[str] = set()            # ops that moved outputs by whole steps (_RecordOps.stepped)
        self.low: dict[str, torch.nn.Module] = {}       # contract formats: permitted runs
        self.as_dtype: dict[torch.dtype, torch.nn.Module] = {}   # copies for mutants
        for fmt, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            if fmt in contract.precision:
                self.low[fmt] = copy.deepcopy(self.model).to(dt)
        self.single = True
        self.shared: list[bool] = []             # per output: shares memory with an earlier output
        self.conj: list[bool] = []               # per output: a conjugate view (torch.conj of a complex tensor)
        self.reduce_ks: list[int] = []
        self.rounded: list[bool] = []            # per output: a rounding op on its way (judged in grid steps)

    def _call(self, model: torch.nn.Module, xs: list[Any]) -> list[torch.Tensor]:
        with torch.no_grad():
            return [self.homed(o.detach()) if isinstance(o, torch.Tensor) else o for o in as_list(model(*xs))]

    def homed(self, t: torch.Tensor) -> torch.Tensor:
        """`t` where the judge keeps its data; from a GPU to the host through hostmem.to_host (its pages touched
        first: 6.1 GB/s against 1.2 GB/s into untouched pageable memory)."""
        return hostmem.to_host(t) if self.home == "cpu" else t.to(self.home)

    def give_back(self) -> None:
        """In the lean memory plan the device's cached blocks go back after each run (the outputs are home, or
        kept on the device by `on_device` while a worker holds nothing): what the gate holds is what it uses."""
        if self.lean and self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    @contextlib.contextmanager
    def on_device(self):
        """Runs keep their outputs on the compute device for the block (the lean memory plan's task admission and
        judged trials, each run while no worker holds a call's data: gate/memory.py); home again after it, the
        device's cache given back."""
        home = self.home
        self.home = self.device
        try:
            yield self
        finally:
            self.home = home
            self.give_back()

    def probe(self, xs: list[Any]) -> list[torch.Tensor]:
        """First run: record the ops used, check outputs are tensors, detect randomness in forward."""
        dev = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in xs]
        rec = _RecordOps()
        try:
            torch.manual_seed(1)
            with torch.no_grad(), rec:
                raw = self.model(*dev)
            ks, rounded = rec.of(as_list(raw)), rec.rounded_of(as_list(raw))
            self.shared = shared_outputs(as_list(raw))
            self.conj = [isinstance(o, torch.Tensor) and bool(o.is_conj()) for o in as_list(raw)]
            self.single = not isinstance(raw, (tuple, list))
            first = [self.homed(o.detach()) if isinstance(o, torch.Tensor) else o for o in as_list(raw)]
            del raw
            torch.manual_seed(2)
            drawn = rng_state(str(self.device))
            second = self._call(self.model, dev)
            # a forward that draws or reseeds (the same outputs from a seed of its own): a candidate may do so too
            self.uses_rng = rng_state(str(self.device)) != drawn
        except Exception as e:  # noqa: BLE001
            raise KernelgateError(f"the reference's forward failed: {type(e).__name__}: {e}", Reason.TASK_LOAD) from e
        del dev
        self.give_back()
        self.ops, self.stepped = rec.ops, rec.stepped
        if self.own:                         # its reductions run inside kernels no recorder sees: the term at its cap
            ks = [OPAQUE_K] * len(ks)
        self.reduce_ks = ks                  # each output's longest reduction: the tolerance's summation-order term
        self.rounded = rounded               # each output: rounded on its way (its integer values are on a grid)
        for k, o in enumerate(first):
            if not isinstance(o, torch.Tensor):
                raise KernelgateError(f"the reference returns {type(o).__name__} as output {k}; only tensors are supported",
                                      Reason.TASK_LOAD)
        random_ops = sorted(op for op in self.ops if any(r in op for r in RANDOM_OPS))
        differs = any(not bit_equal(a, b) for a, b in zip(first, second))
        if differs:
            what = f"ops {', '.join(random_ops)}" if random_ops else "outputs differ between two runs on the same inputs"
            raise KernelgateError(f"the reference's forward is random ({what}); outputs cannot be compared. "
                                  "Remove the randomness (or pass it in as an input) to verify this task.",
                                  Reason.RANDOM_TASK)
        return first

    def permitted_names(self) -> list[str]:
        names = ["task dtype"]
        if self._tf32_conv():
            names.append("tf32 conv (cudnn.allow_tf32)")
        if "tf32" in self.contract.precision:
            names.append("tf32 (contract)")
        names += [f"{f} (contract)" for f in self.low]
        return names

    def _tf32_conv(self) -> bool:
        return (self.device.startswith("cuda") and torch.backends.cudnn.allow_tf32
                and "tf32" not in self.contract.precision and any(op in self.ops for op in CONV_OPS))

    def load(self, state: dict[str, torch.Tensor]) -> None:
        self.at0 = state is self.state0
        self.model.load_state_dict(state, strict=True)
        if self.model64 is not None:
            self.model64.load_state_dict(state, strict=True)
        for m in self.low.values():
            m.load_state_dict(state, strict=True)

    def reset(self) -> None:
        """The initial parameters back, where a load left others (a session that failed between its trials' loads
        would leave the next session's first calls judged against perturbed parameters)."""
        if not self.at0:
            self.load(self.state0)

    def run_as(self, dtype: torch.dtype, xs: list[Any]) -> list[torch.Tensor]:
        """The reference with its current parameters, computed entirely in `dtype` (for mutants)."""
        model = self.as_dtype.get(dtype)
        if model is None:
            model = self.as_dtype[dtype] = copy.deepcopy(self.model).to(dtype)
        model.load_state_dict(self.model.state_dict())
        dev = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in xs]
        out = self._call(model, upcast(dev, dtype))
        del dev
        self.give_back()
        return out

    @property
    def continuous(self) -> bool:
        """Every op the reference ran is continuous in its float arguments (CONTINUOUS_OPS)."""
        return bool(self.ops) and not self.stepped and all(op in CONTINUOUS_OPS for op in self.ops)

    def moved_runs(self, xs: list[Any], n: int) -> list[Runs]:
        """`run` `n` times more, each on the float inputs moved one unit in the last place of their dtype, up or
        down by a secret draw (`one_ulp`): each task-dtype run against its own oracle is one more draw of the
        reference's own rounding error (gate/session.py `ill`). A run the reference raises on (a system singular
        one ulp away) is left out, and the runs made are returned; where none could be made, the last error
        (an honest Cholesky solve was refused where one moved LU raised: the refusal stood)."""
        made: list[Runs] = []
        with self.buffers_kept():
            for i in range(n):
                try:
                    made.append(self.run([one_ulp(x, str(x.device), secrets.randbits(62) + k)
                                          if isinstance(x, torch.Tensor) else x for k, x in enumerate(xs)]))
                except torch.OutOfMemoryError:
                    raise
                except Exception:  # noqa: BLE001 - the reference refusing this moved input (singular)
                    if not made and i == n - 1:
                        raise
        return made

    @contextlib.contextmanager
    def buffers_kept(self):
        """The models' buffers as they were after the block: runs made to judge (`moved_runs`, `separable`) leave
        no trace in a reference that updates its state as it runs (a batch norm's running statistics)."""
        models = [m for m in (self.model, self.model64, *self.low.values()) if m is not None]
        kept = [[(b, b.detach().clone()) for b in m.buffers()] for m in models]
        try:
            yield
        finally:
            with torch.no_grad():
                for pairs in kept:
                    for b, v in pairs:
                        b.copy_(v)

    def separable(self, xs: list[Any], k: int) -> Any:
        """How output `k` of the reference on `xs` is a batch of independent problems, as a view taking a tensor of
        its shape to one row per problem (moves.problems: along a dimension, or blocks of its flattened elements),
        or None. For each way, with n problems: task-dtype runs on copies of `xs`, then with one secretly drawn
        element j along every float input's dimension of length n moved by Gaussian noise of its own scale (a
        generic element: an affine change made one-hot rows singular), up to SEPARABLE_DRAWS times: problem j of
        the output changed and every other one bit-identical. A coupled solution (one system whose unknowns lie
        along the dimension) changes everywhere. None where it cannot be told (no such input, a raising or
        non-deterministic reference). Red team 70: solutions returned transposed, flattened, or from inputs
        batched along another dimension than the first."""
        try:
            with self.buffers_kept():
                t = self._call(self.model, batch_moved(xs, self.device))[k]
                if not isinstance(t, torch.Tensor) or not t.dim():
                    return None
                for n, view in problems(tuple(t.shape), xs):
                    if any(batch_axis(x, n) is not None for x in xs) and self._apart(xs, k, view(t), n, view):
                        return view
                return None
        except Exception:  # noqa: BLE001 - the reference refusing the changed element (a singular system)
            return None
        finally:
            self.give_back()

    def _apart(self, xs: list[Any], k: int, t: torch.Tensor, n: int, view: Any) -> bool:
        """`separable` for one way: `t` the unmoved run's output k, one row per problem."""
        for _ in range(SEPARABLE_DRAWS):
            j = secrets.randbelow(n)
            out = self._call(self.model, batch_moved(xs, self.device, n, j))[k]
            if not isinstance(out, torch.Tensor) or out.dtype != t.dtype or out.numel() != t.numel():
                return False
            out = view(out)
            same = ((out == t) | (out != out) & (t != t)).reshape(n, -1).all(dim=1)
            if int(same.sum()) - int(same[j]) != n - 1:
                return False                     # another problem moved: coupled (or not deterministic)
            if not bool(same[j]):
                return True
        return False                             # problem j never moved: nothing learned

    def run_async(self, xs: list[Any], rounding: bool = False) -> Pending:
        """`run(xs)` in a thread of the judge (the trials run it while the candidate's call is out): `xs` must stay
        unchanged and the oracle otherwise unused until its `result()`."""
        return Pending(lambda xs: self.run(xs, rounding), xs,
                       torch.cuda.current_device() if self.device.startswith("cuda") else None)

    def run(self, xs: list[Any], rounding: bool = False) -> Runs:
        """The fp64 oracle's run, then the task-dtype run and the permitted ones, on the compute device. The fp64
        run comes first and alone: its inputs are made a chunk at a time where `xs` are not on the device (no
        task-dtype copy beside them) and dropped before the task-dtype inputs are placed, so the device holds at
        most the fp64 inputs and activations beside `xs` (about twice the forward's own peak, 2.5x with `xs` on
        the device), not those plus the task-dtype run's.

        `rounding` (inputs far from zero: gate/families.py ROUNDING): the fp64 oracle once more on the float inputs
        each moved one unit in the last place of their dtype, up or down at random, is a permitted run ("inputs'
        rounding"): how far the exact outputs move when the inputs are rounded, which an honest kernel that scales
        its inputs before it cancels them (logits times log2(e) before their max is subtracted) errs by, while the
        reference, cancelling first, errs far less."""
        oracle = None
        moved = None
        if not self.own:
            if self.placed(xs):
                dev64 = upcast(xs)
            else:
                dev64 = [to_fp64(x, self.device) for x in xs]
            oracle = self._call(self.model64, dev64)
            del dev64
            self.give_back()
            if rounding:
                dev64 = [one_ulp_fp64(x, self.device, k) for k, x in enumerate(xs)]
                moved = self._call(self.model64, dev64)
                del dev64
                self.give_back()
        dev = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in xs]
        task = self._call(self.model, dev)
        permitted: dict[str, list[torch.Tensor]] = {"task dtype": task}
        if moved is not None:
            permitted[ROUNDING] = moved
        if self._tf32_conv():
            with _RoundOperands(CONV_OPS):
                permitted["tf32 conv (cudnn.allow_tf32)"] = self._call(self.model, dev)
        if "tf32" in self.contract.precision:
            with _RoundOperands(MATMUL_OPS):
                permitted["tf32 (contract)"] = self._call(self.model, dev)
        for fmt, m in self.low.items():
            dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
            permitted[f"{fmt} (contract)"] = self._call(m, upcast(dev, dt))
        if self.own:
            oracle = [t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                      for t in task]
        del dev
        self.give_back()
        return Runs(oracle, task, permitted)

    def placed(self, xs: list[Any]) -> bool:
        """Every tensor of `xs` is on the compute device (else the fp64 run's inputs are made a chunk at a time)."""
        kind = torch.device(self.device).type
        return all(x.device.type == kind for x in xs if isinstance(x, torch.Tensor))

    @property
    def away(self) -> bool:
        """Computing away from where the outputs are kept (the lean memory plan)."""
        return self.home != self.device


#: elements per step of `bit_equal` (its masks are a slice's, not a 6 GiB output's)
EQUAL_CHUNK = 1 << 24


def bit_equal(a: Any, b: Any) -> bool:
    """Same dtype, shape and values (NaN equals NaN), a slice at a time, each slice of `b` moved to `a`'s device
    (the lean memory plan keeps one on the host)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    fa, fb = a.reshape(-1), b.reshape(-1)
    for i in range(0, fa.numel(), EQUAL_CHUNK):
        x, y = fa[i:i + EQUAL_CHUNK], fb[i:i + EQUAL_CHUNK].to(a.device)
        same = bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()) if a.is_floating_point() \
            else torch.equal(x, y)
        if not same:
            return False
    return True


def reduce_k_of(oracle: Any, k: int) -> int:
    """Output k's longest reduction as recorded when the oracle first ran (0 when not recorded)."""
    ks = getattr(oracle, "reduce_ks", None) or []
    return int(ks[k]) if k < len(ks) else 0
