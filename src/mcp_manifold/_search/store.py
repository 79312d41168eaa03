"""SQLite persistence: the last known catalog and its embeddings, so a restart re-embeds nothing unchanged.

Two tables do the work: `documents` (exposed key → content hash and the document itself, so the
index can answer searches before the servers are back) and `embeddings` (vector space and content
hash → float32 vector). Vectors are keyed by content hash and kept for `VECTOR_RETENTION_S` after
their last use, so a server that is down for a while (its tools drop out of the catalog) finds its
vectors again when it comes back.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from mcp_manifold._files import private_file
from mcp_manifold._search.documents import ToolDocument

SCHEMA_VERSION = "1"
VECTOR_RETENTION_S = 30 * 24 * 3600.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    key TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS embeddings (
    space TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    last_used REAL NOT NULL,
    PRIMARY KEY (space, content_hash)
);
"""


class IndexStore:
    """One SQLite file; safe to share between threads (a lock serialises access)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        private_file(self.path)  # 0600, and so its -wal and -shm files (SQLite gives them its mode)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        with self._lock:
            # WAL: a crash mid-write leaves the previous state readable.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            found = self._db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
            if found is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif found[0] != SCHEMA_VERSION:
                raise RuntimeError(f"{self.path}: search index schema {found[0]}, this version reads {SCHEMA_VERSION}")

    # --- documents ---------------------------------------------------------------------------

    def load_documents(self) -> list[ToolDocument]:
        with self._lock:
            rows = self._db.execute("SELECT document FROM documents ORDER BY key").fetchall()
        return [ToolDocument.from_json(raw) for (raw,) in rows]

    def write_documents(self, upsert: Iterable[ToolDocument], remove: Iterable[str]) -> None:
        """Add or replace `upsert` and delete the keys in `remove`, in one transaction."""
        rows = [(d.key, d.content_hash(), d.to_json()) for d in upsert]
        gone = [(key,) for key in remove]
        with self._lock, self._transaction():
            self._db.executemany("DELETE FROM documents WHERE key = ?", gone)
            self._db.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?, ?)", rows)

    # --- embeddings --------------------------------------------------------------------------

    def load_vectors(self, space: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Stored vectors of `space` for those of `hashes` that have one."""
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT content_hash, dim, vector FROM embeddings WHERE space = ? AND content_hash IN ({marks})",
                    (space, *chunk),
                ).fetchall()
                for content_hash, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype="<f4")
                    if vector.shape == (dim,):  # a truncated blob is treated as missing and re-embedded
                        found[content_hash] = vector.astype(np.float32)
        return found

    def save_vectors(self, space: str, vectors: Mapping[str, np.ndarray]) -> None:
        now = time.time()
        rows = [(space, h, int(v.shape[0]), np.asarray(v, dtype="<f4").tobytes(), now) for h, v in vectors.items()]
        with self._lock, self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)

    def mark_used(self, space: str, hashes: Iterable[str]) -> None:
        """Note that these vectors are in use now, which restarts their retention period."""
        now = time.time()
        with self._lock, self._transaction():
            self._db.executemany(
                "UPDATE embeddings SET last_used = ? WHERE space = ? AND content_hash = ?",
                [(now, space, h) for h in hashes],
            )

    def prune_vectors(self, retention_s: float = VECTOR_RETENTION_S) -> int:
        """Drop vectors unused for `retention_s` seconds; returns how many went."""
        with self._lock, self._transaction():
            cursor = self._db.execute("DELETE FROM embeddings WHERE last_used < ?", (time.time() - retention_s,))
            return cursor.rowcount

    # --- metadata ----------------------------------------------------------------------------

    def get_meta(self, name: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN … COMMIT, or ROLLBACK on error (the connection runs in autocommit mode otherwise)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
