"""The one call path: every `tools/call`, `resources/read` and `prompts/get` that reaches a backend.

Surfaces, the fast lane and the CLI all end here; nothing else calls a backend's tools, reads its
resources or gets its prompts. In order, a call:

1. resolves its backend (configured, or added at run time by the hub) from the target's server;
2. answers from the result cache when the tool may be cached and a fresh result is there;
3. goes to the backend, which applies its breaker, concurrency limit and timeout, with the request
   marked as waiting there, so progress, logs and the server's requests for input reach its client;
4. turns a backend failure into a tool error (tools) or a `BackendError` (reads, prompts), and hides
   the server's secrets in error results;
5. spills a large result to a file (the gateway's `spill_threshold`, or the surface's own policy);
6. tells every observer (`observe`): the place where audit, metrics and traces hook in.

Access control, pinning and rate limits belong here too, so that a rule holds on every path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types
from mcp_types import LOG_LEVEL_META_KEY

from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.clients import Request
from mcp_manifold._core.result_cache import ResultCache
from mcp_manifold._core.results import (
    SpillPolicy,
    scrubbed,
    spill_if_due,
    tool_error,
    with_exposed_uris,
    without_server_stamp,
)
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._errors import BackendError, BackendRequestError, InvalidRequest, ManifoldError, NotFound
from mcp_manifold._runtime.input_bridge import MAX_ROUNDS, HeldCalls, answer_questions, backend_state, read_state
from mcp_manifold._sdk import asked_without_back_channel, requesting_client

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

    from mcp_manifold._runtime.backends import Backend, BackendPool
    from mcp_manifold._runtime.client_sessions import ClientSessions
    from mcp_manifold._runtime.spill import SpillStore

logger = logging.getLogger(__name__)

CallKind = Literal["tool", "resource", "prompt", "completion"]
Outcome = Literal["ok", "error", "cached", "input_required"]
Send = Callable[["ClientSession", Request, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One finished call, as observers see it (never the arguments or the result's content)."""

    kind: CallKind
    target: Target
    caller: str  # the client's key
    duration: float  # seconds
    outcome: Outcome
    error: str | None = None
    spilled: bool = False


Observer = Callable[[CallRecord], None]


class CallPath:
    """The call path of one gateway; see the module docstring for what a call goes through."""

    def __init__(
        self,
        pool: BackendPool,
        client_sessions: ClientSessions,
        catalog: Catalog,
        result_cache: ResultCache,
        spill: SpillStore,
        default_spill: SpillPolicy,
        held: HeldCalls,
    ) -> None:
        self._pool = pool
        self._client_sessions = client_sessions
        self._catalog = catalog
        self._cache = result_cache
        self._spill = spill
        self.default_spill = default_spill
        self._held = held
        self.log_level: types.LoggingLevel | None = None  # what a session-era client set (logging/setLevel)
        self._observers: list[Observer] = []

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(record)` after every call; returns a function that stops it."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    def backend(self, server: str, request: Request | None = None) -> Backend:
        """The session a request to `server` goes to: the client's own (`session_scope: client`), else the
        server's shared one (configured, or added at run time: hub instances)."""
        backend = self._pool.backends.get(server) or self._pool.added.get(server)
        if backend is None:
            raise NotFound(f"unknown server {server!r}")
        if request is not None and self._client_sessions.serves(backend.config, request.caller):
            return self._client_sessions.session(backend.config, request.caller)
        return backend

    # --- tools ----------------------------------------------------------------------------------

    async def call_tool(self, request: Request, call: ToolCall) -> types.CallToolResult | types.InputRequiredResult:
        """Call a tool; failures of the server or the connection come back as tool errors. A 2026-07-28
        client may get `input_required` instead (the server has questions for it)."""
        started = time.perf_counter()
        target, arguments = call.target, call.arguments
        backend = self.backend(target.server, request)
        outcome: Outcome = "ok"
        error: str | None = None
        result = self._cache.lookup(target.server, target.name, arguments)
        if result is not None:
            outcome = "cached"
        else:
            arguments = self._internal_uris(target, arguments)
            progress = request.progress if request.wants_progress else None

            def send(session: ClientSession, serving: Request, extra: dict[str, Any]) -> Awaitable[Any]:
                return session.call_tool(
                    target.name,
                    arguments,
                    progress_callback=serving.progress if progress is not None else None,
                    meta=self._meta(call.meta, request, backend),  # type: ignore[arg-type]
                    allow_input_required=True,
                    **extra,
                )

            try:
                result = await self._exchange(request, backend, "tools/call", send)
            except BackendError as exc:
                error = str(exc)
                result = tool_error(error)
            except InvalidRequest as exc:  # a retry whose requestState or answers do not fit
                error = str(exc)
                result = tool_error(error)
            else:
                if isinstance(result, types.InputRequiredResult):
                    if self._observers:
                        elapsed = time.perf_counter() - started
                        self._tell(CallRecord("tool", target, request.caller.key, elapsed, "input_required"))
                    return result
                result = self._exposed_uris(target, result)
                self._cache.store(target.server, target.name, call.arguments, result)
            if result.is_error:
                outcome = "error"
                # Errors can quote a server's stderr or URL, where its secrets may appear.
                result = scrubbed(result, backend.config.scrub)
        spilled = False
        policy = call.spill or self.default_spill
        if policy.active:
            result, spilled = self._spilled(result, policy, target)
        if self._observers:
            self._tell(
                CallRecord("tool", target, request.caller.key, time.perf_counter() - started, outcome, error, spilled)
            )
        return result

    # --- questions from servers, across the eras (see input_bridge.py) ---------------------------

    async def _exchange(self, request: Request, backend: Backend, action: str, send: Send) -> Any:
        """One request to a server, however many rounds of questions it takes, in the client's era."""
        state = read_state(request.request_state)
        if state is not None and state.kind == "held":
            return await self._held.resume(state, request)
        extra: dict[str, Any] = {}
        if state is not None:
            if state.server != backend.name:
                raise InvalidRequest("requestState belongs to a call of another server; call the tool again")
            extra = {"input_responses": request.input_responses, "request_state": state.inner}
        stateless = request.caller.era == "stateless"
        if stateless and not extra:
            # Its era and what it was told decide how its questions are asked: a reconnect with the
            # handshake that an earlier call found necessary (`asks_mid_call`) comes first, once no other
            # client's call is in flight there (this one is counted among them meanwhile).
            with backend.serving(request):
                await backend.renew_if_session_needed()
            await backend.session()
            if not backend.modern and backend.declared:
                # A session-era server may ask mid-call, which a 2026-07-28 client can only answer by
                # calling again: keep the server's call running meanwhile.
                return await self._held.start(request, lambda held: self._once(held, backend, action, send, {}))
        result = await self._once(request, backend, action, send, extra)
        for _round in range(MAX_ROUNDS):
            if not isinstance(result, types.InputRequiredResult):
                return result
            if stateless:  # the server's questions go to the client, with its state sealed in ours
                inner = backend_state(backend.name, result.request_state)
                return types.InputRequiredResult(input_requests=result.input_requests, request_state=inner)
            answers = await answer_questions(request, result.input_requests or {})
            retry = {"input_responses": answers, "request_state": result.request_state}
            result = await self._once(request, backend, action, send, retry)
        raise BackendError(backend.name, f"{action} still had questions after {MAX_ROUNDS} rounds of answers")

    async def _once(self, request: Request, backend: Backend, action: str, send: Send, extra: dict[str, Any]) -> Any:
        with backend.serving(request):
            token = requesting_client.set(_askable(request))
            try:
                result = await backend.request(action, lambda session: send(session, request, extra))
            except BackendRequestError as exc:
                asked = asked_without_back_channel(str(exc)) if backend.modern else None
                if asked is None:
                    raise
                raise BackendRequestError(backend.name, backend.asks_mid_call(asked), exc.code) from exc
            finally:
                requesting_client.reset(token)
        result = without_server_stamp(result)
        if backend.modern and isinstance(result, types.CallToolResult) and result.is_error:
            asked = asked_without_back_channel(" ".join(getattr(block, "text", "") for block in result.content))
            if asked is not None:
                return tool_error(f"server {backend.name!r}: {backend.asks_mid_call(asked)}")
        return result

    def _meta(self, meta: Mapping[str, Any] | None, request: Request, backend: Backend) -> Mapping[str, Any] | None:
        """The `_meta` a server gets with a call: the surface's, plus the log level it should send at
        (a 2026-07-28 server sends log messages only to a request that asks for them)."""
        if not backend.modern:
            return meta
        # A 2026-07-28 client opts in per request; a session-era one gets every level unless it set one.
        level = request.log_level if request.caller.era == "stateless" else (self.log_level or "debug")
        if level is None:
            return meta
        return {LOG_LEVEL_META_KEY: level, **(meta or {})}

    def _internal_uris(self, target: Target, arguments: dict[str, Any] | None) -> dict[str, Any] | None:
        """Arguments whose schema marks them as URIs, given in the exposed form, as the server knows them."""
        entry = self._catalog.entry(target.exposed)
        if not arguments or entry is None or not entry.uri_arguments or entry.server != target.server:
            return arguments
        original = self._catalog.original_uri
        return {
            key: original(target.server, value) if key in entry.uri_arguments and isinstance(value, str) else value
            for key, value in arguments.items()
        }

    def _exposed_uris(self, target: Target, result: types.CallToolResult) -> types.CallToolResult:
        """A tool's resource links and embedded resources name URIs the client can read back."""
        content = with_exposed_uris(list(result.content), self._exposer(target))
        return result if content is None else result.model_copy(update={"content": content})

    def _exposer(self, target: Target) -> Callable[[str], str]:
        return lambda uri: self._catalog.exposed_uri(target.server, uri)

    def _spilled(self, result: types.CallToolResult, policy: SpillPolicy, target: Target) -> tuple[Any, bool]:
        try:
            due = spill_if_due(result, policy, self._spill.write)
        except OSError as exc:
            if policy.to_file:
                raise ManifoldError(f"could not write the result file: {exc}") from None
            logger.warning("could not spill the result of %s, answering inline: %s", target.exposed, exc)
            return result, False
        return (due.result, True) if due is not None else (result, False)

    # --- resources and prompts ------------------------------------------------------------------

    async def read_resource(
        self, request: Request, target: Target
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read a resource; the contents name the URIs the client can read again (the exposed ones)."""

        def send(session: ClientSession, serving: Request, extra: dict[str, Any]) -> Awaitable[Any]:
            meta = self._meta(None, request, backend)
            return session.read_resource(target.name, allow_input_required=True, meta=meta, **extra)

        async def read(backend_: Backend) -> Any:
            result = await self._exchange(request, backend_, "resources/read", send)
            if isinstance(result, types.InputRequiredResult):
                return result
            contents = [
                item.model_copy(update={"uri": self._catalog.exposed_uri(target.server, item.uri)})
                for item in result.contents
            ]
            return result.model_copy(update={"contents": contents})

        backend = self.backend(target.server, request)
        return await self._run("resource", request, target, read)

    async def get_prompt(
        self, request: Request, target: Target, arguments: dict[str, str] | None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        def send(session: ClientSession, serving: Request, extra: dict[str, Any]) -> Awaitable[Any]:
            meta = self._meta(None, request, backend)
            return session.get_prompt(target.name, arguments, allow_input_required=True, meta=meta, **extra)

        async def get(backend_: Backend) -> Any:
            result = await self._exchange(request, backend_, "prompts/get", send)
            if isinstance(result, types.InputRequiredResult):
                return result
            exposed = self._exposer(target)
            messages = []
            for message in result.messages:
                content = with_exposed_uris([message.content], exposed)
                messages.append(message if content is None else message.model_copy(update={"content": content[0]}))
            return result.model_copy(update={"messages": messages})

        backend = self.backend(target.server, request)
        return await self._run("prompt", request, target, get)

    async def complete(
        self,
        request: Request,
        target: Target,
        ref: types.PromptReference | types.ResourceTemplateReference,
        *,
        argument: dict[str, str],
        context: dict[str, str] | None = None,
    ) -> types.CompleteResult:
        """Completions for an argument of a prompt or resource template (`ref` names it as the client knows
        it; `target.name` as its server does). A server that offers no completions completes nothing."""

        async def complete(backend: Backend) -> types.CompleteResult:
            if backend.state == "ready" and not backend.offers_completions():
                return types.CompleteResult(completion=types.Completion(values=[]))
            original = (
                types.PromptReference(name=target.name)
                if isinstance(ref, types.PromptReference)
                else types.ResourceTemplateReference(uri=target.name)
            )
            with backend.serving(request):
                return await backend.request(
                    "completion/complete", lambda session: session.complete(original, argument, context)
                )

        return await self._run("completion", request, target, complete)

    async def _run(self, kind: CallKind, request: Request, target: Target, work: Callable[[Backend], Any]) -> Any:
        started = time.perf_counter()
        try:
            result = await work(self.backend(target.server, request))
        except ManifoldError as exc:
            if self._observers:
                self._tell(
                    CallRecord(kind, target, request.caller.key, time.perf_counter() - started, "error", str(exc))
                )
            raise
        if self._observers:
            self._tell(CallRecord(kind, target, request.caller.key, time.perf_counter() - started, "ok"))
        return result

    def _tell(self, record: CallRecord) -> None:
        for observer in list(self._observers):
            try:
                observer(record)
            except Exception:  # an observer's bug must never fail the call it watched
                logger.exception("call observer failed")


def _askable(request: Request) -> dict[str, Any]:
    """What a server may ask `request`'s client for, as 2026-07-28 capabilities: the gateway relays such
    questions to the client in its own era (input_required, or a request in its session)."""
    capabilities = request.caller.capabilities
    if capabilities is None:
        return {}
    dumped = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {ask: dumped[ask] for ask in request.caller.asks if ask in dumped}
