"""The web dashboard at /ui: one static page (no build step, nothing from a CDN) over a small JSON API.

The page (`dashboard_static/`) polls the API about once a second and redraws in place:

- `GET /ui/api/overview`: the gateway, every server (state, health, restarts, breaker, protocol, last
  error, stderr tail, tools), its clients by protocol era (as `manifold servers` shows them), the
  catalog's revision, the config check and the last reloads;
- `GET /ui/api/tools`: every tool as exposed, with its server and its pin (quarantined or not; "unpinned"
  for one listed past `pin_max_tools`), lazy servers started and listed first;
- `GET /ui/api/search?q=...&limit=N`: tools ranked as `retrieve_tools` ranks them (`Gateway.search`), as
  the gateway's own work for the caller (kind "action": its principal's rate and calls in flight, audited);
- `GET /ui/api/calls?after=N`: the calls the call path saw since number N (`RecentCalls`).

It only reads: nothing here changes the gateway, so it needs no CSRF guard. Who may read it: the
overview and the calls are for operators (`_front/operators.py`; 403 for anyone else); the tools and
the search answer everyone, an operator with the whole catalog and anyone else with its own view,
as its `tools/list` shows it (only what its profile allows, nothing quarantined). Authentication is
the HTTP front's business (`_front/http.py`); the page itself holds no data, and when the API answers
401 it asks for a token and sends it as a bearer token.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import deque
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response

from mcp_manifold._config import MAX_SEARCH_LIMIT, check_config
from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.clients import Caller
from mcp_manifold._core.clients import Request as CallerRequest
from mcp_manifold._core.router import Target
from mcp_manifold._errors import RateLimited
from mcp_manifold._front.identity import request_identity
from mcp_manifold._front.operators import OperatorsOnly
from mcp_manifold._runtime.call_path import CallRecord
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._version import __version__

RECENT_CALLS = 200
SEARCH = Target("", "search", "dashboard", "")  # the search as audit lines and metrics name it (kind action)
_STATIC = resources.files("mcp_manifold._front") / "dashboard_static"
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}
# The page loads its own script and style and nothing else; no inline code runs.
_CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


class RecentCalls:
    """The last calls the call path saw, numbered, for the dashboard (an observer: no arguments, no content).

    Each call is kept as it came (its number, time and record) and described only when the dashboard asks:
    a call costs an append, not a dict the dashboard may never read."""

    def __init__(self, size: int = RECENT_CALLS) -> None:
        self._calls: deque[tuple[int, float, CallRecord]] = deque(maxlen=size)
        self._count = 0

    def __call__(self, record: CallRecord) -> None:
        self._count += 1
        self._calls.append((self._count, time.time(), record))

    @property
    def last(self) -> int:
        """The number of the latest call (0 before any)."""
        return self._count

    def since(self, after: int) -> list[dict[str, Any]]:
        return [_described(number, at, record) for number, at, record in self._calls if number > after]


def _described(number: int, at: float, record: CallRecord) -> dict[str, Any]:
    target = record.target
    return {
        "n": number,
        "at": at,
        "kind": record.kind,
        "name": target.exposed,
        "server": target.server,
        "surface": target.surface,
        "ms": round(record.duration * 1000, 2),
        "outcome": record.outcome,
        "error": record.error,
    }


class ConfigCheck:
    """`manifold config check` of the served file (with the serve command's flags), redone when it changes."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._seen: tuple[Any, ...] | None = None
        self._result: dict[str, Any] = {}

    async def result(self) -> dict[str, Any]:
        config = self.gateway.config
        path = config.path
        if path is None:
            return {"path": None, "ok": True, "problems": [], "note": "no config file: servers from flags only"}
        try:
            stat = Path(path).stat()
            seen: tuple[Any, ...] = (stat.st_mtime_ns, stat.st_size)
        except OSError as exc:
            seen = (str(exc),)
        if seen != self._seen:
            problems = await anyio.to_thread.run_sync(lambda: check_config(path, overrides=config.overrides))
            self._seen = seen
            self._result = {
                "path": str(path),
                "ok": not problems,
                "problems": [str(problem) for problem in problems],
                "checked_at": time.time(),
            }
        return self._result


class Dashboard:
    """The /ui app of one gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.calls = RecentCalls()
        self.config_check = ConfigCheck(gateway)
        self.revision = 0  # bumped on every catalog change, so the page knows to fetch the tools again
        self._detach: list[Callable[[], None]] = []

    def attach(self) -> Callable[[], None]:
        """Start watching calls and catalog changes; returns a function that stops it."""
        self._detach.append(self.gateway.calls.observe(self.calls))
        self._detach.append(self.gateway.catalog.subscribe(self._catalog_changed))

        def detach() -> None:
            for stop in self._detach:
                stop()
            self._detach.clear()

        return detach

    def _catalog_changed(self, kinds: set[str]) -> None:
        self.revision += 1

    def page_app(self) -> Starlette:
        """The page itself (/ui/): HTML, script and style, the same for everyone; it holds no data."""
        return Starlette(routes=[Route("/", self.page), Route("/{name:str}", self.static)])

    def api_app(self) -> Starlette:
        """The JSON API (/ui/api/...): everything the page shows comes from here."""
        routes = [
            Route("/overview", OperatorsOnly(request_response(self.overview)), methods=["GET"]),
            Route("/tools", self.tools),
            Route("/search", self.search),
            Route("/calls", OperatorsOnly(request_response(self.recent_calls)), methods=["GET"]),
        ]
        return Starlette(routes=routes)

    # --- the page -------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        return _static("dashboard.html")

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ("dashboard.js", "dashboard.css"):
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        return _static(name)

    # --- the API --------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        gateway = self.gateway
        snapshot = gateway.live_snapshot()
        reloader = gateway.reloader
        return _json(
            {
                "gateway": {
                    "version": __version__,
                    "started_at": gateway.started_at,
                    "uptime": time.time() - gateway.started_at,
                    "expose": snapshot["expose"],
                    "tools": len(gateway.catalog.tool_entries()),
                    "revision": self._tools_revision(),
                    "clients": snapshot["clients"],
                    "last_call": self.calls.last,
                },
                "servers": snapshot["servers"],
                "instances": snapshot["instances"],
                "replicas": await gateway.replica_rows(),  # every replica's row when they share state
                "config": {
                    **await self.config_check.result(),
                    "watching": bool(reloader and reloader.watch),
                    "reloads": [outcome.as_dict() for outcome in reversed(reloader.history)] if reloader else [],
                },
            }
        )

    def _view(self, request: Request) -> CatalogView | None:
        """What the caller may see: None (everything) for an operator, else its own view, as `tools/list` has it."""
        identity = request_identity(request)
        if identity is not None and identity.operator:
            return None
        return self.gateway.view(_caller(request))

    async def tools(self, request: Request) -> Response:
        # Lazy servers (the default) are started and listed first, as a client's `tools/list` has them:
        # otherwise a gateway nobody has used yet showed its operator an empty panel.
        await self.gateway.ensure_catalog()
        pins = self.gateway.pins
        unpinned = pins.unpinned()  # listed past pin_max_tools: pinned nowhere, held under enforce
        view = self._view(request)
        rows = []
        for entry in (view or self.gateway.catalog).tool_entries():
            pin = pins.get(entry.server, entry.original.name)
            state = pin.state if pin is not None else None  # None with `pinning: off`
            if pin is None and entry.original.name in unpinned.get(entry.server, ()):
                state = "unpinned"
            rows.append(
                {
                    "name": entry.name,
                    "server": entry.server,
                    "original": entry.original.name,
                    "description": entry.exposed.description or "",
                    "pin": state,
                    "quarantined": pins.blocked(entry.server, entry.original.name),
                }
            )
        # A non-operator's revision is its own rows': the gateway's moves with servers and pins it may not see.
        revision = self._tools_revision() if view is None else _rows_revision(rows)
        return _json({"revision": revision, "tools": rows})

    def _tools_revision(self) -> str:
        """Changes when the tools panel must be fetched again: the catalog changed, or a pin did (an
        operator's `manifold pins approve` in another process changes no listing)."""
        pins = self.gateway.pins
        states = frozenset((pin.key, pin.state) for pin in pins.pins())
        states |= {((server, tool), "unpinned") for server, tools in pins.unpinned().items() for tool in tools}
        return f"{self.revision}-{hash(states) & 0xFFFFFFFF:x}"

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        if not query:
            return _json({"error": "give a query: /ui/api/search?q=what you want to do"}, status=400)
        raw_limit = request.query_params.get("limit", str(self.gateway.settings.search_top_k))
        try:
            limit = int(raw_limit)
        except ValueError:
            return _json({"error": f"limit must be a whole number, not {raw_limit!r}"}, status=400)
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            return _json({"error": f"limit must be from 1 to {MAX_SEARCH_LIMIT}, not {limit}"}, status=400)
        await self.gateway.ensure_catalog()
        view = self._view(request)

        async def search() -> list[dict[str, Any]]:
            matches = await (view or self.gateway).search(query, limit=limit)
            return [
                {
                    "name": match.entry.name,
                    "server": match.entry.server,
                    "score": round(match.score, 4),
                    "description": match.entry.exposed.description or "",
                }
                for match in matches
            ]

        started = time.perf_counter()
        # The gateway's own work for a caller, as retrieve_tools' search is: within its principal's rate and
        # calls in flight, and audited. (A key over its limit searched here without end, a long query costing
        # the gateway a quarter of a second each.)
        try:
            rows = await self.gateway.calls.action(_caller(request), SEARCH, search)
        except RateLimited as exc:
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
            return _json({"error": "rate_limited", "error_description": str(exc)}, status=429, headers=headers)
        took = time.perf_counter() - started
        return _json({"query": query, "limit": limit, "ms": round(took * 1000, 2), "matches": rows})

    async def recent_calls(self, request: Request) -> Response:
        raw = request.query_params.get("after", "0")
        try:
            after = int(raw)
        except ValueError:
            return _json({"error": f"after must be a whole number, not {raw!r}"}, status=400)
        return _json({"calls": self.calls.since(after), "last": self.calls.last})


def _caller(request: Request) -> CallerRequest:
    """The dashboard's request as the gateway's caller: the principal and profile its credential holds."""
    identity = request_identity(request)
    principal, profile = (identity.principal, identity.profile) if identity is not None else (None, None)
    return CallerRequest(Caller("dashboard", principal=principal, profile=profile))


def _rows_revision(rows: list[dict[str, Any]]) -> str:
    """A revision of exactly these rows: it changes when they do, and with nothing else."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode("utf-8", "backslashreplace")).hexdigest()[:16]


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return _Json(data, status_code=status, headers={"Cache-Control": "no-store", **(headers or {})})


class _Json(JSONResponse):
    """JSON in UTF-8; with ASCII escapes when some text is no UTF-8 (a lone surrogate in an error a call
    record quotes, say), so that one odd record never breaks the page for every operator."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


def _static(name: str) -> Response:
    body = (_STATIC / name).read_bytes()
    media = _TYPES[Path(name).suffix]
    return Response(body, media_type=media, headers={"Content-Security-Policy": _CSP, "Cache-Control": "no-cache"})
