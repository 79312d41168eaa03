"""Servers asking clients for input, across the two protocol eras.

A session-era server asks in the middle of a call (`elicitation/create`, `sampling/createMessage`,
`roots/list` sent to the client); a 2026-07-28 server cannot send requests, so it answers the call with
`input_required` (the questions, and a `requestState`) and the client calls again with the answers.
The gateway bridges the four pairings:

- session-era client, session-era server: the question goes to the client (the back channel);
- session-era client, 2026-07-28 server: the gateway asks the client, then calls the server again;
- 2026-07-28 client, session-era server: the gateway holds the server's call and answers the client
  `input_required`; the answers of the client's next call resume the held call;
- 2026-07-28 client, 2026-07-28 server: the server's questions go to the client, the server's state
  sealed inside the gateway's.

The gateway's own `requestState` is plain JSON here; the front seals it (the SDK's
`RequestStateBoundary`: encrypted, bound to the method, tool and arguments, expiring), so a client can
neither read the server's state inside it nor forge one. A held call waits `held_call_timeout` seconds
for its retry, then is cancelled on the server; a retry for a call the gateway does not hold (expired, or
another gateway, or a restart) gets a clear error.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from mcp_manifold._core.clients import Caller, Request, undeclared
from mcp_manifold._errors import InvalidRequest, ManifoldError
from mcp_manifold._runtime.cancellation import stray_cancellation

logger = logging.getLogger(__name__)

MAX_ROUNDS = 10  # rounds of questions one call may need (the SDK's client gives up after as many)
_STATE_VERSION = 1
_REQUEST_TYPES = {"elicitation/create": types.ElicitRequest, "sampling/createMessage": types.CreateMessageRequest}
_RESPONSE = TypeAdapter(types.InputResponse)


# --- the gateway's request state ----------------------------------------------------------------------


def backend_state(server: str, inner: str | None) -> str:
    """The state of a call whose server answered input_required: its own state, kept for the retry."""
    return json.dumps({"v": _STATE_VERSION, "kind": "backend", "server": server, "inner": inner})


def held_state(held_id: str, holder: str) -> str:
    """The state of a call this gateway holds; `holder` names this gateway's run (see `HeldCalls`)."""
    return json.dumps({"v": _STATE_VERSION, "kind": "held", "id": held_id, "holder": holder})


@dataclass(frozen=True)
class State:
    kind: str  # "backend" or "held"
    server: str | None = None
    inner: str | None = None
    held_id: str | None = None
    holder: str | None = None  # the gateway run that holds the call


def read_state(text: str | None) -> State | None:
    """The gateway's state from a client's retry (already unsealed by the front), or None without one."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        if data.get("v") != _STATE_VERSION or data.get("kind") not in ("backend", "held"):
            raise ValueError("not the gateway's state")
    except (ValueError, AttributeError, TypeError):
        raise InvalidRequest("requestState is not one this gateway issued; call the tool again") from None
    return State(data["kind"], data.get("server"), data.get("inner"), data.get("id"), data.get("holder"))


def as_input_request(method: str, params: Any) -> types.InputRequest:
    """A server's mid-call request as an `input_required` question."""
    if method == "roots/list":
        return types.ListRootsRequest()
    return _REQUEST_TYPES[method](params=params)


def as_response(key: str, method: str, raw: Any) -> Any:
    """A client's answer `key` (from a retry's `inputResponses`) as the result the server's request expects."""
    try:
        if method == "roots/list":
            return types.ListRootsResult.model_validate(raw) if isinstance(raw, dict) else raw
        return _RESPONSE.validate_python(raw) if isinstance(raw, dict) else raw
    except ValidationError as exc:
        raise InvalidRequest(
            f"inputResponses[{key!r}] is not a valid answer to {method}: {exc.errors()[0]['msg']}"
        ) from None


# --- asking a session-era client for a 2026-07-28 server ----------------------------------------------


async def answer_questions(request: Request, questions: dict[str, types.InputRequest]) -> dict[str, Any]:
    """Put a 2026-07-28 server's questions to a session-era client, one by one; its answers, by key.

    A question the client cannot answer (not declared, refused) ends the call with a clear error.
    """
    answers: dict[str, Any] = {}
    for key, question in questions.items():
        request.asked = True
        answer = await request.ask(question.method, _session_era_params(question))
        if isinstance(answer, types.ErrorData):
            raise ManifoldError(f"the server asked the client ({question.method}) and got no answer: {answer.message}")
        answers[key] = answer
    return answers


def _session_era_params(question: types.InputRequest) -> Any:
    """A question's params as a session-era client takes them: a URL elicitation needs an `elicitationId`
    there (2026-07-28 has none), which only names it to the client, so the gateway makes one up."""
    params = getattr(question, "params", None)
    if isinstance(params, types.ElicitRequestURLParams) and params.elicitation_id is None:
        return params.model_copy(update={"elicitation_id": secrets.token_urlsafe(12)})
    return params


# --- holding a session-era server's call for a 2026-07-28 client ----------------------------------------


@dataclass
class HeldCall:
    """A server's call kept running while its client answers `input_required` and calls again."""

    id: str
    request: Request  # the latest client request of the call: where progress and logs go
    done: anyio.Event = field(default_factory=anyio.Event)
    asked: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    failure: BaseException | None = None
    questions: dict[str, tuple[str, Any]] = field(default_factory=dict)  # key -> (method, params), unanswered
    answers: dict[str, anyio.Event] = field(default_factory=dict)
    replies: dict[str, Any] = field(default_factory=dict)
    touched: float = field(default_factory=time.monotonic)  # when its client was last handed questions
    # The keys of the questions its client was handed and has not answered yet (no request of its waits).
    handed: set[str] = field(default_factory=set)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    _keys: int = 0

    @property
    def awaiting_client(self) -> bool:
        """Its questions are with the client, and no request of its waits for it."""
        return bool(self.handed)

    async def ask(self, method: str, params: Any) -> Any:
        """The server's question: park it until the client's next call answers it."""
        refusal = undeclared(self.request.caller.capabilities, method)
        if refusal is not None:
            return refusal
        self._keys += 1
        key = f"q{self._keys}"
        self.questions[key] = (method, params)
        answered = self.answers[key] = anyio.Event()
        self.asked.set()
        try:
            await answered.wait()
        finally:  # answered, or the server's call stopped: either way the question is no longer open
            self.questions.pop(key, None)
            self.answers.pop(key, None)
        return self.replies.pop(key)


class HeldRequest(Request):
    """The request a held call serves the server with: questions are parked; progress and logs go to
    the client's latest request of the call."""

    def __init__(self, held: HeldCall) -> None:
        super().__init__(held.request.caller, held.request.meta)
        self.held = held

    @property
    def wants_progress(self) -> bool:
        return self.held.request.wants_progress

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self.held.request.progress(progress, total, message)

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        await self.held.request.log(level, data, logger_name)

    async def ask(self, method: str, params: Any) -> Any:
        return await self.held.ask(method, params)


HOLDER_GONE = (
    "the replica holding the call these answers are for is gone (stopped or crashed), and the call with it; "
    "call the tool again"
)


class HeldCalls:
    """The calls this gateway holds for 2026-07-28 clients, each waiting for the client's next call."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        # Names this run in the states it issues, so that a retry reaching another gateway (one behind the
        # same address, or this one restarted) is told apart from one that came too late.
        self.holder = secrets.token_urlsafe(9)
        self._held: dict[str, HeldCall] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        # Replicas sharing state: a retry for a call another replica holds is handed to it (shared_state/held.py).
        self.elsewhere: Callable[[State, Request], Awaitable[Any]] | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the held calls until the gateway stops; give up on those whose client never called again."""
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            task_status.started()
            try:
                await self._give_up_on_the_silent()
            finally:
                self._task_group = None  # a call started now gets a clear error

    async def _give_up_on_the_silent(self) -> None:
        while True:
            await anyio.sleep(max(0.5, min(30.0, self.timeout / 4)))
            deadline = time.monotonic() - self.timeout
            # Only calls whose questions wait for the client: one that a request waits for runs as long
            # as its client waits (and stops when it cancels). One that ended meanwhile (its server
            # failed, say) is dropped all the same: nobody comes for it.
            for held in [held for held in self._held.values() if held.awaiting_client and held.touched < deadline]:
                logger.info("gave up on held call %s: its client did not answer within %gs", held.id, self.timeout)
                self._held.pop(held.id, None)
                held.scope.cancel()

    async def start(self, request: Request, work: Callable[[Request], Awaitable[Any]]) -> Any:
        """Run `work` (the server's call) held: its result, or `input_required` with its first questions."""
        if self._task_group is None:
            raise ManifoldError("the gateway is not running")
        held = HeldCall(secrets.token_urlsafe(12), request)
        self._held[held.id] = held

        async def run() -> None:
            try:
                with held.scope:  # the call's own cancel (its client's, the reaper's) ends here
                    try:
                        held.result = await work(HeldRequest(held))
                    except Exception as exc:
                        held.failure = exc
                    except BaseException:
                        # A request still waiting gets an error of its own, never this task's cancellation.
                        held.failure = ManifoldError("the call was stopped before it finished")
                        raise
                    finally:
                        held.done.set()
                        held.asked.set()
            except BaseException as exc:
                if not stray_cancellation(exc):
                    raise  # the gateway stopping, or the process ending
                # Any other that got past the call's scope (one from outside anyio, one that met the
                # scope's own cancel, one in an exception group) would end every held call and the reaper
                # with them, as anyio cancels the whole group: it ends this call only.
                logger.error("held call %s ended by a cancellation that was not its own", held.id)

        self._task_group.start_soon(run)
        return await self._next(held)

    def give_up(self, request_state: str | None) -> None:
        """Stop the held call `request_state` names at once: its questions will never be answered (a code-mode
        program's call, whose program cannot ask its client). It was held to `timeout` for nothing, the server's
        call waiting on its question meanwhile."""
        state = read_state(request_state)
        if state is None or state.kind != "held" or state.holder != self.holder:
            return  # a 2026-07-28 server's questions: it holds nothing, nor does the gateway
        held = self._held.pop(state.held_id or "", None)
        if held is not None:
            held.scope.cancel()

    async def resume(self, state: State, request: Request) -> Any:
        """A client's retry: its answers to the held call's questions; the call's result, or more questions."""
        if state.holder != self.holder:
            if self.elsewhere is not None:
                return await self.elsewhere(state, request)
            raise ManifoldError(
                "the call these answers are for is not held by this gateway: another gateway started it (one "
                "behind the same address, or this one before a restart); call it again"
            )
        held = self._held.get(state.held_id or "")
        if held is None:
            raise ManifoldError(
                "the call these answers are for is no longer held: it was cancelled, or its client took longer "
                f"than {self.timeout:g}s to answer and the gateway gave it up; call it again"
            )
        if not held.awaiting_client:
            raise InvalidRequest(
                "these answers were already given: another request with this requestState is waiting for the call"
            )
        responses = request.input_responses or {}
        # Only what the client was handed: a question the server asked a moment later goes out next.
        asked = [key for key in held.questions if key in held.handed]
        missing = [key for key in asked if key not in responses]
        if missing:
            raise InvalidRequest(
                f"inputResponses has no answer for {', '.join(missing)}: answer every inputRequests key"
            )
        # Every answer read before anything changes: a retry with a bad one leaves the call as it was.
        replies = {key: as_response(key, held.questions[key][0], responses[key]) for key in asked}
        held.request = request
        held.handed = set()
        for key, reply in replies.items():
            held.replies[key] = reply
            del held.questions[key]
            held.answers.pop(key).set()
        return await self._next(held)

    async def resume_forwarded(
        self, state: State, responses: dict[str, Any], relay: Callable[[Caller], Request] | None = None
    ) -> Any:
        """A retry another replica received and handed here, resumed for the call's own client. Its request
        stays on that replica: `relay(caller)` makes the stand-in through which the rest of the call's
        progress and logs go back there (none: they are not sent)."""
        if state.holder != self.holder:
            # Handed here as its holder by a replica whose directory names this address for another run: this
            # process restarted there (the old run's row not yet stale), or a `replica_url` names the wrong
            # replica. Never handed on again: that replica would be asked once more, and so on without end.
            logger.warning(
                "answers for a held call of run %s were handed to this replica (run %s): it restarted at that "
                "address, or another replica's replica_url names this one's address",
                state.holder,
                self.holder,
            )
            raise ManifoldError(HOLDER_GONE)
        held = self._held.get(state.held_id or "")
        if held is None:
            return await self.resume(state, Request(Caller("forwarded")))  # the same clear error as a local retry
        request = relay(held.request.caller) if relay is not None else Request(held.request.caller, held.request.meta)
        request.input_responses = responses
        return await self.resume(state, request)

    async def _next(self, held: HeldCall) -> Any:
        """Wait for the held call to finish or to ask; answer with its result or its questions."""
        held.asked = anyio.Event()
        try:
            if not held.done.is_set() and not held.questions:
                await held.asked.wait()
        except anyio.get_cancelled_exc_class():
            # Its client cancelled or hung up (a 2026-07-28 client's only way over HTTP): the server's call
            # stops too, as any call's does, and nothing of it is kept.
            self._held.pop(held.id, None)
            held.scope.cancel()
            raise
        if held.questions and not held.done.is_set():
            questions = {key: as_input_request(method, params) for key, (method, params) in held.questions.items()}
            held.touched, held.handed = time.monotonic(), set(held.questions)
            return types.InputRequiredResult(input_requests=questions, request_state=held_state(held.id, self.holder))
        self._held.pop(held.id, None)
        if held.failure is not None:
            raise held.failure
        return held.result
