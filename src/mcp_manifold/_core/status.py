"""A backend's state as the rest of the gateway reads it: for `manifold servers`, errors and surfaces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcp_manifold._core.breaker import BreakerState

State = Literal["stopped", "starting", "ready", "failed", "disabled"]


@dataclass
class BackendStatus:
    """A snapshot for `manifold servers` and error messages."""

    name: str
    transport: str
    state: State
    last_error: str | None
    restarts: int
    pid: int | None
    tools: int
    stderr_tail: list[str]
    server_info: str | None
    retry_in: float | None
    breaker: BreakerState = "closed"  # closed, open (calls fail fast) or half-open (one trial call)
    breaker_retry_in: float | None = None  # while open: seconds until the trial call
    protocol: str | None = None  # the protocol version the running session speaks (2026-07-28: no session)
    # An OAuth server whose tokens stopped working while it ran: "ready", yet each call is refused until
    # `manifold auth login NAME` stores tokens it takes (the next call or ping then uses them and clears this).
    needs_login: bool = False
