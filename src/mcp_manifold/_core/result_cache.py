"""Reuse of tool results: opt-in per server (`cache_ttl`), only for tools that say it is safe.

A result is cached when its server has `cache_ttl` > 0 and the tool is annotated `readOnlyHint`
or `idempotentHint`; the key is the server, the tool's original name and the arguments as
canonical JSON. Errors are never cached. Plain code with an injectable clock; the gateway asks
`lookup` before a call and hands the answer to `store` after it.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import mcp_types as types

from mcp_manifold._core.catalog import Catalog, Kind

MAX_ENTRIES = 512
MAX_ENTRY_BYTES = 1024 * 1024  # a bigger result is not worth holding in memory


def cacheable(tool: types.Tool) -> bool:
    """Whether the tool says calling it again with the same arguments gives the same kind of answer."""
    annotations = tool.annotations
    return annotations is not None and bool(annotations.read_only_hint or annotations.idempotent_hint)


class CachedServer(Protocol):
    """What the cache needs of a server's config: how long its results may be reused (0: never)."""

    @property
    def cache_ttl(self) -> float: ...


class ResultCache:
    """Results of cacheable tools, each kept for its server's `cache_ttl` seconds."""

    def __init__(
        self,
        catalog: Catalog,
        servers: Mapping[str, CachedServer],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.catalog = catalog
        self.clock = clock
        self.max_entries = max_entries
        self._ttls: dict[str, float] = {}
        self._entries: OrderedDict[tuple[str, str, str], tuple[float, types.CallToolResult]] = OrderedDict()
        self._policy: dict[tuple[str, str], float] | None = None  # (server, tool) -> ttl, rebuilt on change
        self._subscribed = False
        self.hits = 0
        self.configure(servers)

    def configure(self, servers: Mapping[str, CachedServer], restarted: frozenset[str] = frozenset()) -> None:
        """Take the servers' `cache_ttl`s (again, after a config reload); results of servers that are no
        longer cached, changed their ttl or were `restarted` are dropped."""
        ttls = {name: config.cache_ttl for name, config in servers.items() if config.cache_ttl}
        stale = {name for name in self._ttls if ttls.get(name) != self._ttls[name]} | restarted
        if stale:
            for key in [key for key in self._entries if key[0] in stale]:
                del self._entries[key]
        self._ttls = ttls
        self._policy = None
        if ttls and not self._subscribed:
            self.catalog.subscribe(self._on_change)
            self._subscribed = True

    def _on_change(self, kinds: set[Kind]) -> None:
        if "tools" in kinds:
            self._policy = None

    def ttl(self, server: str, tool: str) -> float | None:
        """Seconds a result of `tool` (its original name) on `server` may be reused; None: not cached."""
        if server not in self._ttls:
            return None  # the common case, answered without looking at the catalog
        if self._policy is None:
            self._policy = {
                (entry.server, entry.original.name): self._ttls[entry.server]
                for entry in self.catalog.tool_entries()
                if entry.server in self._ttls and cacheable(entry.original)
            }
        return self._policy.get((server, tool))

    def lookup(self, server: str, tool: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult | None:
        if self.ttl(server, tool) is None:
            return None
        key = _key(server, tool, arguments)
        found = self._entries.get(key)
        if found is None:
            return None
        expires, result = found
        if self.clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return result

    def store(self, server: str, tool: str, arguments: Mapping[str, Any] | None, result: types.CallToolResult) -> None:
        ttl = self.ttl(server, tool)
        if ttl is None or result.is_error or _approximate_size(result) > MAX_ENTRY_BYTES:
            return
        key = _key(server, tool, arguments)
        self._entries[key] = (self.clock() + ttl, result)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)  # least recently used first


def _key(server: str, tool: str, arguments: Mapping[str, Any] | None) -> tuple[str, str, str]:
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), default=str)
    return server, tool, canonical


def _approximate_size(result: types.CallToolResult) -> int:
    size = 0
    for block in result.content:
        size += len(getattr(block, "text", "") or "") + len(getattr(block, "data", "") or "")
    return size
