"""Held calls across replicas: a 2026-07-28 client's retry that reaches a replica other than the one holding
its call is handed to that replica, which resumes the call and answers; the answer is relayed back.

The sealed `requestState` names the holder (`HeldCalls.holder`); the replica directory maps it to the
holder's internal address; the replicas show each other a shared token on the internal route
(`/_manifold/held`), which clients cannot use. The holder answers with one JSON object per line: the
resumed call's progress and log messages as they come (the forwarding replica sends them on the client's
request), then its answer (the result, or the next questions). A holder that is gone is a clear error:
call again.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from typing import Any

import anyio
import anyio.abc
import httpx2 as httpx  # the MCP SDK's HTTP client
import mcp_types as types
from mcp_types import LOG_LEVEL_META_KEY
from pydantic import BaseModel

from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._errors import InvalidRequest, ManifoldError
from mcp_manifold._runtime.input_bridge import HOLDER_GONE, HeldCalls, State
from mcp_manifold._runtime.shared_state.replicas import ReplicaDirectory
from mcp_manifold._runtime.shared_state.shared_secrets import SharedSecret
from mcp_manifold._runtime.shared_state.store import StateUnavailable

HELD_PATH = "/_manifold/held"
# Seconds between the blank lines a holder writes while the call it resumed says nothing: the forwarding
# replica's read never times out on a call that runs long (held_call_timeout bounds only a client's answer).
KEEP_ALIVE = 10.0
TOKEN_HEADER = "x-manifold-replica-token"
# What a held call can end with (tools/call, resources/read, prompts/get), by the name sent along.
_RESULTS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (types.CallToolResult, types.InputRequiredResult, types.ReadResourceResult, types.GetPromptResult)
}


def encode(result: Any) -> dict[str, Any]:
    """A held call's answer, as the holder sends it to the replica that forwarded the retry."""
    model = getattr(result, "model", None)
    if callable(model) and not isinstance(result, BaseModel):  # a result kept in wire form
        result = model()
    return {"type": type(result).__name__, "result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}


def decode(answer: dict[str, Any]) -> Any:
    if "error" in answer:  # a retry refused for what it sent is refused as such, as on the holder
        raise (InvalidRequest if answer.get("invalid") else ManifoldError)(str(answer["error"]))
    model = _RESULTS.get(str(answer.get("type")))
    if model is None:
        raise ManifoldError("the replica holding this call sent an answer this replica cannot read; call it again")
    return model.model_validate(answer["result"])


def _plain(answer: Any) -> Any:
    return answer.model_dump(mode="json", by_alias=True, exclude_none=True) if isinstance(answer, BaseModel) else answer


class HeldForwarding:
    """Both ends: `forward` (the replica a retry reached) and `answer` (the holder)."""

    def __init__(self, held: HeldCalls, directory: ReplicaDirectory, token: SharedSecret, timeout: float) -> None:
        self.held = held
        self.directory = directory
        self.token = token
        self.timeout = timeout
        # Each forwarded retry holds a connection for as long as its call runs (a call may run long): no cap
        # on connections, so one client's long calls never leave another's retry queued for a slot.
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout + 30, connect=5), limits=httpx.Limits(max_connections=None)
        )

    async def forward(self, state: State, request: Request) -> Any:
        try:
            url = await self.directory.address(state.holder or "")
        except StateUnavailable:  # its text names the store's host: for the log (said there), not the client
            raise ManifoldError(
                "could not look up the replica holding this call: the shared state store is unreachable; "
                "call the tool again"
            ) from None
        if url is None or url == self.directory.url:  # this address: a run of this replica before a restart
            raise ManifoldError(HOLDER_GONE)
        responses = {key: _plain(answer) for key, answer in (request.input_responses or {}).items()}
        body = {
            "holder": state.holder,
            "id": state.held_id,
            "responses": responses,
            "progress": request.wants_progress,
            "logLevel": request.log_level,
        }
        answer: dict[str, Any] | None = None
        status = 200
        try:
            async with self._client.stream(
                "POST", url.rstrip("/") + HELD_PATH, json=body, headers={TOKEN_HEADER: self.token.value}
            ) as response:
                status = response.status_code
                if status == 200:
                    async for line in response.aiter_lines():
                        if line and (answer := await _relay(json.loads(line), request)) is not None:
                            break
        except httpx.ConnectError:  # its row has not expired yet, but nothing listens there any more
            raise ManifoldError(HOLDER_GONE) from None
        except (httpx.HTTPError, ValueError) as exc:
            raise ManifoldError(
                f"could not reach the replica holding this call ({type(exc).__name__}); call the tool again"
            ) from None
        if status != 200:
            raise ManifoldError(f"the replica holding this call refused its answers (HTTP {status})")
        if answer is None:  # it stopped in the middle of its answer
            raise ManifoldError(HOLDER_GONE)
        return decode(answer)

    def allowed(self, token: str | None) -> bool:
        if token is None:
            return False
        # Every accepted value compared (no early exit): the time taken says nothing about which matched.
        matches = [hmac.compare_digest(token.encode(), value.encode()) for value in self.token.accepted]
        return any(matches)

    async def answer(self, body: dict[str, Any], lines: anyio.abc.ObjectSendStream[bytes]) -> None:
        """The holder's side: resume the held call with the forwarded answers. Sends its progress and logs
        to `lines`, one JSON line each, as they come, then its answer (encoded), and closes `lines`."""
        state = State("held", held_id=str(body.get("id")), holder=str(body.get("holder")))
        responses = body.get("responses")
        level = body.get("logLevel")

        def relay(caller: Caller) -> Request:
            return _RelayedRequest(caller, bool(body.get("progress")), level if isinstance(level, str) else None, lines)

        async with lines:
            async with anyio.create_task_group() as beating:
                beating.start_soon(_keep_alive, lines)
                try:
                    result = encode(
                        await self.held.resume_forwarded(state, responses if isinstance(responses, dict) else {}, relay)
                    )
                except Exception as exc:  # the call's own failure, as a local retry would raise it
                    result = {"error": str(exc), "invalid": isinstance(exc, InvalidRequest)}
                beating.cancel_scope.cancel()
            await lines.send(_line(result))

    async def close(self) -> None:
        await self._client.aclose()


RELAY_BUFFER = 256  # progress and log lines waiting for the forwarding replica; past that, dropped (best effort)


async def _keep_alive(lines: anyio.abc.ObjectSendStream[bytes]) -> None:
    while True:
        await anyio.sleep(KEEP_ALIVE)
        # A full buffer: lines are flowing anyway. A closed one: the forwarding replica is gone.
        with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            lines.send_nowait(b"\n")  # a blank line, which the forwarding replica skips


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, default=str).encode() + b"\n"


class _RelayedRequest(Request):
    """The forwarded retry as the holder sees it: what it wants (progress, a log level) and a way back."""

    def __init__(
        self, caller: Caller, progress: bool, level: str | None, lines: anyio.abc.ObjectSendStream[bytes]
    ) -> None:
        meta: dict[str, Any] = {}
        if progress:
            meta["progressToken"] = "relayed"
        if level is not None:
            meta[LOG_LEVEL_META_KEY] = level
        super().__init__(caller, meta or None)
        self._lines = lines

    def _send(self, message: dict[str, Any]) -> None:
        # After the answer (the call goes on to its next question) or past the buffer, nothing waits for it.
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._lines.send_nowait(_line(message))

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._send({"progress": {"progress": progress, "total": total, "message": message}})

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        self._send({"log": {"level": level, "data": data, "logger": logger_name}})


async def _relay(message: dict[str, Any], request: Request) -> dict[str, Any] | None:
    """One line from the holder: progress or a log message, sent on the client's request here (None), or
    the answer (returned)."""
    if "progress" in message:
        if request.wants_progress:
            sent = message["progress"]
            await request.progress(float(sent["progress"]), sent.get("total"), sent.get("message"))
        return None
    if "log" in message:
        sent = message["log"]
        await request.log(sent["level"], sent.get("data"), sent.get("logger"))
        return None
    return message
