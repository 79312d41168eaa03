"""Results from servers of other SDKs, read as the specification means them.

Some SDKs answer at 2026-07-28 without the fields the schema makes required but whose absence has one
meaning: no `resultType` is a complete result (the schema says so), and a cacheable result without
`ttlMs` or `cacheScope` is one nobody promised to keep (the SDK's own defaults: stale at once, private).
The gateway fills them in once, where an answer comes back from a server, and says which it filled; the
rest of the gateway (the SDK's strict validator included) sees a result that is valid MCP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types.methods import CACHEABLE_METHODS

# What an absent field means, per the 2026-07-28 schema and the SDK's defaults.
_COMPLETE = {"resultType": "complete"}
_UNCACHED = {"ttlMs": 0, "cacheScope": "private"}


def completed_result(method: str, raw: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`raw` (a server's 2026-07-28 answer to `method`) with its missing meaning-fixed fields filled in,
    and the names of the fields filled (empty when it was complete, and then `raw` comes back as is)."""
    kind = raw.get("resultType")
    if kind is not None and (method not in CACHEABLE_METHODS or kind != "complete" or _UNCACHED.keys() <= raw.keys()):
        return dict(raw) if not isinstance(raw, dict) else raw, ()  # complete already: the common case, quickly
    defaults = dict(_COMPLETE)
    if method in CACHEABLE_METHODS and raw.get("resultType", "complete") == "complete":
        defaults.update(_UNCACHED)
    missing = tuple(key for key in defaults if key not in raw)
    if not missing:
        return dict(raw) if not isinstance(raw, dict) else raw, ()
    return {**raw, **{key: defaults[key] for key in missing}}, missing
