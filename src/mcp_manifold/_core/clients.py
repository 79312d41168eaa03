"""The gateway's clients as the rest of the gateway sees them: a `Caller`, and one `Request` of it.

Surfaces and the call path never touch the SDK's request context or connection: the front adapts
those (`front/server.py`), the fast lane and the CLI make their own. The base classes here are what
a caller with no back channel does (the CLI, a detached test): notifications go nowhere, and a
server's request for input gets a clear refusal.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Literal, get_args

import mcp_types as types

from mcp_manifold._core.bounded import BoundedTable

logger = logging.getLogger(__name__)

Era = Literal["session", "stateless"]  # session era (2025-11-25 and before) or 2026-07-28
ListKind = Literal["tools", "resources", "prompts"]
Ask = Literal["sampling", "elicitation", "roots"]  # what a server may ask a client for
ASKS: dict[str, Ask] = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
NO_ASKS: frozenset[Ask] = frozenset()
LOG_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)  # least severe first


def at_least(level: types.LoggingLevel, threshold: types.LoggingLevel | None) -> bool:
    """Whether a message of `level` passes a client's `threshold` (None: every level does)."""
    return threshold is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)


def most_verbose(levels: list[types.LoggingLevel | None]) -> types.LoggingLevel:
    """The lowest of `levels` (None counts as "debug": a client that set none gets every level)."""
    return min((level or "debug" for level in levels), key=LOG_LEVELS.index, default="debug")


CLIENT_FACTS = ("sampling", "elicitation", "roots", "extensions")  # what `Caller.askable` may hold


def merged_extensions(maps: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The extensions several servers declared, as one map (identifier -> settings): every identifier any
    of them declared, with the settings of the first that did (what the gateway tells its clients)."""
    merged: dict[str, Any] = {}
    for extensions in maps:
        for identifier, settings in (extensions or {}).items():
            merged.setdefault(identifier, settings)
    return merged


def asks_of(capabilities: types.ClientCapabilities | None) -> frozenset[Ask]:
    """What a client declared it can be asked for: sampling, elicitation, roots."""
    if capabilities is None:
        return NO_ASKS
    declared = {
        "sampling": capabilities.sampling is not None,
        "elicitation": capabilities.elicitation is not None,
        "roots": capabilities.roots is not None,
    }
    return frozenset(ask for ask, present in declared.items() if present)  # type: ignore[misc]


def undeclared(capabilities: types.ClientCapabilities | None, method: str) -> types.ErrorData | None:
    """The refusal a server gets for asking a client what it did not declare (`sampling/createMessage`
    of a client without sampling), or None when the client declared it. A client is never sent a request
    it did not declare."""
    ask = ASKS.get(method)
    if ask is None or ask in asks_of(capabilities):
        return None
    return types.ErrorData(
        code=types.METHOD_NOT_FOUND, message=f"the client did not declare the {ask} capability: {method} is not sent"
    )


# The facts of capabilities objects seen lately, by identity (each held, so its id is not reused while
# kept): a 2026-07-28 client is a new caller on every request, with the same capabilities object each time
# (`McpFront` types each form once), so its facts are worked out once, not per request.
_FACTS_KEPT = 256
_facts_seen: BoundedTable[int, tuple[Any, frozenset[Ask], Mapping[str, Any]]] = BoundedTable(_FACTS_KEPT)


def _facts_of(capabilities: Any) -> tuple[Any, frozenset[Ask], Mapping[str, Any]]:
    """(capabilities, what a server may ask of such a client, what it is told it may ask)."""
    known = _facts_seen.get(id(capabilities))
    if known is not None and known[0] is capabilities:
        return known
    asks = asks_of(capabilities)
    dumped = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True) if capabilities else {}
    told: dict[str, Any] = {ask: dumped[ask] for ask in asks}
    if dumped.get("extensions"):
        told["extensions"] = dumped["extensions"]
    known = (capabilities, asks, MappingProxyType(told))
    if capabilities is not None:
        _facts_seen.keep(id(capabilities), known)
    return known


# True while the work a front left until after a call's answer (`Request.after_answer`) runs: what it
# records may be written a moment later still (the audit log gathers such lines; others go out at once).
AFTER_ANSWER: ContextVar[bool] = ContextVar("manifold_after_answer", default=False)


def run_after_answer(work: Iterable[Callable[[], object]]) -> None:
    """Do the work a front left until the client had its answer (`Request.after_answer`), in order."""
    token = AFTER_ANSWER.set(True)
    try:
        for item in work:
            item()
    finally:
        AFTER_ANSWER.reset(token)


_keys = itertools.count(1)


def no_client_to_answer(method: str) -> types.ErrorData:
    """The refusal a server gets when no client can answer its request."""
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"no client connected to answer {method}")


class Caller:
    """One client: a session-era session (stdio, one HTTP session), or a 2026-era client identity.

    `state` is per-client scratch state that lives as long as the client (what a surface remembers
    between calls: a search's registered tools, the hub instance it is connected to).

    `principal` is who authenticated (an API key's principal, a token's subject), None for a client
    that did not (stdio, loopback HTTP); `profile` the name of the profile that says what it may see
    and use, None for the gateway's `profile` setting (or everything); `claims` the token's claims (None
    for an API key), with which the principal held that profile; `key_digest` the SHA-256 (hex) of the API
    key it came with, so that work it started ends when a reload removes that key. The front sets them.
    """

    era: Era = "session"
    principal: str | None = None
    profile: str | None = None
    claims: Mapping[str, Any] | None = None
    key_digest: str | None = None
    # Whether the gateway can tell this client's requests from others' (a session, an authenticated
    # principal): only then may it have sessions of its own to servers.
    identified = False
    # What a session-era client set with logging/setLevel: it is sent messages of that level and above
    # (None: every level). Its own, never another client's.
    log_level: types.LoggingLevel | None = None

    def __init__(self, key: str | None = None, *, principal: str | None = None, profile: str | None = None) -> None:
        self.key = key or f"caller-{next(_keys)}"
        self.state: dict[str, Any] = {}
        self._on_close: list[Callable[[], object]] = []
        if principal is not None:
            self.principal = principal
        if profile is not None:
            self.profile = profile

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        """What the client declared it can do (sampling, elicitation, roots); None when unknown."""
        return None

    @property
    def asks(self) -> frozenset[Ask]:
        """What a server may ask this client for (from `capabilities`)."""
        return self._ask_facts()[0]

    @property
    def askable(self) -> Mapping[str, Any]:
        """The same, as 2026-07-28 client capabilities (`sampling`, `elicitation`, `roots`): what a server is
        told it may ask, since the gateway relays such questions to this client in its own era; and the
        client's `extensions` (SEP-2133), which a server reads to shape its answers (an Apps server sends
        its app only to a client that renders apps)."""
        return self._ask_facts()[1]

    @property
    def extensions(self) -> Mapping[str, Any] | None:
        """The extensions this client declared (identifier -> settings), None when none."""
        return self._ask_facts()[1].get("extensions")

    # Worked out once per capabilities object rather than on every call that reads them.
    _asks_of: tuple[Any, frozenset[Ask], Mapping[str, Any]] | None = None

    def _ask_facts(self) -> tuple[frozenset[Ask], Mapping[str, Any]]:
        capabilities = self.capabilities
        known = self._asks_of
        if known is None or known[0] is not capabilities:
            known = self._asks_of = _facts_of(capabilities)
        return known[1], known[2]

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run `callback` when the client goes away (hang-up, session end or expiry)."""
        self._on_close.append(callback)

    def close(self) -> None:
        """The client went away: run what was registered with `on_close`, newest first."""
        callbacks, self._on_close = self._on_close, []
        for callback in reversed(callbacks):
            try:
                callback()
            except Exception:  # one failing cleanup must not skip the others
                logger.exception("cleanup after client %s failed", self.key)

    async def notify_list_changed(self, kinds: set[ListKind]) -> None:
        """Tell this client that the lists of `kinds` changed (best effort)."""

    async def send_resource_updated(self, uri: str) -> None:
        """Tell this client that the resource `uri` changed (best effort)."""

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        """A log message to this client, outside any request (best effort)."""

    async def ask(self, method: str, params: Any) -> Any:
        """Put a server's request to this client outside any call of its; an `ErrorData` if it cannot be."""
        return no_client_to_answer(method)


class Request:
    """One inbound request of a `Caller`: its `_meta`, and the ways back to the client while it runs."""

    def __init__(self, caller: Caller, meta: Mapping[str, Any] | None = None) -> None:
        self.caller = caller
        self.meta = meta
        # A 2026-07-28 client's retry of a call that answered `input_required`: its answers, and the
        # gateway's state it echoes (unsealed by the front).
        self.input_responses: dict[str, Any] | None = None
        self.request_state: str | None = None
        # A server put a question to this request's client while serving it: the result may depend on the
        # answer, so it is not one to reuse for another client.
        self.asked = False
        # What the address the client used names (an HTTP endpoint such as /mcp/instances/<instance_id>).
        self.endpoint: Mapping[str, str] = {}
        # Work that may wait until the client has its answer (a list the front runs then: the fast lane's),
        # or None: done at once.
        self.after_answer: list[Callable[[], object]] | None = None

    @property
    def log_level(self) -> types.LoggingLevel | None:
        """The log level a 2026-07-28 client asked for on this request (none: no log messages)."""
        level = (self.meta or {}).get("io.modelcontextprotocol/logLevel")
        return level if isinstance(level, str) else None  # type: ignore[return-value]

    @property
    def wants_progress(self) -> bool:
        """Whether the client asked for progress on this request (a progress token in `_meta`)."""
        return bool(self.meta) and self.meta.get("progress_token", self.meta.get("progressToken")) is not None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report progress on this request (best effort)."""

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        """A log message tied to this request (best effort)."""

    async def ask(self, method: str, params: Any) -> Any:
        """Put a server's request (sampling, elicitation, roots) to the client; an `ErrorData` if it cannot be."""
        return no_client_to_answer(method)

    def without_progress(self) -> Request:
        """The same request without its progress token (concurrent parts of one call cannot share one)."""
        return self


class Waiting:
    """`with Waiting(callers, request, asking):` keeps `request` among `callers` while it waits on a server
    (what `Backend.serving` returns): plain and synchronous, it costs next to nothing per call. When it no
    longer waits there, the questions the server put to its client meanwhile that still wait for an answer
    (`asking`: request -> their cancel scopes) are given up: they were for a call that has ended."""

    __slots__ = ("_asking", "_callers", "_request")

    def __init__(self, callers: list[Any], request: Any, asking: dict[Any, list[Any]]) -> None:
        self._callers = callers
        self._request = request
        self._asking = asking

    def __enter__(self) -> None:
        self._callers.append(self._request)

    def __exit__(self, *exc_info: object) -> None:
        self._callers.remove(self._request)
        if self._asking and self._request not in self._callers:
            for scope in self._asking.pop(self._request, ()):
                scope.cancel()
