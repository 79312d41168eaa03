"""What the gateway learned about how to reach a server, kept in the data dir across restarts.

Two facts, each learned the hard way by one failed attempt: a server that asks its client mid-call
needs a session that can carry its questions (`needs_session`: the handshake era, and, for a client that
can answer what a shared session never told the server, a session of that client's own; the call that
found out is made again there, or the client is told to call again), and a server that refused the
handshake speaks 2026-07-28 only (`discover_first`). Forgotten at exit, the first call after every start
would fail the same way again. Facts are keyed by the server's name and
config fingerprint, so a changed command or URL starts with nothing learned.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from mcp_manifold._config import ServerConfig
from mcp_manifold._runtime.state_file import JsonStateFile

Fact = Literal["needs_session", "discover_first"]
FILE_NAME = "learned.json"


class LearnedFacts:
    """The facts of one data dir: read once, written whenever one is learned."""

    def __init__(self, data_dir: str | Path) -> None:
        self._file = JsonStateFile(Path(data_dir).expanduser() / FILE_NAME)
        self._facts: dict[str, list[str]] | None = None

    def knows(self, config: ServerConfig, fact: Fact) -> bool:
        return fact in self._all().get(fact_key(config), [])

    def learn(self, config: ServerConfig, fact: Fact) -> None:
        facts = self._all()
        known = facts.setdefault(fact_key(config), [])
        if fact not in known:
            known.append(fact)
            self._file.save(facts)

    def forget(self, config: ServerConfig) -> None:
        """Drop what was learned of a server that is gone for good (a hub instance under a generated id): no
        server is reached by that name again, and each kept its entry for good."""
        facts = self._all()
        if facts.pop(fact_key(config), None) is not None:
            self._file.save(facts)

    def _all(self) -> dict[str, list[str]]:
        if self._facts is None:
            loaded = self._file.load()
            self._facts = loaded if isinstance(loaded, dict) else {}
        return self._facts


_BY_DIR: dict[str, LearnedFacts] = {}


def learned_facts(data_dir: str | Path) -> LearnedFacts:
    """The one `LearnedFacts` of `data_dir` in this process (backends of a gateway share it)."""
    key = str(Path(data_dir).expanduser())
    if key not in _BY_DIR:
        _BY_DIR[key] = LearnedFacts(key)
    return _BY_DIR[key]


def fact_key(config: ServerConfig) -> str:
    """What a server's facts are kept under, here and in the replicas' shared set (`shared_state/learned.py`)."""
    return hashlib.sha256(f"{config.name}\0{config.fingerprint()}".encode()).hexdigest()[:24]
