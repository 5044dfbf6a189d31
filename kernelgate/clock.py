"""The one clock: every figure kernelgate measures (the judge's clock around timed steps, the worker's
in-process samples, calibration) comes from these functions, captured when this module is first imported,
before any candidate code runs in a worker (replacing `time.perf_counter_ns` later changes nothing here).
A leaf module: it imports nothing of kernelgate."""
from __future__ import annotations

import statistics
import time as _time
from typing import Any, Callable

import torch

perf_ns = _time.perf_counter_ns
monotonic = _time.monotonic
cuda_sync = torch.cuda.synchronize
Event = torch.cuda.Event
#: the timed loop's forms (kernelgate/sandbox/loop.py): the device-wide synchronize and the event type's methods as
#: torch's C functions, no Python frame between (the worker's harness thread runs under a trace function that
#: every Python call pays: torch.cuda.synchronize is 24 calls, an event pair's creation, records and waits 54, about
#: 0.2 ms an iteration on an H100's host, benchmarks/results/h100_harness_fixed_session31.json). For a device that is
#: already initialised and current (the worker's, after its prime).
device_sync = getattr(torch._C, "_cuda_synchronize", None) or torch.cuda.synchronize
EventBase = getattr(torch._C, "_CudaEventBase", None) or torch.cuda.Event


def ms_since(t0_ns: int) -> float:
    """Milliseconds since `perf_ns()` returned `t0_ns`."""
    return (perf_ns() - t0_ns) / 1e6


def median_s(fn: Callable[[], Any], cuda: bool, warmup: int, repeats: int) -> float:
    """Median seconds of `fn` after `warmup` calls: CUDA events around each call on the GPU (the device's
    own clock), the performance counter on the CPU."""
    for _ in range(warmup):
        fn()
    times = []
    if cuda:
        cuda_sync()
        for _ in range(repeats):
            start, end = Event(enable_timing=True), Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(repeats):
            t0 = perf_ns()
            fn()
            times.append((perf_ns() - t0) / 1e9)
    return statistics.median(times)
