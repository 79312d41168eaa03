"""The client extensions (SEP-2133) a session shared by several clients may declare: what all of them declare.

A session-era server reads its client's extensions once, in the handshake, and shapes every later answer
by them (an Apps server sends its app only to a client that renders apps). A session the gateway shares
between clients must therefore promise only what every one of them supports. Its clients are the
gateway's: each session-era client from its handshake until it goes away, and each kind of 2026-07-28
client (the extensions it sends with its requests) for `remember_for` seconds after its latest request,
since such a client has no session whose end would say it left.

`common()` is read on every request to a shared session-era session, so it answers from a cache that
changes only when a client comes, goes, or a 2026-07-28 kind is forgotten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from mcp_manifold._core.clients import Caller

_NOTHING = object()  # settings with nothing in common
_PRUNE_EVERY = 1.0  # seconds between looks for 2026-07-28 kinds of client to forget
MAX_KINDS = 64  # 2026-07-28 kinds of client kept apart; older ones are merged into one (`_MERGED`)
_MERGED = "\0merged"  # no repr() of extensions looks like this


def common_settings(values: list[Any]) -> Any:
    """What several clients' settings of one extension have in common: the keys all maps have (each with
    its common part), the items all lists have (in the first one's order), a value all share; or
    `_NOTHING`."""
    first, rest = values[0], values[1:]
    if all(isinstance(value, Mapping) for value in values):
        shared = {}
        for key in first:
            if all(key in value for value in rest):
                part = common_settings([value[key] for value in values])
                if part is not _NOTHING:
                    shared[key] = part
        return shared
    if all(isinstance(value, list) for value in values):
        return [item for item in first if all(item in value for value in rest)]
    return first if all(value == first for value in rest) else _NOTHING


def intersect(declared: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The extensions every map in `declared` names, with their common settings; None when none (or no map)."""
    if not declared:
        return None
    common: dict[str, Any] = {}
    for identifier in declared[0]:
        if all(identifier in other for other in declared[1:]):
            shared = common_settings([extensions[identifier] for extensions in declared])
            common[identifier] = shared if shared is not _NOTHING else {}
    return common or None


class CommonExtensions:
    """The extensions the gateway's current clients all declare, for its shared session-era sessions."""

    def __init__(self, remember_for: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.remember_for = remember_for
        self._clock = clock
        self._sessions: dict[str, Mapping[str, Any]] = {}  # session-era client key -> its extensions
        self._recent: dict[str, tuple[Mapping[str, Any], float]] = {}  # 2026-07-28 kind -> (extensions, last seen)
        self._common: dict[str, Any] | None = None
        self._stale = False
        self._next_prune = 0.0

    def client_arrived(self, caller: Caller) -> None:
        """A session-era client finished its handshake: it counts until it goes away."""
        key = caller.key
        self._sessions[key] = dict(caller.extensions or {})
        self._stale = True
        caller.on_close(lambda: self._session_gone(key))

    def _session_gone(self, key: str) -> None:
        if self._sessions.pop(key, None) is not None:
            self._stale = True

    def stateless_request(self, caller: Caller) -> None:
        """A 2026-07-28 client made a request: its kind counts for `remember_for` seconds from now."""
        extensions = caller.extensions
        # Its kind: what it declared, spelled out (repr: a fifth of json.dumps's cost, on every request; the
        # same extensions in another order are another kind, which changes nothing in common).
        kind = repr(extensions) if extensions else ""
        now = self._clock()
        if kind not in self._recent:
            self._stale = True
            while len(self._recent) >= MAX_KINDS:
                self._merge_oldest()
        self._recent[kind] = (extensions or {}, now)

    def _merge_oldest(self) -> None:
        """Keep the table small whatever clients send: the oldest kind joins one merged kind, which holds what
        the merged ones have in common (so the intersection is unchanged) and is kept as long as the newest."""
        oldest = min((kind for kind in self._recent if kind != _MERGED), key=lambda kind: self._recent[kind][1])
        extensions, seen = self._recent.pop(oldest)
        if _MERGED in self._recent:
            merged, merged_seen = self._recent[_MERGED]
            extensions, seen = intersect([merged, extensions]) or {}, max(seen, merged_seen)
        self._recent[_MERGED] = (extensions, seen)

    def common(self) -> dict[str, Any] | None:
        """What every current client declares (identifier -> common settings); None when nothing, or no client."""
        now = self._clock()
        if now >= self._next_prune:
            self._next_prune = now + _PRUNE_EVERY
            forgotten = [kind for kind, (_, seen) in self._recent.items() if now - seen > self.remember_for]
            for kind in forgotten:
                del self._recent[kind]
            self._stale = self._stale or bool(forgotten)
        if self._stale:
            self._stale = False
            declared = [*self._sessions.values(), *(extensions for extensions, _ in self._recent.values())]
            self._common = intersect(declared)
        return self._common
