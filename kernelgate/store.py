"""The store: every verify and bench result in SQLite (WAL; safe with several writers); optimize runs'
evaluations, kept baseline measurements, hints added to runs, and the review queue (kernelgate/review.py)."""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import config
from .errors import KernelgateError
from .records import Reason
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
CREATE TABLE IF NOT EXISTS candidates (
    run_id TEXT NOT NULL,             -- one optimize run (its out/ directory holds the id)
    seq INTEGER NOT NULL,             -- evaluation order within the run
    candidate_id TEXT NOT NULL,
    strategy TEXT NOT NULL,
    parent TEXT,
    generation INTEGER NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    median_ms REAL,
    speedup REAL,
    payload TEXT NOT NULL,            -- Evaluation.to_json()
    created REAL NOT NULL,
    PRIMARY KEY (run_id, candidate_id)
);
CREATE TABLE IF NOT EXISTS baselines (
    key TEXT PRIMARY KEY,             -- workload hash, device, software versions, timing configuration
    created REAL NOT NULL,
    payload TEXT NOT NULL             -- {"timings": {label: Timing.to_json()}, "faster": label, "build_s": {...}}
);
CREATE TABLE IF NOT EXISTS hints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,             -- the optimize run it is for (a later or resumed optimize reads it)
    created REAL NOT NULL,
    text TEXT NOT NULL,
    source TEXT                       -- who added it: mcp, cli, ...
);
CREATE INDEX IF NOT EXISTS hints_run ON hints (run_id, id);
CREATE TABLE IF NOT EXISTS reviews (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,         -- what is reviewed: one item per result or proposed assumption
    created REAL NOT NULL,
    kind TEXT NOT NULL,               -- result | assumption
    subject TEXT NOT NULL,            -- one line: what a person decides
    workload TEXT,
    workload_hash TEXT,
    flags TEXT NOT NULL,              -- JSON list: why it waits for a person, one line each
    evidence TEXT NOT NULL,           -- JSON document
    source TEXT,                      -- where it came from: mcp, suite, ...
    status TEXT NOT NULL,             -- pending | accepted | rejected
    decided REAL,
    decided_by TEXT,
    note TEXT
);
CREATE INDEX IF NOT EXISTS reviews_status ON reviews (status, id);
"""
REVIEW_COLUMNS = ("id", "key", "created", "kind", "subject", "workload", "workload_hash", "flags", "evidence", "source",
                  "status", "decided", "decided_by", "note")
REVIEW_STATUSES = ("pending", "accepted", "rejected")


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
        try:
            if self.path.is_dir():
                raise OSError(f"{self.path} is a directory")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise KernelgateError(f"cannot use the store {self.path}: {e}", Reason.USAGE) from None

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

    def add_evaluation(self, run_id: str, evaluation: Any) -> None:
        """Record one evaluated candidate of an optimize run (idempotent per candidate)."""
        e = evaluation
        with self._connect() as db:
            seq = db.execute("SELECT COUNT(*) FROM candidates WHERE run_id = ?", (run_id,)).fetchone()[0]
            db.execute(
                "INSERT OR REPLACE INTO candidates (run_id, seq, candidate_id, strategy, parent, generation, status,"
                " reason, median_ms, speedup, payload, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, seq, e.candidate.id, e.candidate.strategy, e.candidate.parent, e.candidate.generation,
                 e.verdict.status.value, e.verdict.reason.value, e.timing.median_ms if e.timing else None,
                 e.speedup.ratio if e.speedup else None, json.dumps(e.to_json()), time.time()))

    def put_baselines(self, key: str, payload: dict[str, Any]) -> None:
        """Keep a baseline measurement for later runs of the same workload on the same device and software."""
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO baselines (key, created, payload) VALUES (?, ?, ?)",
                       (key, time.time(), json.dumps(payload)))

    def baselines(self, key: str) -> tuple[float, dict[str, Any]] | None:
        """(when it was measured, the payload) of a kept baseline measurement, or None."""
        with self._connect() as db:
            r = db.execute("SELECT created, payload FROM baselines WHERE key = ?", (key,)).fetchone()
        return (float(r[0]), json.loads(r[1])) if r else None

    def evaluations(self, run_id: str) -> list[dict[str, Any]]:
        """Evaluations of a run in the order they were made (Evaluation.to_json() documents)."""
        with self._connect() as db:
            rows = db.execute("SELECT payload FROM candidates WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def merge(self, other: str | Path) -> int:
        """Copy another store's records into this one (a suite's Ray task kept its own; the driver alone writes
        this one): results appended under new ids, candidates and baselines by their keys. Returns the results
        copied."""
        cols = ("created, kind, workload, workload_hash, candidate, candidate_hash, target, device, torch_version, "
                "triton_version, status, reason, summary, payload")
        db = self._connect()
        try:
            db.execute("ATTACH DATABASE ? AS other", (str(other),))
            with db:
                n = db.execute(f"INSERT INTO results ({cols}) SELECT {cols} FROM other.results").rowcount
                db.execute("INSERT OR REPLACE INTO candidates SELECT * FROM other.candidates")
                db.execute("INSERT OR REPLACE INTO baselines SELECT * FROM other.baselines")
            db.execute("DETACH DATABASE other")
        except sqlite3.Error as e:
            raise KernelgateError(f"cannot merge the store {other} into {self.path}: {e}", Reason.USAGE) from None
        finally:
            db.close()
        return int(n)

    # ------------------------------------------------------------ hints added to runs
    def add_hint(self, run_id: str, text: str, source: str | None = None) -> int:
        """Keep a hint for an optimize run; `hints(run_id)` gives them back to a later or resumed optimize."""
        with self._connect() as db:
            cur = db.execute("INSERT INTO hints (run_id, created, text, source) VALUES (?, ?, ?, ?)",
                             (run_id, time.time(), text, source))
            return int(cur.lastrowid)

    def hints(self, run_id: str) -> list[str]:
        """The hints added to a run, oldest first, each once (for optimize's `hints=`)."""
        with self._connect() as db:
            rows = db.execute("SELECT text FROM hints WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return list(dict.fromkeys(r[0] for r in rows))

    # ------------------------------------------------------------ the review queue
    def add_review(self, key: str, kind: str, subject: str, flags: list[str], evidence: dict[str, Any],
                   workload: str | None = None, workload_hash: str | None = None,
                   source: str | None = None) -> tuple[dict[str, Any], bool]:
        """Queue an item for a person (pending), once per key: (the item, whether it was new). An item already
        queued under the key is returned as it stands (its decision, if made, included)."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO reviews (key, created, kind, subject, workload, workload_hash, flags, evidence,"
                " source, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                (key, time.time(), kind, subject, workload, workload_hash, json.dumps(list(flags)),
                 json.dumps(evidence, default=str), source))
            new = cur.rowcount == 1
            row = db.execute(f"SELECT {', '.join(REVIEW_COLUMNS)} FROM reviews WHERE key = ?", (key,)).fetchone()
        return _review(row), new

    def reviews(self, status: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """Queued items, oldest first; only those of one status when given."""
        where, args = ("WHERE status = ?", (status,)) if status else ("", ())
        with self._connect() as db:
            rows = db.execute(f"SELECT {', '.join(REVIEW_COLUMNS)} FROM reviews {where} ORDER BY id LIMIT ?",
                              (*args, limit)).fetchall()
        return [_review(r) for r in rows]

    def review(self, item: int | str) -> dict[str, Any] | None:
        """One queued item by id (int) or key (str), or None."""
        col = "id" if isinstance(item, int) else "key"
        with self._connect() as db:
            row = db.execute(f"SELECT {', '.join(REVIEW_COLUMNS)} FROM reviews WHERE {col} = ?", (item,)).fetchone()
        return _review(row) if row else None

    def decide_review(self, item_id: int, status: str, note: str, by: str | None = None) -> dict[str, Any] | None:
        """Record a person's decision on a pending item (time, who, note). Returns the item as it now stands, or
        None when there is no such item; an item decided before keeps its decision (check `status`)."""
        if status not in REVIEW_STATUSES[1:]:
            raise ValueError(f"a decision is accepted or rejected, not {status!r}")
        with self._connect() as db:
            db.execute("UPDATE reviews SET status = ?, decided = ?, decided_by = ?, note = ? "
                       "WHERE id = ? AND status = 'pending'", (status, time.time(), by, note, item_id))
        return self.review(item_id)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.recent(limit=1 << 30))


def _review(row: tuple) -> dict[str, Any]:
    d = dict(zip(REVIEW_COLUMNS, row))
    d["flags"] = json.loads(d["flags"])
    d["evidence"] = json.loads(d["evidence"])
    return d
