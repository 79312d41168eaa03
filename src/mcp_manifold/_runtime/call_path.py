"""The one call path: every `tools/call`, `resources/read` and `prompts/get` that reaches a backend.

Surfaces, the fast lane and the CLI all end here; nothing else calls a backend's tools, reads its
resources or gets its prompts. In order, a call:

1. passes the policy (`CallPolicy`): the caller's profile allows it, the tool is not quarantined,
   the caller's principal is within its rate and concurrency limits; a refusal is told to the
   observers like any other outcome, and names the profile, never what exists;
2. resolves its backend (configured, or added at run time by the hub) from the target's server;
3. answers from the result cache when the tool may be cached and a fresh result is there;
4. goes to the backend, which applies its breaker, concurrency limit and timeout, with the request
   marked as waiting there, so progress, logs and the server's requests for input reach its client;
5. turns a backend failure into a tool error (tools) or a `BackendError` (reads, prompts), and hides
   the server's secrets in error results;
6. spills a large result to a file (the gateway's `spill_threshold`, or the surface's own policy);
7. tells every observer (`observe`): the place where audit and metrics hook in.

Work the gateway does itself for a caller (a surface's list or search, a read or grep of a result
file) takes the same path as kind "action" (`action`): admitted (rate and calls in flight), timed and
told to the observers; only the backend is missing.

What must be in place *around* a call (a trace span, current while the backend is asked, so the
request to the server carries it on) registers with `around`. With no around-call hook, no observer
and no policy, a call pays for none of them: one truth test each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import mcp_types as types
import pydantic_core
from mcp_types import LOG_LEVEL_META_KEY
from pydantic import BaseModel

from mcp_manifold._core.apps import meta_with_exposed_app
from mcp_manifold._core.arguments import encoding_problem, quick_verdict
from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.clients import ASKS, Caller, Request
from mcp_manifold._core.naming import UI_SCHEME
from mcp_manifold._core.programs import ProgramReport
from mcp_manifold._core.result_cache import ResultCache
from mcp_manifold._core.results import (
    SpillPolicy,
    content_size,
    drop_server_stamp,
    scrubbed,
    spill_if_due,
    tool_error,
    with_exposed_uris,
)
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._core.suggestions import LONGEST_URI, shortened
from mcp_manifold._core.wire import WireResult, wire_result
from mcp_manifold._errors import (
    BackendError,
    BackendRequestError,
    InvalidRequest,
    ManifoldError,
    NotFound,
    Quarantined,
    RateLimited,
)
from mcp_manifold._runtime.could_not_ask import (
    CLIENT_MUST_ACT,
    AskElsewhere,
    could_not_ask,
    may_say_it_could_not_ask,
    refused_to_ask,
    required_untold,
    text_of,
)
from mcp_manifold._runtime.input_bridge import MAX_ROUNDS, HeldCalls, answer_questions, backend_state, read_state
from mcp_manifold._runtime.outbound import mark_checked
from mcp_manifold._runtime.relay_bound import relayed_progress
from mcp_manifold._sdk import call_tool_wire, requesting_client

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

    from mcp_manifold._runtime.backends import Backend
    from mcp_manifold._runtime.client_sessions import ClientSessions
    from mcp_manifold._runtime.pool import BackendPool
    from mcp_manifold._runtime.relists import Relists
    from mcp_manifold._runtime.spill import SpillStore

logger = logging.getLogger(__name__)

# A record's error, at most (the audit line cuts it shorter): a server's error can be as long as an answer,
# and the dashboard keeps its last 200 records, a trace its span's status.
LONGEST_ERROR = 2000

# action: work the gateway does itself for a caller (a surface's list, search or result-file read);
# program: code mode's, around its calls.
CallKind = Literal["tool", "resource", "prompt", "completion", "action", "program"]
# denied: the caller's profile does not allow it; quarantined: the tool changed since it was approved;
# rate_limited: the principal is over its rate or calls in flight; input_required: a 2026-07-28 client
# was handed the server's questions; cancelled: the caller gave up on a call its server had been sent.
Outcome = Literal["ok", "error", "cached", "input_required", "denied", "quarantined", "rate_limited", "cancelled"]
Send = Callable[["ClientSession", Request, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One finished (or refused) call, as observers see it (never the arguments or the result's content)."""

    kind: CallKind
    target: Target
    caller: str  # the client's key
    duration: float  # seconds in the call path, backend included
    outcome: Outcome
    error: str | None = None  # with the server's secrets hidden
    spilled: bool = False
    backend: float | None = None  # seconds waiting for the backend (its start and queue included); None: cached
    principal: str | None = None
    profile: str | None = None
    arguments_size: int | None = None  # bytes of the arguments as JSON
    result_size: int | None = None  # bytes of the result's content
    calls: int | None = None  # tool calls a program made (kind "program")


Observer = Callable[[CallRecord], None]
# An around-call hook: `hook(kind, request, target)` is entered before the call goes to its backend and
# left after it; what it yields is told the call's record just before it is left.
Around = Callable[[CallKind, Request, Target], AbstractContextManager[Observer]]


class CallPolicy(Protocol):
    """What a call must pass before it reaches a backend (runtime/access.py): profile, pins, limits."""

    def admit(self, request: Request, kind: CallKind, target: Target) -> None:
        """Let the call go ahead (pair with `release`), or raise why not: `NotFound` (not allowed, worded
        like an unknown name), `Quarantined` or `RateLimited`."""
        ...

    def release(self, request: Request) -> None: ...

    # Limits shared by replicas: after `admit`, the call path awaits `acquire` (a round trip to the store).
    waits: bool

    async def acquire(self, request: Request) -> None: ...

    # ... and, after `release`, awaits `settle` before the call's answer goes out (its slot may be removed now).
    async def settle(self, request: Request) -> None: ...

    def profile_name(self, request: Request) -> str | None:
        """The caller's profile, as records name it."""
        ...


def refusal_outcome(exc: ManifoldError) -> Outcome:
    if isinstance(exc, RateLimited):
        return "rate_limited"
    if isinstance(exc, Quarantined):
        return "quarantined"
    return "denied"


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
        self.policy: CallPolicy | None = None  # set by the gateway; None admits every call
        self.relists: Relists | None = None  # servers being listed again after announcing a change of tools
        # Judges an MCP App's (`ui://`) contents as read, raising `Quarantined` (the pins: runtime/access.py).
        self.judge_app: Callable[[Target, types.ReadResourceResult], None] | None = None
        self._held = held
        self._observers: list[Observer] = []
        self._arounds: list[Around] = []

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(record)` after every call; returns a function that stops it."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    def around(self, hook: Around) -> Callable[[], None]:
        """Run every call inside `hook(kind, request, target)` (see `Around`); returns a function that stops it."""
        self._arounds.append(hook)
        return lambda: self._arounds.remove(hook)

    async def _wrapped(
        self, kind: CallKind, request: Request, target: Target, run: Callable[[tuple[Observer, ...]], Awaitable[Any]]
    ) -> Any:
        with ExitStack() as stack:
            finishes = tuple(stack.enter_context(hook(kind, request, target)) for hook in list(self._arounds))
            return await run(finishes)

    def backend(self, server: str, request: Request | None = None) -> Backend:
        """The session a request to `server` goes to: the client's own (`session_scope: client`), else the
        server's shared one (configured, or added at run time: hub instances)."""
        backend = self._pool.backends.get(server) or self._pool.added.get(server)
        if backend is None:
            raise NotFound(f"unknown server {server!r}")
        if request is not None and (
            self._client_sessions.serves(backend.config, request.caller)
            or (backend.needs_session and self._own_session_can_ask(backend, request.caller))
        ):
            return self._client_sessions.session(backend.config, request.caller)
        return backend

    def _own_session_can_ask(self, backend: Backend, caller: Caller, ask: str | None = None) -> bool:
        """Whether `caller` can answer questions (`ask`, or any) that `backend`, a shared session, never
        told its server it could (over HTTP it promises nothing), and can have a session of its own
        where it would (the gateway tells it apart). Such a session is where a server that asks its
        client mid-call (`needs_session`) is reached for that caller."""
        if backend.owner is not None or backend.config.protocol == "modern" or not caller.identified:
            return False
        untold = caller.asks - backend.declare()
        return bool(untold if ask is None else ask in untold) and not self._client_sessions.single_client

    # --- tools ----------------------------------------------------------------------------------

    async def call_tool(
        self, request: Request, call: ToolCall
    ) -> types.CallToolResult | types.InputRequiredResult | WireResult:
        """Call a tool; failures of the server or the connection come back as tool errors. A 2026-07-28
        client may get `input_required` instead (the server has questions for it). With `call.wire`, a
        plain result comes back as the server sent it (a `WireResult`).

        A call the policy refuses raises (`NotFound`, `Quarantined`, `RateLimited`), as an unknown
        name would: the caller gets a clear error, the observers a record of the refusal. So does a
        server's error that asks the client to act (`CLIENT_MUST_ACT`: a `BackendRequestError`).
        """
        if self._arounds:
            return await self._wrapped(
                "tool", request, call.target, lambda hooks: self._admitted_call(request, call, hooks)
            )
        return await self._admitted_call(request, call, ())

    async def _admitted_call(
        self, request: Request, call: ToolCall, hooks: tuple[Observer, ...]
    ) -> types.CallToolResult | types.InputRequiredResult | WireResult:
        started = time.perf_counter()
        relists = self.relists
        if relists is not None and relists.pending(call.target.server):
            await self._after_relist(relists, request, call, started, hooks)
        policy = self.policy
        if policy is None:
            return await self._call_tool(request, call, started, hooks)
        self._admit(policy, request, "tool", call.target, started, call.arguments, None, hooks)
        if policy.waits:
            await self._acquire(policy, request, "tool", call.target, started, call.arguments, hooks)
        try:
            return await self._call_tool(request, call, started, hooks)
        finally:
            policy.release(request)
            if policy.waits:
                await policy.settle(request)

    async def _after_relist(
        self, relists: Relists, request: Request, call: ToolCall, started: float, hooks: tuple[Observer, ...]
    ) -> None:
        """Wait for the listing of a server that announced a change of its tools, so that the pin check
        judges the tool as it is now; refuse the call if the listing does not come in time (`hold`)."""
        target = call.target
        if await relists.settled(target.server) or not relists.hold:
            return
        exc = Quarantined(
            f"server {target.server!r} announced that its tools changed and was not listed again within "
            f"{relists.limit:g}s: its tools are held until it is (pinning: enforce); try again shortly"
        )
        if self._observers or hooks:
            self._tell(self._record("tool", request, target, started, "quarantined", str(exc), call.arguments), hooks)
        raise exc

    def _admit(
        self,
        policy: CallPolicy,
        request: Request,
        kind: CallKind,
        target: Target,
        started: float,
        arguments: Any,
        checked_as: CallKind | None = None,
        hooks: tuple[Observer, ...] = (),
    ) -> None:
        try:
            policy.admit(request, checked_as or kind, target)
        except ManifoldError as exc:
            if self._observers or hooks:
                outcome = refusal_outcome(exc)
                self._tell(self._record(kind, request, target, started, outcome, str(exc), arguments), hooks)
            raise

    async def _acquire(
        self,
        policy: CallPolicy,
        request: Request,
        kind: CallKind,
        target: Target,
        started: float,
        arguments: Any,
        hooks: tuple[Observer, ...],
    ) -> None:
        """The shared limits' part of the admission (several replicas): refused like `_admit`."""
        try:
            await policy.acquire(request)
        except ManifoldError as exc:
            if self._observers or hooks:
                self._tell(self._record(kind, request, target, started, "rate_limited", str(exc), arguments), hooks)
            raise

    def refused(self, request: Request, kind: CallKind, target: Target, exc: ManifoldError) -> None:
        """Tell the observers of a call refused before it reached the call path (a name the caller may not see)."""
        if self._observers:
            self._tell(self._record(kind, request, target, time.perf_counter(), refusal_outcome(exc), str(exc)))

    def _record(
        self,
        kind: CallKind,
        request: Request,
        target: Target,
        started: float,
        outcome: Outcome,
        error: str | None = None,
        arguments: Any = None,
        result_size: int | None = None,
        spilled: bool = False,
        backend: float | None = None,
    ) -> CallRecord:
        caller = request.caller
        return CallRecord(
            kind,
            _recorded(target),
            caller.key,
            time.perf_counter() - started,
            outcome,
            error if error is None else shortened(error, LONGEST_ERROR),
            spilled,
            backend,
            principal=caller.principal,
            profile=self.policy.profile_name(request) if self.policy is not None else caller.profile,
            arguments_size=_json_size(arguments),
            result_size=result_size,
        )

    async def _call_tool(
        self, request: Request, call: ToolCall, started: float, hooks: tuple[Observer, ...]
    ) -> types.CallToolResult | types.InputRequiredResult | WireResult:
        target, arguments = call.target, call.arguments
        backend = self.backend(target.server, request)
        outcome: Outcome = "ok"
        error: str | None = None
        waited: float | None = None
        # Input no wire can carry is refused here, after the policy (so a hidden name still reads like a
        # missing one) and before the backend, whose connection it would end for every caller.
        error = None
        if arguments:
            verdict = quick_verdict(arguments)
            if verdict is None:  # a large value: walked in a worker thread, the event loop serving others
                error = await anyio.to_thread.run_sync(encoding_problem, arguments)
            elif not verdict:
                error = encoding_problem(arguments)  # names the place
        if error is None:
            mark_checked(arguments)  # so the writer to the server does not walk them again
        # A client's own session (`session_scope: client`, or one that can answer its server's questions)
        # answers for that client alone: its results are neither taken from the cache nor put in it. Nor
        # are a retry's with its answers (`requestState`: it goes on with its own call), nor (below) those
        # of a call whose server asked its client something: before, the next client got the first's.
        cached = backend.owner is None and request.request_state is None
        result = (
            tool_error(error)
            if error is not None
            else (self._cache.lookup(target.server, target.name, arguments) if cached else None)
        )
        if error is not None:
            outcome = "error"
        elif result is not None:
            outcome = "cached"
        else:
            arguments = self._internal_uris(target, arguments)
            progress = request.progress if request.wants_progress else None
            handed = False  # to the server: past its start and its concurrency queue

            def send(session: ClientSession, serving: Request, extra: dict[str, Any]) -> Awaitable[Any]:
                nonlocal handed
                handed = True
                meta = self._meta(call.meta, request, backend)
                if call.wire and progress is None and not extra:  # the answer as the server sent it
                    leg = backend.raw_leg(session)
                    return call_tool_wire(session, target.name, arguments, meta, leg.post if leg else None)
                return session.call_tool(
                    target.name,
                    arguments,
                    progress_callback=relayed_progress(serving, backend.name) if progress is not None else None,
                    meta=meta,  # type: ignore[arg-type]
                    allow_input_required=True,
                    **extra,
                )

            sent = time.perf_counter()
            try:
                result = await self._exchange(request, backend, "tools/call", send)
                if isinstance(result, WireResult) and not call.wire:
                    # A held call started by a lane's request, finished by this retry, which wants the model.
                    result = result.model()
            except anyio.get_cancelled_exc_class():
                # Its client cancelled it or hung up (a timeout is the backend's error, below): no answer
                # follows, so its line is written now; a call its server was sent is never left unaudited.
                if handed and (self._observers or hooks):
                    waited = time.perf_counter() - sent
                    record = self._record(
                        "tool", request, target, started, "cancelled", None, arguments, backend=waited
                    )
                    self._tell(record, hooks)
                raise
            except BackendError as exc:
                # Errors can quote a server's stderr or URL, where its secrets may appear.
                error = backend.config.scrub(str(exc))
                if isinstance(exc, BackendRequestError) and exc.code in CLIENT_MUST_ACT:
                    # The client must act on what the error's data says: it gets the error, as sent.
                    if self._observers or hooks:
                        waited = time.perf_counter() - sent
                        self._tell(
                            self._record("tool", request, target, started, "error", error, arguments, backend=waited),
                            hooks,
                        )
                    raise
                result = tool_error(error)
            except InvalidRequest as exc:  # a retry whose requestState or answers do not fit
                error = str(exc)
                result = tool_error(error)
            else:
                if isinstance(result, types.InputRequiredResult):
                    if self._observers or hooks:
                        waited = time.perf_counter() - sent
                        record = self._record(
                            "tool", request, target, started, "input_required", None, arguments, backend=waited
                        )
                        self._tell(record, hooks)
                    return result
                if not isinstance(result, WireResult):  # a wire result has no URIs and is never cached
                    result = self._exposed_uris(target, result)
                    if cached and not request.asked:
                        self._cache.store(target.server, target.name, call.arguments, result)
            waited = time.perf_counter() - sent
            if result.is_error:
                outcome = "error"
                result = scrubbed(result, backend.config.scrub)
        spilled = False
        policy = call.spill or self.default_spill
        if policy.active:
            if isinstance(result, WireResult):  # the lane never asks for one then; should it ever, spill the model
                result = result.model()
            result, spilled = self._spilled(result, policy, target)
        if self._observers or hooks:
            size = content_size(result.content)
            record = self._record("tool", request, target, started, outcome, error, arguments, size, spilled, waited)
            if request.after_answer is not None:
                self._tell(record, hooks, observers=False)  # an around hook's part ends with the call (its span)
                request.after_answer.append(partial(self._tell, record))  # the audit line need not delay the answer
            else:
                self._tell(record, hooks)
        return result

    # --- programs (code mode) ------------------------------------------------------------------

    def give_up(self, asked: types.InputRequiredResult) -> None:
        """A call answered `input_required` whose questions nobody will answer: the server's call the gateway
        holds for the retry stops now, not after `held_call_timeout`."""
        self._held.give_up(asked.request_state)

    async def run_program(
        self, request: Request, target: Target, run: Callable[[], Awaitable[ProgramReport]]
    ) -> ProgramReport:
        """Run a code-mode program: its tool calls go through `call_tool` (each its own record, inside the
        program's span), and the program is one more record for the observers, with its call count.

        The program is admitted by the policy as a surface's own work is: over the principal's rate it is
        refused, and it is one of the principal's calls in flight while it runs (each call it makes is one
        more). Its record is made however it ends."""

        async def body(hooks: tuple[Observer, ...]) -> ProgramReport:
            started = time.perf_counter()
            policy = self.policy
            if policy is not None:
                self._admit(policy, request, "program", target, started, None, "action", hooks)
                if policy.waits:
                    await self._acquire(policy, request, "program", target, started, None, hooks)
            report = ProgramReport("error", "the program did not finish", 0, 0)
            try:
                report = await run()
            except anyio.get_cancelled_exc_class():
                report = ProgramReport("cancelled", "the program's request was cancelled", 0, 0)
                raise
            finally:
                if policy is not None:
                    policy.release(request)
                if self._observers or hooks:
                    outcome, error, size = report.outcome, report.error, report.answer_size
                    record = self._record("program", request, target, started, outcome, error, result_size=size)
                    self._tell(replace(record, calls=report.calls), hooks)
                if policy is not None and policy.waits:
                    await policy.settle(request)
            return report

        if self._arounds:
            return await self._wrapped("program", request, target, body)  # type: ignore[no-any-return]
        return await body(())

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
        try:
            result = await self._once(request, backend, action, send, extra)
        except AskElsewhere as elsewhere:  # the call that found out is made again where the server can ask
            return await self._exchange(request, elsewhere.backend, action, send)
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
            token = requesting_client.set(request.caller.askable)
            try:
                who = request.caller.principal
                result = await backend.request(action, lambda session: send(session, request, extra), who)
            except BackendRequestError as exc:
                asked = could_not_ask(backend, str(exc)) or required_untold(backend, request.caller, exc)
                if asked is None:
                    raise
                self._ask_elsewhere(request, backend, asked, extra)
                # Not the client's to act on: it can answer, the gateway's session could not say so.
                code = types.INTERNAL_ERROR if exc.code in CLIENT_MUST_ACT else exc.code
                raise BackendRequestError(backend.name, backend.asks_mid_call(asked), code) from exc
            finally:
                requesting_client.reset(token)
        result = wire_result(result) if isinstance(result, dict) else drop_server_stamp(result)
        if isinstance(result, (types.CallToolResult, WireResult)) and may_say_it_could_not_ask(
            backend, request.caller, result
        ):
            text = text_of(result)
            asked = could_not_ask(backend, text)
            if asked is not None and not result.is_error:
                # The tool answered: its words are never replaced (they may merely quote the sentence). A
                # session-era server whose answer opens with it refused to ask (the TypeScript SDK's servers
                # answer so): for a caller that can answer, the call is made again where it can ask, once
                # (learned). Else a caller that can answer has its next calls go there. (A 2026-07-28
                # server's SDK reports it as an error: a success only quotes it, and the handshake learned
                # from it could end a server that speaks 2026-07-28 only, for every client.)
                ask = ASKS.get(asked)
                if (
                    not extra
                    and not backend.modern
                    and ask is not None
                    and self._own_session_can_ask(backend, request.caller, ask)
                ):
                    if refused_to_ask(text):
                        self._ask_elsewhere(request, backend, asked, extra)
                    backend.learn_it_asks(asked)
            elif asked is not None:
                self._ask_elsewhere(request, backend, asked, extra)
                return tool_error(f"server {backend.name!r}: {backend.asks_mid_call(asked)}")
        return result

    def _ask_elsewhere(self, request: Request, backend: Backend, asked: str, extra: dict[str, Any]) -> None:
        """When the caller can answer `asked` and can have a session of its own that says so, learn that
        the server asks mid-call and have the call made again there (raises `AskElsewhere`)."""
        ask = ASKS.get(asked)
        if extra or ask is None or not self._own_session_can_ask(backend, request.caller, ask):
            return
        backend.learn_it_asks(asked)
        raise AskElsewhere(self.backend(backend.name, request))

    def _meta(self, meta: Mapping[str, Any] | None, request: Request, backend: Backend) -> Mapping[str, Any] | None:
        """The `_meta` a server gets with a call: the surface's, plus the log level it should send at
        (a 2026-07-28 server sends log messages only to a request that asks for them)."""
        if not backend.modern:
            return meta
        # A 2026-07-28 client opts in per request; a session-era one gets every level unless it set one (its own).
        level = request.log_level if request.caller.era == "stateless" else (request.caller.log_level or "debug")
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
        """A tool's resource links, embedded resources and app (`_meta.ui`) name URIs the client can read back."""
        exposer = self._exposer(target)
        update: dict[str, Any] = {}
        if (content := with_exposed_uris(list(result.content), exposer)) is not None:
            update["content"] = content
        if (meta := meta_with_exposed_app(result.meta, exposer)) is not None:
            update["meta"] = self._catalog.without_foreign_app(meta, target.server)  # as in its listing
        return result.model_copy(update=update) if update else result

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

    # --- the gateway's own work -----------------------------------------------------------------

    async def action(self, request: Request, target: Target, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work`, something a surface does itself for the caller that costs the gateway work (a list,
        a search, reading or grepping a result file), through the policy like a call: refused over the
        principal's rate or calls in flight (`RateLimited`), counted in flight while it runs, and told to
        the observers as kind "action". `target` names it: the surface's tool as `exposed`, the action
        as `name`, no server."""
        return await self._run("action", request, target, lambda _none: work())

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
            if self.judge_app is not None and target.name.startswith(UI_SCHEME):  # as the server wrote it
                self.judge_app(target, result)
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
        return await self._run("prompt", request, target, get, arguments)

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
            if context and (problem := encoding_problem(context, "context argument")) is not None:
                raise InvalidRequest(problem)
            if backend.state == "ready" and not backend.offers_completions():
                return types.CompleteResult(completion=types.Completion(values=[]))
            original = (
                types.PromptReference(name=target.name)
                if isinstance(ref, types.PromptReference)
                else types.ResourceTemplateReference(uri=target.name)
            )
            with backend.serving(request):
                return await backend.request(
                    "completion/complete",
                    lambda session: session.complete(original, argument, context),
                    request.caller.principal,
                )

        named: CallKind = "prompt" if isinstance(ref, types.PromptReference) else "resource"
        return await self._run("completion", request, target, complete, argument, checked_as=named)

    async def _run(
        self,
        kind: CallKind,
        request: Request,
        target: Target,
        work: Callable[[Any], Any],  # given the target's backend (None for an action)
        arguments: Any = None,
        *,
        checked_as: CallKind | None = None,
    ) -> Any:
        """Run `work` on the target's backend; the policy checks it as `checked_as` (what a completion names)."""
        if self._arounds:
            return await self._wrapped(
                kind,
                request,
                target,
                lambda hooks: self._run_once(kind, request, target, work, arguments, checked_as, hooks),
            )
        return await self._run_once(kind, request, target, work, arguments, checked_as, ())

    async def _run_once(
        self,
        kind: CallKind,
        request: Request,
        target: Target,
        work: Callable[[Any], Any],
        arguments: Any,
        checked_as: CallKind | None,
        hooks: tuple[Observer, ...],
    ) -> Any:
        started = time.perf_counter()
        policy = self.policy
        if policy is not None:
            self._admit(policy, request, kind, target, started, arguments, checked_as, hooks)
            if policy.waits:
                await self._acquire(policy, request, kind, target, started, arguments, hooks)
        try:
            _refuse_unencodable(kind, target, arguments)
            result = await work(None if kind == "action" else self.backend(target.server, request))
        except ManifoldError as exc:
            if self._observers or hooks:
                error = self._scrub(target.server, str(exc))
                # All of it: the backend is the work here (an action has none).
                waited = None if kind == "action" else time.perf_counter() - started
                outcome: Outcome = "quarantined" if isinstance(exc, Quarantined) else "error"  # an app's contents
                self._tell(
                    self._record(kind, request, target, started, outcome, error, arguments, backend=waited), hooks
                )
            raise
        finally:
            if policy is not None:
                policy.release(request)
                if policy.waits:
                    await policy.settle(request)
        if self._observers or hooks:
            outcome = "input_required" if isinstance(result, types.InputRequiredResult) else "ok"
            waited = None if kind == "action" else time.perf_counter() - started
            size = _json_size(result)
            self._tell(
                self._record(kind, request, target, started, outcome, None, arguments, size, backend=waited), hooks
            )
        return result

    def _scrub(self, server: str, text: str) -> str:
        """`text` with the server's secrets hidden (an error can quote its URL or stderr)."""
        backend = self._pool.backends.get(server) or self._pool.added.get(server)
        return backend.config.scrub(text) if backend is not None else text

    def _tell(self, record: CallRecord, hooks: tuple[Observer, ...] = (), *, observers: bool = True) -> None:
        for observer in (*hooks, *(self._observers if observers else ())):
            try:
                observer(record)
            except Exception:  # an observer's bug must never fail the call it watched
                logger.exception("call observer failed")


def _recorded(target: Target) -> Target:
    """`target` as a record names it. A refused call's name is the caller's own (an unknown tool or URI is
    recorded when profiles or limits are on): kept whole, one of a few MB made every audit line that size
    (a handful of calls rotated the whole audit history away) and the dashboard's recent calls held 200 of
    them. A longer name than any real one (`LONGEST_URI`) is kept as its start and its length."""
    if len(target.exposed) <= LONGEST_URI and len(target.name) <= LONGEST_URI:
        return target
    return replace(target, name=shortened(target.name, LONGEST_URI), exposed=shortened(target.exposed, LONGEST_URI))


def _refuse_unencodable(kind: CallKind, target: Target, arguments: Any) -> None:
    """A read's URI, a prompt's or a completion's arguments that no wire can carry: a clear error, not a
    broken connection to the server."""
    problem = encoding_problem(target.name, "uri") if kind == "resource" else None
    if problem is None and arguments:
        problem = encoding_problem(arguments)
    if problem is not None:
        raise InvalidRequest(problem)


def _json_size(value: Any) -> int | None:
    """Bytes of `value` as compact JSON (arguments, a read's or a prompt's result); None for none."""
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return len(value.model_dump_json(by_alias=True, exclude_none=True).encode())
    try:
        return len(pydantic_core.to_json(value, fallback=str))
    except pydantic_core.PydanticSerializationError:  # a lone surrogate: no UTF-8, so no size in bytes
        return None
