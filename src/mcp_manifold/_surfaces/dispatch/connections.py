"""Connection ids and aliases for the `dispatch` surface (Mini-A's `c1`, `c2`, ...).

Each configured server gets an id, a hash of its config with every secret already redacted (so the
id cannot be used to guess a short secret, and rotating a token keeps the id), and an alias `cN`.
Aliases are kept in `connections.json` in the data dir, keyed by id, so the same config gets the
same alias after a restart, and a server that is removed and added back gets its old one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_manifold._config import ServerConfig
from mcp_manifold._core.suggestions import quoted
from mcp_manifold._errors import NotFound

if TYPE_CHECKING:
    from mcp_manifold._surfaces.base import StateFile

ALIASES_FILE = "connections.json"
_ALIAS = re.compile(r"c([1-9][0-9]*)\Z")
_HIDDEN = "***"


def connection_id(config: ServerConfig) -> str:
    """A short stable hash of what the server is, computed without its secrets."""
    text = json.dumps(config.redacted(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Connection:
    """One configured server as the dispatch surface names it."""

    alias: str
    id: str
    config: ServerConfig

    @property
    def server(self) -> str:
        return self.config.name

    def describe(self) -> dict[str, Any]:
        """What a listing may show: names and the target, never env values, headers or URL secrets."""
        shown = self.config.redacted()
        described: dict[str, Any] = {
            "alias": self.alias,
            "id": self.id,
            "name": self.server,
            "transport": self.config.transport,
        }
        if self.config.transport == "stdio":
            described["command"] = " ".join([shown["command"] or "", *shown["args"]]).strip()
        else:
            described["url"] = shown["url"]
        return described

    def scrub(self, text: str) -> str:
        """`text` (an error message, a stderr line) with this server's secret values replaced by ***."""
        return self.config.scrub(text)


class Connections:
    """Every configured server with its id and alias; aliases persist in `directory`."""

    def __init__(self, configs: Iterable[ServerConfig], state: StateFile | None) -> None:
        self._state = state  # where aliases are remembered; None: for this run only
        self._known = self._load()  # id -> alias, including servers no longer configured
        self._by_server: dict[str, Connection] = {}
        self._dirty = False
        for config in configs:
            self._add(config)
        self._save_if_changed()

    def get(self, config: ServerConfig) -> Connection:
        """The connection of a server, giving it an id and alias if it has none yet (one added at run time)."""
        connection = self._by_server.get(config.name)
        if connection is None or connection.config != config:
            connection = self._add(config)
            self._save_if_changed()
        return connection

    def _add(self, config: ServerConfig) -> Connection:
        ident = connection_id(config)
        if any(c.id == ident for c in self._by_server.values() if c.server != config.name):
            # Two entries with the same target: the name tells them apart.
            ident = hashlib.sha256(f"{ident}:{config.name}".encode()).hexdigest()[:12]
        alias = self._known.get(ident)
        if alias is None:
            alias = _next_alias(set(self._known.values()))
            self._known[ident] = alias
            self._dirty = True
        connection = Connection(alias, ident, config)
        self._by_server[config.name] = connection
        return connection

    def __iter__(self) -> Iterator[Connection]:
        return iter(sorted(self._by_server.values(), key=lambda c: int(c.alias[1:])))

    def __len__(self) -> int:
        return len(self._by_server)

    def resolve(self, ref: str, visible: Callable[[str], bool] | None = None) -> Connection:
        """The connection named by its alias (`c1`), its id or its server name, among those whose server
        is `visible` (the caller's profile): one it may not use is unknown, and never listed."""
        return resolve_connection([c for c in self if visible is None or visible(c.server)], ref)

    # --- persistence -------------------------------------------------------------------------

    def _load(self) -> dict[str, str]:
        data = self._state.load() if self._state is not None else None
        if not isinstance(data, dict):
            return {}
        known: dict[str, str] = {}
        for key, value in data.items():
            # A hand-edited file may repeat an alias: the first id keeps it, the other gets a new one.
            if isinstance(value, str) and _ALIAS.match(value) and value not in known.values():
                known[str(key)] = value
        return known

    def _save_if_changed(self) -> None:
        if self._state is None or not self._dirty:
            return
        self._dirty = False
        self._state.save(self._known)  # on failure aliases still work for this run, just not remembered


def resolve_connection(shown: Iterable[Connection], ref: str) -> Connection:
    """The connection of `shown` (what the caller may use) named by its alias (`c1`), id or server name."""
    shown = list(shown)
    for connection in shown:
        if ref in (connection.alias, connection.id, connection.server):
            return connection
    known = ", ".join(f"{c.alias} ({c.server})" for c in shown)
    raise NotFound(f"unknown connection {quoted(ref)}; known connections: {known or 'none'}")


def _next_alias(taken: set[str]) -> str:
    number = 1
    while f"c{number}" in taken:
        number += 1
    return f"c{number}"
