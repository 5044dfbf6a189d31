"""Workers started ahead of need (kernelgate/sandbox/host.py `Worker`)."""
from __future__ import annotations

from .host import Worker


class Spares:
    """Workers started ahead of need, for a caller that judges one candidate after another (optimize):
    the next candidate's interpreter start and torch import overlap the current candidate's checks.
    A spare has loaded no candidate code, and every candidate still gets a process of its own."""

    def __init__(self, *, output_limit: int = 4 << 20, memory_limit: int | None = None):
        self.output_limit, self.memory_limit = output_limit, memory_limit
        self._spare: Worker | None = None

    def take(self, label: str = "candidate") -> Worker:
        """The spare if it is alive (then none is left until refill), else a new, unstarted worker."""
        w, self._spare = self._spare, None
        if w is None or not w.alive():
            if w is not None:
                w.close()
            w = Worker(label, output_limit=self.output_limit, memory_limit=self.memory_limit)
        w.label = label
        return w

    def refill(self) -> None:
        """Start the next spare now (its start-up runs while the caller works)."""
        if self._spare is None:
            w = Worker("spare", output_limit=self.output_limit, memory_limit=self.memory_limit)
            w.start()
            self._spare = w

    def close(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None
