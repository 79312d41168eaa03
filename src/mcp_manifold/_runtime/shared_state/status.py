"""Every replica's row, for `manifold servers` and the dashboard (`state_url` set): id, address, when it was
last seen, its servers' states and its clients. Read from the heartbeats the replicas write
(`replicas.py`); a replica that stopped beating for `STALE` seconds is left out."""

from __future__ import annotations

from typing import Any

from mcp_manifold._runtime.shared_state.replicas import ReplicaDirectory
from mcp_manifold._runtime.shared_state.store import StateStore


async def replica_rows(state_url: str) -> list[dict[str, Any]]:
    """The live replicas' rows, sorted by id; raises `StateUnavailable` when the store cannot be reached."""
    store = StateStore(state_url, "status", announce=False)
    try:
        return await ReplicaDirectory(store, "", None, dict).rows()
    finally:
        await store.close()
