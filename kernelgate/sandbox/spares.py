"""Workers started ahead of need (kernelgate/sandbox/host.py `Worker`)."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, ClassVar, Iterator

from .host import Worker


class Spares:
    """Workers started ahead of need, for a caller that judges one candidate after another (optimize):
    the next candidate's interpreter start and torch import overlap the current candidate's checks, and with
    `prime` (the harness's prime request: the CUDA context, torch's first-use threads, the digest kernels'
    builds; seconds on a GPU host) so does its prime. A spare has loaded no candidate code, and every candidate
    still gets a process of its own.

    A spare's prime runs on the device: `held()` freezes every spare with a prime in flight for the length of a
    measurement (the timer's block), so no spare's work shares the device or the host with a timed batch; its prime
    goes on afterwards. (Waiting for primes instead, `quiet()`, moved a candidate's worker start into its timing on
    an H100: a prime there takes 4.8 s, the imports before it 2.7 s, against 5-6 s from one candidate's build to its
    timing.)"""

    _priming: ClassVar[dict[threading.Thread, Worker]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, *, output_limit: int = 4 << 20, memory_limit: int | None = None,
                 prime: dict[str, Any] | None = None, prime_timeout: float = 300.0, depth: int = 1):
        self.output_limit, self.memory_limit = output_limit, memory_limit
        self.prime, self.prime_timeout = prime, prime_timeout
        #: spares kept started at once: a prime longer than one candidate's build and trials (a GPU's) finishes
        #: within two when there are two
        self.depth = max(1, int(depth))
        self._ready: list[tuple[Worker, threading.Thread | None, float]] = []   # (spare, its prime, started at)
        self.primed_ahead = 0               # spares whose prime finished before they were taken
        #: one record per take: whether a spare was there, alive, its prime done, its age and the wait (seconds);
        #: where a search's "worker start" goes (optimize's phases JSON, `spare_takes`)
        self.takes: list[dict[str, Any]] = []

    @property
    def _spare(self) -> Worker | None:
        """The spare the next take gets (the oldest)."""
        return self._ready[0][0] if self._ready else None

    def take(self, label: str = "candidate") -> Worker:
        """The oldest spare if it is alive (its prime in flight waited for), else a new, unstarted worker."""
        t0 = time.monotonic()
        w, thread, started = self._ready.pop(0) if self._ready else (None, None, 0.0)
        primed = thread is None or not thread.is_alive()
        if thread is not None:
            thread.join()
        alive = w is not None and w.alive()
        self.takes.append({"spare": w is not None, "alive": alive, "primed_ahead": self.prime is not None,
                           "prime_done": w is not None and primed,
                           "age_s": round(t0 - started, 3) if w is not None else None,
                           "wait_s": round(time.monotonic() - t0, 3)})
        if not alive:
            if w is not None:
                w.close()
            w = Worker(label, output_limit=self.output_limit, memory_limit=self.memory_limit)
        w.label = label
        return w

    def refill(self) -> None:
        """Start spares up to `depth` now (their start-up, and their prime when given, run while the caller works)."""
        while len(self._ready) < self.depth:
            w = Worker("spare", output_limit=self.output_limit, memory_limit=self.memory_limit)
            w.start()
            t = None
            if self.prime is not None:
                t = threading.Thread(target=self._prime, args=(w,), name="kernelgate-spare-prime", daemon=True)
                with Spares._lock:
                    Spares._priming[t] = w
                t.start()
            self._ready.append((w, t, time.monotonic()))

    def _prime(self, w: Worker) -> None:
        try:
            w.request(dict(self.prime or {}), self.prime_timeout)
            self.primed_ahead += 1
        except Exception:  # noqa: BLE001 - a spare that failed its prime is dead or closed: take() starts another
            w.close()
        finally:
            with Spares._lock:
                Spares._priming.pop(threading.current_thread(), None)

    @classmethod
    def quiet(cls) -> None:
        """Wait until no spare's prime is running (any Spares of this process). The timer holds primes instead
        (`held`)."""
        with cls._lock:
            running = list(cls._priming)
        for t in running:
            t.join()

    @classmethod
    @contextlib.contextmanager
    def held(cls) -> Iterator[None]:
        """Every spare with a prime in flight (any Spares of this process) frozen for the block (its process and every
        descendant stopped: host.Worker.freeze) and resumed after it: the timer's block around a measurement. A prime
        that ends meanwhile leaves a stopped worker, resumed the same way."""
        with cls._lock:
            workers = list(cls._priming.values())
        for w in workers:
            w.freeze()
        try:
            yield
        finally:
            for w in workers:
                w.thaw()

    def close(self) -> None:
        ready, self._ready = self._ready, []
        for w, t, _ in ready:
            w.close()
            if t is not None:
                t.join()
