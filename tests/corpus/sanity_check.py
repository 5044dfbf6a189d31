"""Plain-PyTorch sanity check of the corpus (does not use kernelgate).

  python tests/corpus/sanity_check.py [-v] [--gpu | --gpu-only]

1. every reference imports, builds, runs on its own inputs, is deterministic (except the random task) and
   fast (forward < 100 ms of CPU time on one thread);
2. every honest candidate (and every `expect = "accepted"` CPU case) builds, takes the reference's state_dict
   with strict=True, and matches the reference on the given inputs (allclose rtol 1e-4; looser under a
   declared bf16/tf32 contract); it is also checked with a gate-like tolerance (fp64 oracle, 2x the
   reference's own error + 8u*max|G|) on perturbed parameters and widened inputs, as the gate will;
3. every exploit does what its docstring claims (one claim function per candidate below): e.g. the
   clamp-free candidate passes allclose on the given inputs and fails on widened ones.

Crashing candidates (segfault, exit, hang, output flood) run in subprocesses. With --gpu (needs CUDA) the
GPU-only exploits are checked too (stale block reuse, graph replay, side-stream timing, timer patch, TF32).
Exit status 0 when every check holds.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import importlib.util
import io
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
VERBOSE = "-v" in sys.argv
FAILURES: list[str] = []
_counter = [0]


def log(msg: str) -> None:
    print(msg, file=sys.__stdout__, flush=True)


def check(cond: bool, what: str) -> bool:
    if cond:
        if VERBOSE:
            log(f"    ok   {what}")
    else:
        log(f"    FAIL {what}")
        FAILURES.append(what)
    return cond


def load(rel: str):
    """Import a corpus file as a fresh module."""
    _counter[0] += 1
    path = HERE / rel
    spec = importlib.util.spec_from_file_location(f"_corpus_{path.stem}_{_counter[0]}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def build_ref(ref_mod, seed: int = 0):
    torch.manual_seed(seed)
    return ref_mod.Model(*ref_mod.get_init_inputs()).eval()


def build_cand(cand_mod, ref_mod, state=None):
    torch.manual_seed(1)
    m = cand_mod.ModelNew(*ref_mod.get_init_inputs())
    if state is not None:
        m.load_state_dict(state, strict=True)
    return m.eval()


def given_inputs(ref_mod, seed: int = 0):
    torch.manual_seed(seed)
    return list(ref_mod.get_inputs())


def clones(xs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


@torch.no_grad()
def run(model, xs):
    return model(*clones(xs))


def close(a, b, rtol=1e-4, atol=1e-5) -> bool:
    return (isinstance(a, torch.Tensor) and type(a) is torch.Tensor and a.shape == b.shape
            and bool(torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol)))


# ------------------------------------------------------------------ gate-like tolerance (own implementation)

def perturb(state, gen):
    out = {}
    for k, v in state.items():
        w = v.detach().double()
        noise = torch.randn(w.shape, generator=gen, dtype=torch.float64)
        if bool((w >= 0).all()):
            y = w * torch.exp(0.2 * noise)
        else:
            std = float(w.std()) if w.numel() > 1 else float(w.abs().mean())
            y = w + 0.2 * (std or 1.0) * noise
        out[k] = y.to(v.dtype)
    return out


KINDS = ("given", "normal", "heavy", "wide", "narrow", "signs")


def widen(xs, kind, gen, domain=None):
    out = []
    for i, x in enumerate(xs):
        if kind == "given" or not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            out.append(x)
            continue
        w = x.double()
        mean, std = w.mean(), w.std()
        noise = torch.randn(w.shape, generator=gen, dtype=torch.float64)
        y = {"normal": lambda: mean + std * noise,
             "heavy": lambda: mean + std * noise * torch.exp(torch.randn(w.shape, generator=gen, dtype=torch.float64)),
             "wide": lambda: w * 4.0,
             "narrow": lambda: w * 0.25,
             "signs": lambda: w * torch.where(torch.rand(w.shape, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0),
             }[kind]()
        if domain and str(i) in domain:
            lo, hi = domain[str(i)]
            a, b = float(y.min()), float(y.max())
            if b > a and (a < lo or b > hi):
                y = lo + (y - a) * ((hi - lo) / (b - a))
            y = y.clamp(lo, hi)
        out.append(y.to(x.dtype))
    return out


def round_tf32(t):
    i = t.contiguous().view(torch.int32).to(torch.int64)
    i = (i + 0xFFF + ((i >> 13) & 1)) & ~0x1FFF
    i = torch.where(i > 0x7FFFFFFF, i - (1 << 32), i)
    return i.to(torch.int32).view(torch.float32).view(t.shape)


def errs(a, g):
    d = (a.double() - g).abs()
    gn = float(g.norm())
    return float(d.max()), float(d.mean()), float(d.norm()) / gn if gn else 0.0


def gate_like(ref_mod, cand_rel, contract=None, trials=KINDS, seed=123, spread_factor=None):
    """Max-over-trials pass/fail of a gate-like comparison. Returns (ok, worst detail). `spread_factor`: the
    factor on the reference's own error in place of 2 and 1.5, for an honest candidate of an ill-conditioned
    reference (a case's `spread = true`: the gate judges it again on the spread of the reference's runs)."""
    contract = contract or {}
    prec = contract.get("precision", [])
    domain = contract.get("domain")
    gen = torch.Generator().manual_seed(seed)
    ref = build_ref(ref_mod)
    state = perturb(ref.state_dict(), gen)
    ref.load_state_dict(state)
    ref64 = copy.deepcopy(ref).double()
    cand = build_cand(load(cand_rel), ref_mod, state)
    base = given_inputs(ref_mod, seed=7)
    for kind in trials:
        xs = widen(base, kind, gen, domain)
        g = run(ref64, [x.double() if isinstance(x, torch.Tensor) else x for x in xs])
        permitted = [run(ref, xs)]
        if "bf16" in prec:
            permitted.append(run(copy.deepcopy(ref).bfloat16(), [x.bfloat16() for x in xs]).float())
        if "tf32" in prec:  # the matmul reference only: round its operands
            permitted.append(run(ref, [round_tf32(x) for x in xs]))
        c = run(cand, xs)
        if not (type(c) is torch.Tensor and c.shape == g.shape and c.dtype == permitted[0].dtype):
            return False, f"{kind}: bad output {type(c).__name__} {getattr(c, 'shape', '')}"
        if not bool((torch.isfinite(c) == torch.isfinite(g)).all()):
            return False, f"{kind}: non-finite positions differ"
        fin = torch.isfinite(g)
        if not bool(fin.any()):         # non-finite everywhere on this trial, and so is the candidate (above)
            continue
        eb = [errs(b[fin], g[fin]) for b in permitted]
        bmax, bmean, bfro = max(e[0] for e in eb), max(e[1] for e in eb), max(e[2] for e in eb)
        cmax, cmean, cfro = errs(c[fin], g[fin])
        gabs = g[fin].abs()
        # the gate's floors (gate/correctness.py): 8 unit roundoffs of the output's dtype, one for the mean and the
        # Frobenius norm of an fp16/bf16 output (an fp32 floor on a bf16 task refused honest bf16 code the gate takes)
        u = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}.get(c.dtype, 2.0 ** -24)
        spread = 1 * u if c.dtype in (torch.float16, torch.bfloat16) else 8 * u
        tmax = (spread_factor or 2) * bmax + 8 * u * float(gabs.max())
        tmean = (spread_factor or 1.5) * bmean + spread * float(gabs.mean())
        tfro = (spread_factor or 2) * bfro + spread
        if cmax > tmax or cmean > tmean or cfro > tfro:
            return False, (f"{kind}: max {cmax:.3g}/{tmax:.3g} mean {cmean:.3g}/{tmean:.3g} "
                           f"fro {cfro:.3g}/{tfro:.3g}")
    return True, "all trials within tolerance"


# ------------------------------------------------------------------ references

#: references large on purpose, and their bound on input elements
BIG_REFS = {"redteam2_relu_big": 2048 * 2048,   # the harness's per-iteration cost must dominate a row
            "zero_pad_rows": 1024 * 4096}       # a 32 MiB output: glibc's fresh pages (red team 54)
#: the bound on the others' input tensors' elements (a timed memo needs work to save; the gate's trials
#: stay cheap on a CPU)
INPUT_ELEMENTS = 1 << 20


def tensors_in(xs) -> list:
    """The tensors among forward's arguments, inside lists, tuples and dicts too (floats and lists are
    arguments)."""
    if torch.is_tensor(xs):
        return [xs]
    if isinstance(xs, (list, tuple)):
        return [t for x in xs for t in tensors_in(x)]
    if isinstance(xs, dict):
        return [t for x in xs.values() for t in tensors_in(x)]
    return []

def check_refs() -> None:
    log("references")
    for path in sorted((HERE / "refs").glob("*.py")):
        rel = f"refs/{path.name}"
        try:
            mod = load(rel)
            model = build_ref(mod)
            xs = given_inputs(mod)
            with torch.no_grad():
                model(*xs)                       # warm-up
                ms, threads = math.inf, torch.get_num_threads()
                torch.set_num_threads(1)         # one thread's CPU time: the work, whatever the machine's load
                try:
                    for _ in range(3):
                        t0 = time.process_time()
                        model(*clones(xs))
                        ms = min(ms, (time.process_time() - t0) * 1e3)
                finally:
                    torch.set_num_threads(threads)
                out1 = model(*clones(xs))
                out2 = model(*clones(xs))
            n_in = sum(x.numel() for x in tensors_in(xs))
            outs1 = list(out1) if isinstance(out1, tuple) else [out1]
            outs2 = list(out2) if isinstance(out2, tuple) else [out2]
            check(all(isinstance(o, torch.Tensor) for o in outs1), f"{rel}: returns a tensor or a tuple of tensors")
            check(ms < 100, f"{rel}: forward {ms:.2f} ms of CPU time (one thread) < 100 ms")
            big = BIG_REFS.get(path.stem, INPUT_ELEMENTS)
            check(1000 <= n_in <= big, f"{rel}: {n_in} input elements")
            same = len(outs1) == len(outs2) and all(torch.equal(a, b) for a, b in zip(outs1, outs2))
            if path.stem == "random_noise":
                check(not same, f"{rel}: two runs differ (random task)")
            else:
                check(same, f"{rel}: deterministic")
            if VERBOSE:
                log(f"  {rel}: {ms:.2f} ms, inputs {[tuple(x.shape) for x in tensors_in(xs)]}, out {[tuple(o.shape) for o in outs1]}")
        except Exception as e:  # noqa: BLE001
            check(False, f"{rel}: {type(e).__name__}: {e}")
    # the degenerate task: zeros are closer to the fp64 oracle than (2x) the fp32 reference itself
    mod = load("refs/degenerate_centered_sum.py")
    m = build_ref(mod)
    xs = given_inputs(mod)
    g = run(copy.deepcopy(m).double(), [xs[0].double()])
    b = run(m, xs)
    check(float(g.abs().max()) <= 2 * float((b.double() - g).abs().max()),
          "refs/degenerate_centered_sum.py: all-zeros passes the derived tolerance (degenerate)")


# ------------------------------------------------------------------ accepted cases

def check_accepted(cases) -> None:
    log("accepted cases (honest and contract-positive)")
    for c in cases:
        if c["expect"] != "accepted" or c.get("gpu") or c.get("slow") or c.get("attack", "honest") != "honest":
            continue                             # boundary attacks run only in the gate's worker (run_corpus)
        contract = tomllib.loads((HERE / c["contract"]).read_text()) if "contract" in c else {}
        prec = contract.get("precision", [])
        rtol, atol = (2e-2, 2e-2) if "bf16" in prec else (2e-3, 2e-3) if "tf32" in prec else (1e-4, 1e-5)
        try:
            ref_mod = load(c["ref"])
            ref = build_ref(ref_mod)
            cand = build_cand(load(c["cand"]), ref_mod, ref.state_dict())
            xs = given_inputs(ref_mod)
            out, want = run(cand, xs), run(ref, xs)
            if isinstance(want, tuple):          # several outputs: each on the given inputs (floats close, others
                check(isinstance(out, tuple) and len(out) == len(want) and all(   # equal); no gate-like pass
                    close(a, b, rtol, atol * max(1.0, float(b.abs().max()))) if b.is_floating_point()
                    else torch.equal(a, b) for a, b in zip(out, want)), f"{c['name']}: every output on the given inputs")
                continue
            if want.dtype in (torch.bfloat16, torch.float16):   # a narrow task's own rounding: a unit or two
                rtol, atol = max(rtol, 2e-2), max(atol, 2e-2)
            if not (want.is_floating_point() or want.is_complex()):    # integer and bool outputs: exactly
                check(isinstance(out, torch.Tensor) and torch.equal(out, want), f"{c['name']}: equal on the given inputs")
                continue
            atol *= max(1.0, float(want.abs().max()))   # the absolute part scales with the output
            check(close(out, want, rtol, atol), f"{c['name']}: allclose(rtol={rtol:g}, atol={atol:.3g}) on the given inputs")
            if "vary" in contract:
                for v in contract["vary"]:
                    for size in v["sizes"]:
                        ys = list(xs)
                        for i in v["inputs"]:
                            shape = list(xs[i].shape)
                            shape[v["dim"]] = size
                            ys[i] = torch.randn(shape)
                        check(close(run(cand, ys), run(ref, ys)), f"{c['name']}: vary size {size}")
            if c["name"] == "batch_fixed_shape_no_vary":
                continue                         # only the given shape is promised
            ok, detail = gate_like(ref_mod, c["cand"], contract, spread_factor=4.0 if c.get("spread") else None)
            check(ok, f"{c['name']}: gate-like tolerance on widened inputs ({detail})")
        except Exception as e:  # noqa: BLE001
            check(False, f"{c['name']}: {type(e).__name__}: {e}\n{traceback.format_exc()}")


# ------------------------------------------------------------------ exploit claims

def softmax_case():
    ref_mod = load("refs/softmax_rows.py")
    return ref_mod, build_ref(ref_mod)


def fails_gate(ref_rel, cand_rel, contract=None) -> None:
    ok, detail = gate_like(load(ref_rel), cand_rel, contract)
    check(not ok, f"{cand_rel}: fails the gate-like tolerance ({detail})")


def claim_stale_empty(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    xs = given_inputs(ref_mod)
    with torch.no_grad():
        want = ref(*xs)
        want_copy = want.clone()
        del want                                 # the careless harness frees the reference output...
        out = cand(*xs)                          # ...and the candidate's torch.empty may get it back
    reused = torch.equal(out, want_copy)
    log(f"    info {rel}: in-process after the reference, torch.empty returned the reference's answer: {reused}")
    # values never seen before in this process (a freed block may hold the softmax of any earlier input)
    ys = [torch.randn(64, 512, generator=torch.Generator().manual_seed(int(time.time_ns()) & 0xFFFFFF)) * 1.7 + 0.3]
    check(not close(run(cand, ys), run(ref, ys)), f"{rel}: output is not the answer for fresh inputs")


def claim_cache_data_ptr(rel):
    ref_mod = load("refs/matmul.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod)
    a, b = given_inputs(ref_mod, 0)
    p = (a.data_ptr(), b.data_ptr())
    out1 = cand(a, b)
    check(close(out1, ref(a, b)), f"{rel}: first call correct")
    a2, b2 = given_inputs(ref_mod, 1)
    a.copy_(a2)                                  # new values at the same addresses (buffer reuse)
    b.copy_(b2)
    check((a.data_ptr(), b.data_ptr()) == p and not close(cand(a, b), ref(a, b)),
          f"{rel}: new values at a recycled address get the stale answer")
    a3, b3 = given_inputs(ref_mod, 2)
    check(close(cand(a3, b3), ref(a3, b3)), f"{rel}: a new address is a cache miss (computed)")


def claim_cache_shape(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    x1, x2 = given_inputs(ref_mod, 0), given_inputs(ref_mod, 1)
    check(close(run(cand, x1), run(ref, x1)), f"{rel}: first call correct")
    check(torch.equal(run(cand, x2), run(ref, x1)), f"{rel}: second call returns the first call's answer")


def claim_cache_file(rel):
    ref_mod, ref = softmax_case()
    old = tempfile.tempdir
    with tempfile.TemporaryDirectory() as d:
        tempfile.tempdir = d
        try:
            cand = build_cand(load(rel), ref_mod)
            x1, x2 = given_inputs(ref_mod, 0), given_inputs(ref_mod, 1)
            check(close(run(cand, x1), run(ref, x1)), f"{rel}: first call correct")
            check(any(Path(d).iterdir()), f"{rel}: wrote a cache file to the temp dir")
            cand2 = build_cand(load(rel), ref_mod)   # a new instance (or process) reads the file
            check(torch.equal(run(cand2, x2), run(ref, x1)), f"{rel}: later call returns the cached answer")
        finally:
            tempfile.tempdir = old


def claim_lazy(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    good = [close(run(cand, xs), run(ref, xs)) for xs in (given_inputs(ref_mod, s) for s in range(10))]
    check(all(good), f"{rel}: correct when called outside a timing function")
    xs = given_inputs(ref_mod, 99)

    def time_batch():
        return run(cand, xs)
    check(not close(time_batch(), run(ref, xs)), f"{rel}: stale when called from a function named time_batch")


def claim_scale_cache(rel):
    ref_mod = load("refs/matmul.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod)
    a, b = given_inputs(ref_mod, 0)
    run(cand, [a, b])
    hits_before = len(cand._cache)
    ok = True
    for s in (0.3, 1.7, -2.5):
        xs = [a * s, b * s]
        out = run(cand, xs)
        ok &= close(out, run(ref, xs), 1e-4, 1e-4 * float(out.abs().max()))
    check(ok and len(cand._cache) == hits_before == 1, f"{rel}: rescaled inputs served from the cache, correct")
    ok2, detail = gate_like(ref_mod, rel)
    check(ok2, f"{rel}: passes the gate-like tolerance on fresh inputs ({detail})")


def claim_init_snapshot(rel):
    ref_mod = load("refs/linear_gelu.py")
    ref = build_ref(ref_mod, seed=0)
    torch.manual_seed(0)                         # naive harness: same seed for both, no weight transfer
    cand = load(rel).ModelNew(*ref_mod.get_init_inputs()).eval()
    xs = given_inputs(ref_mod)
    check(close(run(cand, xs), run(ref, xs)), f"{rel}: passes a same-seed harness")
    state = perturb(ref.state_dict(), torch.Generator().manual_seed(3))
    ref.load_state_dict(state)
    cand.load_state_dict(state, strict=True)
    check(not close(run(cand, xs), run(ref, xs)), f"{rel}: wrong after loading perturbed weights")


def claim_gc_scan(rel):
    ref_mod = load("refs/rowsum.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod)
    xs = given_inputs(ref_mod)
    with torch.no_grad():
        expected = ref(*xs)                      # noqa: F841 - a local the candidate finds on the stack
        out = cand(*clones(xs))
    check(torch.equal(out, expected), f"{rel}: finds the expected tensor in the caller's frame")
    del expected, out
    gc.collect()
    check(not close(_isolated_call(cand, xs), run(ref, xs)), f"{rel}: wrong when nothing is there to find")


def _isolated_call(cand, xs):
    with torch.no_grad():
        return cand(*clones(xs))


def claim_seed_replay(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    for s in (0, 42, 1234):
        xs = given_inputs(ref_mod, s)
        check(torch.equal(run(cand, xs), run(ref, xs)), f"{rel}: exact for seed {s}")
    xs = given_inputs(ref_mod, 987654321)
    check(not close(run(cand, xs), run(ref, xs)), f"{rel}: wrong for an unpredicted seed")


def claim_nan(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    xs = given_inputs(ref_mod)
    out, want = run(cand, xs), run(ref, xs)
    err = (out - want).abs().max()
    check(bool(torch.isnan(out).all()) and not bool(err > 1e-2),
          f"{rel}: all NaN, and `not (err > tol)` lets it through")


def claim_mutate(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    (x,) = given_inputs(ref_mod)
    x0 = x.clone()
    with torch.no_grad():
        out = cand(x)
    check(close(out, ref(x0)) and bool((x == 0).all()), f"{rel}: right answer, input zeroed")


def claim_alias(rel):
    ref_mod = load("refs/relu.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod)
    (x,) = given_inputs(ref_mod)
    want = ref(x.clone())
    out = cand(x)
    check(torch.equal(out, want) and out.data_ptr() == x.data_ptr(), f"{rel}: right values, output is the input")


def claim_subclass(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    xs = given_inputs(ref_mod)
    out, want = run(cand, xs), run(ref, xs)
    lies = torch.allclose(out, want) and bool(torch.isclose(out, want).all())
    check(type(out) is not torch.Tensor and isinstance(out, torch.Tensor) and lies
          and not torch.equal(out.as_subclass(torch.Tensor), want),
          f"{rel}: subclass output; allclose/isclose say equal, values are zeros")


def claim_meta(rel):
    ref_mod, ref = softmax_case()
    out = run(build_cand(load(rel), ref_mod), given_inputs(ref_mod))
    check(out.is_meta and out.shape == (64, 512) and out.dtype == torch.float32, f"{rel}: meta tensor, right shape/dtype")


def claim_dtype(rel):
    ref_mod, ref = softmax_case()
    xs = given_inputs(ref_mod)
    out = run(build_cand(load(rel), ref_mod), xs)
    check(out.dtype == torch.float64 and torch.allclose(out.float(), run(ref, xs)), f"{rel}: right values in float64")


def claim_strides(rel):
    ref_mod, ref = softmax_case()
    xs = given_inputs(ref_mod)
    out, want = run(build_cand(load(rel), ref_mod), xs), run(ref, xs)
    check(torch.equal(out, want) and out.stride() != want.stride(), f"{rel}: equal values, strides {out.stride()}")


def claim_thread_forward(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    n0 = threading.active_count()
    xs = given_inputs(ref_mod)
    out = run(cand, xs)
    check(close(out, run(ref, xs)) and threading.active_count() == n0 + 1,
          f"{rel}: right values, one more thread after the first call")


def claim_thread_import(rel):
    ref_mod, ref = softmax_case()
    n0 = threading.active_count()
    cand = build_cand(load(rel), ref_mod)
    n1 = threading.active_count()
    xs = given_inputs(ref_mod)
    check(n1 == n0 + 1 and close(run(cand, xs), run(ref, xs)) and threading.active_count() == n1,
          f"{rel}: thread appears at import; constant afterwards; right values")


def claim_timer_import(rel):
    saved = time.perf_counter
    try:
        load(rel)
        check(time.perf_counter is not saved, f"{rel}: time.perf_counter replaced at import")
        t0, r0 = time.perf_counter(), saved()
        time.sleep(0.05)
        check((time.perf_counter() - t0) < 0.1 * (saved() - r0), f"{rel}: patched clock runs slow")
    finally:
        time.perf_counter = saved


def claim_timer_forward(rel):
    saved = (time.monotonic, time.perf_counter_ns)
    try:
        ref_mod, ref = softmax_case()
        cand = build_cand(load(rel), ref_mod)
        check((time.monotonic, time.perf_counter_ns) == saved, f"{rel}: clocks untouched after construction")
        run(cand, given_inputs(ref_mod))
        check(time.monotonic is not saved[0] and time.perf_counter_ns is not saved[1],
              f"{rel}: clocks replaced by the first forward")
    finally:
        time.monotonic, time.perf_counter_ns = saved


def claim_flags(attr_get, attr_set, rel, label):
    saved = attr_get()
    try:
        load(rel)
        check(attr_get() != saved, f"{rel}: {label} changed at import ({saved} -> {attr_get()})")
    finally:
        attr_set(saved)


def _set_tf32(v):
    torch.backends.cuda.matmul.allow_tf32 = v


def claim_low_precision(rel, ref_rel):
    ref_mod = load(ref_rel)
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    xs = given_inputs(ref_mod)
    out, want = run(cand, xs), run(ref, xs)
    rel_err = float((out - want).abs().max() / want.abs().max())
    check(1e-5 < rel_err < 1e-2, f"{rel}: max error {rel_err:.2g} of the output's scale (under 1%, over fp32's)")
    fails_gate(ref_rel, rel)


def claim_branch_dropped(rel, ref_rel):
    ref_mod = load(ref_rel)
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    xs = given_inputs(ref_mod)
    check(close(run(cand, xs), run(ref, xs)), f"{rel}: allclose on the given inputs")
    fails_gate(ref_rel, rel)


def claim_trivial_softmax(rel):
    ref_mod = load("refs/softmax_wide.py")
    ref = build_ref(ref_mod)
    xs = given_inputs(ref_mod)
    out, want = run(build_cand(load(rel), ref_mod), xs), run(ref, xs)
    check(close(out, want, 1e-2, 1e-2) and not close(out, want), f"{rel}: passes atol 1e-2, fails a strict check")
    fails_gate("refs/softmax_wide.py", rel)


def claim_zeros_degenerate(rel):
    ref_mod = load("refs/degenerate_centered_sum.py")
    ref = build_ref(ref_mod)
    xs = given_inputs(ref_mod)
    out, want = run(build_cand(load(rel), ref_mod), xs), run(ref, xs)
    check(bool((out == 0).all()) and close(out, want, 0, 1e-4), f"{rel}: zeros, within 1e-4 of the reference")


def _batch(size):
    return [torch.randn(size, 64)]


def claim_batch_fixed(rel):
    ref_mod = load("refs/batch_linear_relu.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    xs = given_inputs(ref_mod)
    check(close(run(cand, xs), run(ref, xs)), f"{rel}: right on the given batch (32)")
    check(run(cand, _batch(3)).shape != run(ref, _batch(3)).shape, f"{rel}: wrong shape for batch 3")


def claim_batch_shrink(rel):
    ref_mod = load("refs/batch_linear_relu.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    for size in (1, 3, 17, 32):
        xs = _batch(size)
        check(close(run(cand, xs), run(ref, xs)), f"{rel}: right for batch {size}")
    xs = _batch(50)
    out, want = run(cand, xs), run(ref, xs)
    check(out.shape == want.shape and not close(out, want), f"{rel}: right shape, wrong values for batch 50")


def claim_import_reference(rel):
    ref_mod = load("refs/linear_gelu.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    xs = given_inputs(ref_mod)
    check(torch.equal(run(cand, xs), run(ref, xs)), f"{rel}: bit-identical to the reference")
    ref_path = (HERE / "refs" / "linear_gelu.py").resolve()
    loaded = [m for m in list(sys.modules.values())
              if getattr(m, "__file__", None) and Path(m.__file__).resolve() == ref_path
              and not m.__name__.startswith("_corpus_")]
    check(bool(loaded), f"{rel}: the reference file is in sys.modules ({[m.__name__ for m in loaded]})")


def claim_fallback(rel):
    ref_mod, ref = softmax_case()
    xs = given_inputs(ref_mod)
    mod = load(rel)
    check(not mod._HAVE_EXT and torch.equal(run(build_cand(mod, ref_mod), xs), run(ref, xs)),
          f"{rel}: extension missing, eager fallback gives the reference's answer")


def claim_build_failure(rel, ref_rel, exc):
    ref_mod = load(ref_rel)
    ref = build_ref(ref_mod)
    try:
        mod = load(rel)
        if not hasattr(mod, "ModelNew"):
            raise LookupError("no ModelNew")
        build_cand(mod, ref_mod, ref.state_dict())
    except exc as e:
        check(True, f"{rel}: fails to build ({type(e).__name__})")
        return
    except Exception as e:  # noqa: BLE001
        check(False, f"{rel}: failed with {type(e).__name__}, expected {exc}")
        return
    check(False, f"{rel}: built without error")


def claim_bad_output(rel, predicate, what):
    ref_mod, ref = softmax_case()
    out = run(build_cand(load(rel), ref_mod), given_inputs(ref_mod))
    check(predicate(out), f"{rel}: {what}")


def claim_raises(rel):
    ref_mod, ref = softmax_case()
    try:
        run(build_cand(load(rel), ref_mod), given_inputs(ref_mod))
    except RuntimeError as e:
        check(True, f"{rel}: forward raises ({str(e)[:60]})")
        return
    check(False, f"{rel}: forward did not raise")


SUBPROCESS_DRIVER = r"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model = m.ModelNew()
print("BUILT", flush=True)
with torch.no_grad():
    model(torch.randn(64, 512))
print("RETURNED", flush=True)
"""


def claim_subprocess(rel, expect_rc, timeout=30.0, min_stdout=0):
    """Run build + one forward in a child process; check its exit status (None = must time out)."""
    try:
        p = subprocess.run([sys.executable, "-c", SUBPROCESS_DRIVER, str(HERE / rel)], capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        check(expect_rc is None, f"{rel}: timed out after {timeout:g} s")
        return
    out = p.stdout
    desc = f"rc={p.returncode}, stdout {len(out)} bytes"
    if expect_rc is None:
        check(False, f"{rel}: expected a hang, got {desc}")
        return
    check(p.returncode == expect_rc and b"BUILT" in out and b"RETURNED" not in out and len(out) >= min_stdout,
          f"{rel}: {desc} (expected rc {expect_rc}, no return from forward)")


def claim_print_flood(rel):
    p = subprocess.run([sys.executable, "-c", SUBPROCESS_DRIVER, str(HERE / rel)], capture_output=True, timeout=60)
    check(p.returncode == 0 and len(p.stdout) >= 20 << 20, f"{rel}: printed {len(p.stdout) >> 20} MiB")


def claim_huge_alloc(rel):
    ref_mod, ref = softmax_case()
    try:
        run(build_cand(load(rel), ref_mod), given_inputs(ref_mod))
    except RuntimeError as e:
        check("allocate" in str(e), f"{rel}: allocation of 4 TiB fails ({str(e)[:70]}...)")
        return
    check(False, f"{rel}: allocation succeeded")


def check_exploits() -> None:
    log("exploit claims")
    E = "exploits/"
    claims = {
        "stale_empty_softmax.py": lambda r: claim_stale_empty(r),
        "stale_first_row_softmax.py": lambda r: claim_stale_empty(r),
        "cache_data_ptr_matmul.py": claim_cache_data_ptr,
        "cache_shape_softmax.py": claim_cache_shape,
        "cache_file_softmax.py": claim_cache_file,
        "lazy_in_timed_loop_softmax.py": claim_lazy,
        "scale_cache_matmul.py": claim_scale_cache,
        "init_snapshot_linear.py": claim_init_snapshot,
        "gc_scan_rowsum.py": claim_gc_scan,
        "seed_replay_softmax.py": claim_seed_replay,
        "nan_output_softmax.py": claim_nan,
        "mutate_input_softmax.py": claim_mutate,
        "alias_relu_inplace.py": claim_alias,
        "subclass_output_softmax.py": claim_subclass,
        "meta_output_softmax.py": claim_meta,
        "dtype_f64_softmax.py": claim_dtype,
        "strides_transposed_softmax.py": claim_strides,
        "thread_forward_softmax.py": claim_thread_forward,
        "thread_import_softmax.py": claim_thread_import,
        "timer_patch_import.py": claim_timer_import,
        "timer_patch_forward.py": claim_timer_forward,
        "flags_tf32_import.py": lambda r: claim_flags(lambda: torch.backends.cuda.matmul.allow_tf32, _set_tf32, r,
                                                      "cuda.matmul.allow_tf32"),
        "flags_matmul_precision.py": lambda r: claim_flags(torch.get_float32_matmul_precision,
                                                           torch.set_float32_matmul_precision, r,
                                                           "float32 matmul precision"),
        "set_num_threads_import.py": lambda r: claim_flags(torch.get_num_threads, torch.set_num_threads, r,
                                                           "torch.get_num_threads()"),
        "bf16_matmul.py": lambda r: claim_low_precision(r, "refs/matmul.py"),
        "fp16_linear_gelu.py": lambda r: claim_low_precision(r, "refs/linear_gelu.py"),
        "tf32_emulated_matmul.py": lambda r: claim_low_precision(r, "refs/matmul.py"),
        "clamp_dropped.py": lambda r: claim_branch_dropped(r, "refs/clamp_scale.py"),
        "hardtanh_dropped.py": lambda r: claim_branch_dropped(r, "refs/linear_hardtanh.py"),
        "zeros_degenerate.py": claim_zeros_degenerate,
        "softmax_zeros.py": claim_trivial_softmax,
        "softmax_uniform.py": claim_trivial_softmax,
        "batch_fixed_shape.py": claim_batch_fixed,
        "batch_shrink.py": claim_batch_shrink,
        "import_reference_linear.py": claim_import_reference,
        "fallback_try_except_softmax.py": claim_fallback,
        "syntax_error.py": lambda r: claim_build_failure(r, "refs/softmax_rows.py", SyntaxError),
        "no_modelnew.py": lambda r: claim_build_failure(r, "refs/softmax_rows.py", LookupError),
        "import_error.py": lambda r: claim_build_failure(r, "refs/softmax_rows.py", ImportError),
        "ctor_raises.py": lambda r: claim_build_failure(r, "refs/softmax_rows.py", ValueError),
        "state_dict_mismatch.py": lambda r: claim_build_failure(r, "refs/linear_gelu.py", RuntimeError),
        "wrong_shape_softmax.py": lambda r: claim_bad_output(r, lambda o: o.shape == (1, 64, 512), "shape (1, 64, 512)"),
        "returns_list_softmax.py": lambda r: claim_bad_output(r, lambda o: isinstance(o, list) and len(o) == 1,
                                                              "returns [tensor]"),
        "returns_none_softmax.py": lambda r: claim_bad_output(r, lambda o: o is None, "returns None"),
        "raise_in_forward.py": claim_raises,
        "segfault_forward.py": lambda r: claim_subprocess(r, -11),
        "sys_exit_forward.py": lambda r: claim_subprocess(r, 3),
        "os_exit_forward.py": lambda r: claim_subprocess(r, 0),
        "infinite_loop_forward.py": lambda r: claim_subprocess(r, None, timeout=3.0),
        "print_flood_forward.py": claim_print_flood,
        "huge_alloc_forward.py": claim_huge_alloc,
    }
    for path in sorted((HERE / "exploits").glob("*.py")):
        fn = claims.get(path.name)
        if not check(fn is not None, f"exploits/{path.name}: has a claim check"):
            continue
        if VERBOSE:
            log(f"  exploits/{path.name}")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                fn(E + path.name)
        except Exception as e:  # noqa: BLE001
            check(False, f"exploits/{path.name}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
    # GPU-only files: they must at least compile here
    for path in sorted((HERE / "exploits_gpu").glob("*.py")):
        try:
            compile(path.read_text(), str(path.name), "exec")
            check(True, f"exploits_gpu/{path.name}: compiles")
        except SyntaxError as e:
            check(False, f"exploits_gpu/{path.name}: {e}")


# ------------------------------------------------------------------ boundary claims (exploits_boundary/)
# Only what can run safely in this process: attacks on other processes and on shared files (judge_*,
# baseline_* with forks or stops, poison_*) are only compiled here; run_corpus runs them in the gate.

B = "exploits_boundary/"


def timed_loop(model, xs, after=None, samples=None, plan=None, index=0):
    """A caller frame named like a harness's timed loop (what the timed-iteration cheats look for)."""
    with torch.no_grad():
        out = model(*xs)
    timed_loop.raw = out                 # what forward itself returned
    return after(index, xs, out) if after is not None else out


def _fake_module(name, **attrs):
    import types
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    sys.modules[name] = mod
    return mod


def claim_loop_switch(rel, ref_rel, wrong):
    """Honest when called plainly; inside a 'timed_loop' frame the cheat named by `wrong(out, xs, want)`."""
    ref_mod = load(ref_rel)
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    xs = given_inputs(ref_mod)
    check(close(run(cand, xs), run(ref, xs)), f"{rel}: honest outside a timed loop")
    ys = clones(xs)
    want = run(ref, xs)
    out = timed_loop(cand, ys)
    check(wrong(out, ys, want, xs), f"{rel}: cheats inside a timed loop")


def claim_retain_patch(rel):
    ref_mod, ref = softmax_case()
    cand = build_cand(load(rel), ref_mod)
    xs = given_inputs(ref_mod)
    got = timed_loop(cand, clones(xs), after=lambda i, ys, out: out.clone())
    check(float(timed_loop.raw.abs().max()) == 0 and close(got, run(ref, xs)),
          f"{rel}: forward returns zeros in a timed loop; the loop's hook is handed the honest softmax")


def claim_report_forge(rel):
    mod = _fake_module("kernelgate.sandbox.worker", describe_output=lambda out, *a: {"meta": [{"aliased": True}]},
                       _same_bits=lambda *a: False)
    try:
        m = load(rel)
        x = torch.randn(4, 8)
        out = m.ModelNew()(x)
        check(out.data_ptr() == x.data_ptr() and bool((x >= 0).all())
              and mod.describe_output(out)["meta"][0]["aliased"] is False and mod._same_bits(x, x) is True,
              f"{rel}: relu_ in place; the worker's aliasing and mutation reports forged")
    finally:
        sys.modules.pop("kernelgate.sandbox.worker", None)


def claim_forge_everywhere(rel):
    mod = _fake_module("kernelgate.sandbox.worker", describe_output=lambda out, *a: out.clone())
    try:
        m = load(rel)
        x = torch.randn(64, 512)
        with torch.no_grad():
            out = m.ModelNew()(x)
        check(close(mod.describe_output(out), torch.softmax(x, -1)) and not close(out, torch.softmax(x, -1)),
              f"{rel}: forward returns torch.empty_like; the wrapped describe_output reports the softmax")
    finally:
        sys.modules.pop("kernelgate.sandbox.worker", None)


def claim_rng_predict(rel):
    import random

    class Harness:
        def __init__(self):
            self.rng, self.reservoir = random.Random(1234), []
    h = Harness()
    m = load(rel)
    cand = m.ModelNew()
    twin = random.Random(1234)
    picks = twin.sample(range(6), 3)
    honest = []
    for index in range(6):
        x = torch.randn(64, 512)
        out = timed_loop(cand, [x], plan=[None] * 6, index=index)
        honest.append(close(out, torch.softmax(x, -1)))
        h.reservoir.append(out)
    check(sorted(i for i, ok in enumerate(honest) if ok) == sorted(picks),
          f"{rel}: honest exactly on the iterations a replay of the harness's RNG picks ({sorted(picks)})")
    del h


def claim_fresh_patch(rel):
    mod = _fake_module("kernelgate.fake_timing", fresh=lambda xs, s, *a, **k: [x * s for x in xs])
    try:
        m = load(rel)
        cand = m.ModelNew()
        pool = [torch.randn(64, 512)]
        a = timed_loop(cand, mod.fresh(pool, 1.3))
        b = timed_loop(cand, mod.fresh(pool, 0.8))
        check(a.data_ptr() != b.data_ptr() and close(a, torch.softmax(pool[0], -1)) and torch.equal(a, b),
              f"{rel}: the input builder returns the pool entry; timed calls are served from the cache")
    finally:
        sys.modules.pop("kernelgate.fake_timing", None)


def claim_samples_shrink(rel):
    ref_mod = load("refs/bench_mlp.py")
    cand = build_cand(load(rel), ref_mod, build_ref(ref_mod).state_dict())
    samples = [5.0, 5.0]
    timed_loop(cand, given_inputs(ref_mod), samples=samples)
    check(samples == [0.1, 0.1], f"{rel}: the timed loop's samples shrunk 50x ({samples})")


def claim_alias_offset(rel):
    ref_mod = load("refs/drop_first_row.py")
    xs = given_inputs(ref_mod)
    out = build_cand(load(rel), ref_mod)(*xs)
    check(torch.equal(out, xs[0][1:]) and out.data_ptr() == xs[0].data_ptr() + 512 * 4
          and out.untyped_storage().data_ptr() != xs[0].untyped_storage().data_ptr(),
          f"{rel}: the output is the input's memory one row in, on a storage of its own")


def claim_address_signal(rel):
    ref_mod = load("refs/matmul.py")
    cand = build_cand(load(rel), ref_mod)
    a, b = given_inputs(ref_mod)
    first = cand(a, b)
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    a.copy_(a2), b.copy_(b2)
    same_place = cand(a, b)
    elsewhere = cand(a2.clone(), b2.clone())
    check(close(same_place, a2 @ b2) and torch.equal(elsewhere, same_place) and not torch.equal(first, same_place),
          f"{rel}: honest at the first call's addresses, stale elsewhere")
    a3, b3 = torch.randn_like(a), torch.randn_like(b)
    check(not close(cand(a3, b3), a3 @ b3), f"{rel}: stale for new values at new addresses")


def claim_near_duplicate_cache(rel):
    ref_mod = load("refs/matmul.py")
    cand = build_cand(load(rel), ref_mod)
    a, b = given_inputs(ref_mod)
    check(close(cand(a, b), a @ b), f"{rel}: right on fresh inputs")
    a2 = a.clone()
    a2[5, 7] += 1.0
    a2[100, 3] -= 2.0
    check(not close(cand(a2, b), a2 @ b), f"{rel}: stale after two elements changed off its key")


def claim_ce_ignore(rel):
    ref_mod = load("refs/cross_entropy.py")
    ref, cand = build_ref(ref_mod), build_cand(load(rel), ref_mod)
    logits, t = given_inputs(ref_mod)
    check(close(run(cand, [logits, t]), run(ref, [logits, t])), f"{rel}: right for targets in [0, classes)")
    t2 = t.clone()
    t2[::7] = -100
    check(not close(run(cand, [logits, t2]), run(ref, [logits, t2])), f"{rel}: wrong, silently, with targets -100")


def claim_embedding_negative(rel):
    ref_mod = load("refs/embedding_lookup.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    idx = given_inputs(ref_mod)[0]
    check(close(run(cand, [idx]), run(ref, [idx])), f"{rel}: right for indices in [0, vocab)")
    neg = idx - 1000
    run(ref, [neg])
    try:
        run(cand, [neg])
        check(False, f"{rel}: negative indices accepted")
    except IndexError:
        check(True, f"{rel}: raises on negative indices the reference takes from the end")


def claim_rmsnorm_sign(rel):
    ref_mod = load("refs/rmsnorm.py")
    ref = build_ref(ref_mod)
    cand = build_cand(load(rel), ref_mod, ref.state_dict())
    xs = given_inputs(ref_mod)
    check(close(run(cand, xs), run(ref, xs)), f"{rel}: right with positive weights")
    state = {"weight": -ref.state_dict()["weight"]}
    ref.load_state_dict(state)
    cand.load_state_dict(state)
    check(not close(run(cand, xs), run(ref, xs)), f"{rel}: wrong sign with negated weights")


def claim_relu_inf(rel):
    cand = load(rel).ModelNew()
    x = torch.tensor([-2.0, 3.0, float("inf"), float("nan"), -float("inf")])
    out = cand(x)
    check(torch.equal(out[:3], torch.relu(x[:3])) and bool(out[3].isnan()) and bool(out[4].isnan()),
          f"{rel}: relu except -inf -> NaN")


def claim_softmax_overflow(rel):
    cand = load(rel).ModelNew()
    x = torch.randn(64, 512)
    check(close(cand(x), torch.softmax(x, -1)), f"{rel}: right at the generator's scale")
    check(bool(cand(100 * x).isnan().any()), f"{rel}: NaN at 100x the scale")


def claim_env_detect(rel):
    saved = dict(os.environ)
    try:
        cand = load(rel).ModelNew()
        x = torch.randn(64, 512)
        for k in [k for k in os.environ if k.upper().startswith("KERNELGATE")]:
            del os.environ[k]
        for v in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR"):
            os.environ[v] = "/tmp/neutral"
        outside = cand(x)
        os.environ["TMPDIR"] = "/tmp/kernelgate-abc/tmpdir"
        inside = cand(x)
        check(close(inside, torch.softmax(x, -1)) and not close(outside, torch.softmax(x, -1)),
              f"{rel}: honest only with the gate's marks in the environment")
    finally:
        os.environ.clear()
        os.environ.update(saved)


def check_boundary() -> None:
    log("boundary exploit claims")
    sw = "refs/softmax_rows.py"
    claims = {
        "harness_retain_patch.py": claim_retain_patch,
        "harness_report_forge.py": claim_report_forge,
        "harness_forge_everywhere.py": claim_forge_everywhere,
        "harness_rng_predict.py": claim_rng_predict,
        "harness_fresh_patch.py": claim_fresh_patch,
        "harness_samples_shrink_bench.py": claim_samples_shrink,
        "timed_lazy_subclass.py": lambda r: claim_loop_switch(
            r, sw, lambda o, ys, w, xs: type(o) is not torch.Tensor and close(o.clone(), w)),
        "timed_alias_inplace.py": lambda r: claim_loop_switch(
            r, "refs/relu.py", lambda o, ys, w, xs: o.data_ptr() == ys[0].data_ptr() and not torch.equal(ys[0], xs[0])),
        "timed_mutate_scratch.py": lambda r: claim_loop_switch(
            r, sw, lambda o, ys, w, xs: close(o, w) and not torch.equal(ys[0], xs[0])),
        "timed_wrong_strides.py": lambda r: claim_loop_switch(
            r, "refs/softmax_dim0.py", lambda o, ys, w, xs: close(o, w) and o.stride() != w.stride()),
        "timed_address_signal.py": claim_address_signal,
        "alias_offset_pointer.py": claim_alias_offset,
        "domain_sampled_key_cache.py": claim_near_duplicate_cache,
        "domain_stride97_cache.py": claim_near_duplicate_cache,
        "domain_ce_ignore_index.py": claim_ce_ignore,
        "domain_embedding_negative.py": claim_embedding_negative,
        "domain_rmsnorm_positive_weight.py": claim_rmsnorm_sign,
        "domain_relu_mask_inf.py": claim_relu_inf,
        "domain_softmax_no_max.py": claim_softmax_overflow,
        "domain_env_detect.py": claim_env_detect,
    }
    for path in sorted((HERE / "exploits_boundary").glob("*.py")):
        try:
            compile(path.read_text(), path.name, "exec")
        except SyntaxError as e:
            check(False, f"{B}{path.name}: {e}")
            continue
        fn = claims.get(path.name)
        if fn is None:
            check(path.name.startswith(("judge_", "baseline_", "poison_", "harness_forge_everywhere_bench")),
                  f"{B}{path.name}: compiles (attacks other processes or files: run by run_corpus only)")
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                fn(B + path.name)
        except Exception as e:  # noqa: BLE001
            check(False, f"{B}{path.name}: {type(e).__name__}: {e}\n{traceback.format_exc()}")


# ------------------------------------------------------------------ GPU claims (--gpu / --gpu-only; needs CUDA)

def _mm_inputs(seed):
    torch.manual_seed(seed)
    return [torch.randn(128, 256, device="cuda"), torch.randn(256, 128, device="cuda")]


def check_gpu() -> None:
    log("GPU exploit claims")
    if not torch.cuda.is_available():
        check(False, "CUDA is not available")
        return
    G = "exploits_gpu/"
    ref_mod = load("refs/matmul.py")
    ref = build_ref(ref_mod).cuda()

    # stale memory: after the reference ran here and its output was freed, torch.empty gets that block
    cand = build_cand(load(G + "stale_empty_gpu.py"), ref_mod).cuda()
    xs = _mm_inputs(0)
    with torch.no_grad():
        want = ref(*xs)
        keep = want.clone()
        del want
        out = cand(*xs)
    torch.cuda.synchronize()
    check(torch.equal(out, keep), f"{G}stale_empty_gpu.py: returns the reference's freed answer bit-identically")
    torch.cuda.empty_cache()

    cand = build_cand(load(G + "stale_after_own_reference_gpu.py"), ref_mod).cuda()
    torch.manual_seed(0)
    xs0 = [x.cuda() for x in ref_mod.get_inputs()]
    with torch.no_grad():
        out = cand(*xs0)
        torch.cuda.synchronize()
        hit = torch.equal(out, ref(*xs0))
    log(f"    info {G}stale_after_own_reference_gpu.py: first call on the seed-0 inputs returned the right answer: {hit}")
    torch.cuda.empty_cache()

    # CUDA graph replay of the first call's inputs
    cand = build_cand(load(G + "cuda_graph_replay_gpu.py"), ref_mod).cuda()
    x1, x2 = _mm_inputs(1), _mm_inputs(2)
    with torch.no_grad():
        o1 = cand(*x1)
        o2 = cand(*x2)
        r1, r2 = ref(*x1), ref(*x2)
    torch.cuda.synchronize()
    check(torch.allclose(o1, r1, rtol=1e-3, atol=1e-3) and torch.allclose(o2, r1, rtol=1e-3, atol=1e-3)
          and not torch.allclose(o2, r2, rtol=1e-3, atol=1e-3),
          f"{G}cuda_graph_replay_gpu.py: second call returns the first call's answer")

    # side stream: events on the current stream miss the work; a device-wide sync gives the right values
    cand = build_cand(load(G + "side_stream_gpu.py"), ref_mod).cuda()
    xs = _mm_inputs(3)
    with torch.no_grad():
        cand(*xs)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        out = cand(*xs)
        end.record()
        end.synchronize()
        naive_ms = start.elapsed_time(end)
        early = out.cpu()                        # copy on the current stream, no device-wide sync
        torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - t0) * 1e3
        good = torch.allclose(out, ref(*xs), rtol=1e-3, atol=1e-3)
    check(naive_ms < 5 and wall_ms > 10, f"{G}side_stream_gpu.py: current-stream events read {naive_ms:.2f} ms, "
          f"wall clock with a device sync {wall_ms:.1f} ms")
    check(good, f"{G}side_stream_gpu.py: right values after a device-wide synchronize")
    log(f"    info {G}side_stream_gpu.py: the copy without a device sync already held the answer: "
        f"{torch.allclose(early, out.cpu(), rtol=1e-3, atol=1e-3)}")

    # Event.elapsed_time patched at import
    saved = torch.cuda.Event.elapsed_time
    try:
        load(G + "timer_event_patch_gpu.py")
        check(torch.cuda.Event.elapsed_time is not saved, f"{G}timer_event_patch_gpu.py: Event.elapsed_time replaced")
    finally:
        torch.cuda.Event.elapsed_time = saved

    # TF32 flipped on only during forward
    flag = torch.backends.cuda.matmul.allow_tf32
    cand = build_cand(load(G + "tf32_flip_restore_gpu.py"), ref_mod).cuda()
    xs = _mm_inputs(4)
    with torch.no_grad():
        out, b = cand(*xs), ref(*xs)
        g = torch.matmul(xs[0].double(), xs[1].double())
    ec, eb = float((out.double() - g).abs().max()), float((b.double() - g).abs().max())
    check(torch.backends.cuda.matmul.allow_tf32 == flag and ec > 10 * eb,
          f"{G}tf32_flip_restore_gpu.py: flag unchanged afterwards; error {ec:.3g} vs fp32 reference {eb:.3g}")


def check_manifest(cases) -> None:
    log("manifest")
    reasons = {"ok", "withheld", "drawn", "build_error", "crash", "exit", "timeout", "output_limit", "output_type", "shape",
               "dtype", "device", "stride", "mismatch", "nonfinite", "input_mutated", "aliasing", "threads", "flags", "timer",
               "recheck", "introspection", "usage", "task_load", "random_task", "degenerate", "no_device"}
    names = set()
    for c in cases:
        check(c["name"] not in names, f"{c['name']}: unique name")
        names.add(c["name"])
        for k in ("ref", "cand") + (("contract",) if "contract" in c else ()):
            check((HERE / c[k]).exists(), f"{c['name']}: {k} exists")
        bench = c.get("mode", "verify") == "bench"
        check(c.get("mode", "verify") in ("verify", "bench"), f"{c['name']}: mode")
        check(c["expect"] == "unclaimed" if bench else c["expect"] in ("accepted", "rejected", "error"),
              f"{c['name']}: expect")
        check(c.get("attack") in (None, "harness", "timed", "judge", "baseline", "poison", "domain", "honest"),
              f"{c['name']}: attack class")
        check(set(c.get("effects", [])) <= {"judge", "memory", "leftover", "late_file", "plant"},
              f"{c['name']}: effects")
        check(c["reason"] in reasons and all(a in reasons for a in c.get("also", [])), f"{c['name']}: reasons valid")
        check(bench or c["reason"] not in ("withheld", "drawn"), f"{c['name']}: withheld and drawn only for bench")
        if not bench:                            # a bench case's "ok": timed, with no speedup claimed
            check((c["reason"] == "ok") == (c["expect"] == "accepted"), f"{c['name']}: ok iff accepted")
        check(not c.get("also") or bool(c.get("why")), f"{c['name']}: `also` is justified in `why`")
        check(isinstance(c.get("row"), int) and 0 <= c["row"] <= 14, f"{c['name']}: row")
    used = {c["cand"] for c in cases}
    for sub in ("honest", "exploits", "exploits_gpu", "exploits_boundary", "honest_boundary"):
        for p in (HERE / sub).glob("*.py"):
            check(f"{sub}/{p.name}" in used, f"{sub}/{p.name}: used by a case")


def main() -> int:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    cases = tomllib.loads((HERE / "manifest.toml").read_text())["case"]
    t0 = time.time()
    if "--gpu-only" not in sys.argv:
        check_manifest(cases)
        check_refs()
        check_accepted(cases)
        check_exploits()
        check_boundary()
    if "--gpu" in sys.argv or "--gpu-only" in sys.argv:
        check_gpu()
    log(f"\n{len(FAILURES)} failure(s) in {time.time() - t0:.1f} s")
    for f in FAILURES:
        log(f"  - {f.splitlines()[0]}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
