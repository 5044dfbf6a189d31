"""The store: every verify and bench result in SQLite (WAL; safe with several writers)."""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import config
from .versions import software

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    kind TEXT NOT NULL,               -- verify | bench
    workload TEXT NOT NULL,
    workload_hash TEXT NOT NULL,
    candidate TEXT,
    candidate_hash TEXT,
    target TEXT NOT NULL,
    device TEXT NOT NULL,
    torch_version TEXT NOT NULL,
    triton_version TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    summary TEXT,
    payload TEXT NOT NULL             -- the full JSON document
);
CREATE INDEX IF NOT EXISTS results_key ON results (workload_hash, candidate_hash, target, device);
"""


@dataclass(frozen=True)
class Row:
    id: int
    created: float
    kind: str
    workload: str
    candidate: str | None
    target: str
    device: str
    status: str
    reason: str | None
    summary: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Store:
    """A SQLite file; each call opens a short transaction so concurrent writers wait, never corrupt."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else config.store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=30000")
        return db

    def add(self, kind: str, workload: str, workload_hash: str, candidate: str | None, candidate_hash: str | None,
            target: str, device: str, status: str, reason: str | None, summary: str, payload: dict[str, Any]) -> int:
        sw = software()
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO results (created, kind, workload, workload_hash, candidate, candidate_hash, target, device,"
                " torch_version, triton_version, status, reason, summary, payload)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), kind, workload, workload_hash, candidate, candidate_hash, target, device,
                 sw["torch"], sw.get("triton"), status, reason, summary, json.dumps(payload)))
            return int(cur.lastrowid)

    def recent(self, limit: int = 20) -> list[Row]:
        with self._connect() as db:
            rows = db.execute("SELECT id, created, kind, workload, candidate, target, device, status, reason, summary"
                              " FROM results ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [Row(*r) for r in rows]

    def payload(self, row_id: int) -> dict[str, Any] | None:
        with self._connect() as db:
            r = db.execute("SELECT payload FROM results WHERE id = ?", (row_id,)).fetchone()
        return json.loads(r[0]) if r else None

    def __iter__(self) -> Iterator[Row]:
        return iter(self.recent(limit=1 << 30))
