"""The one place that reads the environment: store location and gate defaults."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def store_path() -> Path:
    """KERNELGATE_STORE, else $XDG_CACHE_HOME/kernelgate/store.sqlite, else ~/.cache/kernelgate/store.sqlite."""
    if os.environ.get("KERNELGATE_STORE"):
        return Path(os.environ["KERNELGATE_STORE"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kernelgate" / "store.sqlite"


def machines_path() -> Path:
    """User machine-model overrides: KERNELGATE_MACHINES, else $XDG_CONFIG_HOME/kernelgate/machines.toml."""
    if os.environ.get("KERNELGATE_MACHINES"):
        return Path(os.environ["KERNELGATE_MACHINES"]).expanduser()
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kernelgate" / "machines.toml"


def calibration_path() -> Path:
    """Measured rates: KERNELGATE_CALIBRATION, else $XDG_CACHE_HOME/kernelgate/calibration.json."""
    if os.environ.get("KERNELGATE_CALIBRATION"):
        return Path(os.environ["KERNELGATE_CALIBRATION"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelgate" / "calibration.json"


@dataclass(frozen=True)
class GateConfig:
    """Knobs of the gate. Defaults are what `verify` uses."""

    trials: int = 8                  # correctness trials (distributions cycle through workload.TRIAL_KINDS)
    build_timeout: float = 600.0     # import + construct + load_state_dict (CUDA extensions build here)
    call_timeout: float = 120.0      # one forward, or one timed batch
    recheck_iters: int = 6           # timed iterations whose outputs may be re-checked in verify
    rechecks: int = 3                # outputs re-checked after verify's timed batch
    soak_ms: float = 1000.0          # calls before that batch for a secret 20-100% of this (0: one call)
    recheck_rate: float = 0.5        # in bench/optimize: chance that a candidate's batch gets one output re-checked
    output_limit: int = 4 << 20      # bytes a candidate may print
    memory_limit: int | None = None  # address-space limit for CPU workers (bytes)
    memory: str = "auto"             # device-memory plan: auto | lean | full (gate/memory.py)
    #: compile cache shared by trusted workers (baselines, a baseline's emitted module) across runs; None: private
    trusted_cache: str | None = None


@dataclass(frozen=True)
class TimingConfig:
    """Knobs of the timer (gate/timing.py)."""

    warmup_ms: float = 300.0
    rounds: int = 10
    iters: int = 10                  # per round per implementation
    pool: int = 4                    # distinct input sets rotated through
    min_total_ms: float = 0.0        # extend rounds until each implementation has this much sampled time
    batch_s: float = 0.0             # >0: a batch's iterations cut to take about this long (at least 3)
    lead_in: int = 1                 # untimed steps opening every batch (the first after a worker thaws is slow)


def gate_config(**overrides) -> GateConfig:
    env_timeout = os.environ.get("KERNELGATE_CALL_TIMEOUT")
    if env_timeout and "call_timeout" not in overrides:
        overrides["call_timeout"] = float(env_timeout)
    return GateConfig(**{k: v for k, v in overrides.items() if v is not None})
