"""A plain `tools/call` to a streamable HTTP server as one JSON POST, outside the SDK's client transport.

The SDK's streamable HTTP client runs every request's POST as a task of its transport's task group and
hands the answer back through memory streams and its dispatcher: about a millisecond of the gateway's
CPU per call more than a stdio server costs, and one POST that fails at the HTTP level ends the whole
session (every call in flight fails with "connection closed"). This leg sends the request the session
stamped (the same `_meta`, the same headers) on the backend's own pooled httpx client (and, with many
calls in flight, on a few more like it: see `_CALLS_PER_CLIENT`) and reads the answer itself:
`application/json`, or a `text/event-stream` whose notifications are handed to the session as if its
transport had read them, and whose requests (a ping, say) the session answers. It reads JSON with the
parser the SDK's client reads it with (pydantic's), so both refuse alike what is no JSON text (a lone
surrogate escaped in a string, say, which Python's `json` would let through to break the client's stream).

What it will not do is left to the SDK's path, which then answers exactly as it does today:
- an answer that says the server did not take the request (a redirect, a 401, a 4xx without a JSON-RPC
  error in it): `post` returns None and the caller sends it the SDK's way. A JSON-RPC error in a 4xx
  (the SDK's server says "Session not found" so), a 5xx and a 202 are answered as the SDK's client does;
- a POST that fails before any byte of it can have reached the server (no connection, a failed write)
  is sent once more on a fresh connection. A failure after that (the server hung up before or while
  answering) is not retried: the server may have run the tool, and a tool call is not idempotent.
  It fails that one call (`BackendUnavailable`); the session and the other calls go on.

An answer stream that ends (or breaks) before the answer, after an event with an id, is taken up again
as the SDK's client does: a GET with `Last-Event-ID` after the server's `retry` interval (a server that
polls, SEP-1699, closes the stream on purpose and keeps the answer in its event store).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

import anyio
import httpx2
import pydantic_core
from mcp.client.streamable_http import (
    DEFAULT_MAX_SSE_EVENT_SIZE,
    DEFAULT_RECONNECTION_DELAY_MS,
    LAST_EVENT_ID,
    MAX_RECONNECTION_ATTEMPTS,
)
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, jsonrpc_message_adapter
from pydantic import ValidationError

from mcp_manifold._errors import BackendUnavailable
from mcp_manifold._runtime.answer_size import AnswerTooLarge
from mcp_manifold._runtime.outbound import raw_request
from mcp_manifold._sdk import HTTP_KEEPALIVE

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
_BASE_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
# Failures in which the request cannot have reached the server whole: safe to send again.
_NEVER_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.WriteError, httpx2.WriteTimeout)

Deliver = Callable[[str, Mapping[str, Any] | None], Awaitable[None]]
Answer = Callable[[Any, str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]
# What a POST that answers the server's question carries over from the call's request.
_ANSWER_HEADERS = ("accept", "content-type", SESSION_HEADER, "mcp-protocol-version")
# What the GET that resumes an answer stream carries over from the call's request (the client's own
# headers, a server's credentials among them, it sends anyway).
_RESUME_HEADERS = frozenset({SESSION_HEADER, "mcp-protocol-version"})


# --- the protocol: what an answer means (no I/O) ------------------------------------------------------


def result_of(message: Any) -> dict[str, Any]:
    """The result of a JSON-RPC response, or the `MCPError` its error becomes (as the SDK's dispatcher does)."""
    if not isinstance(message, dict):
        raise MCPError(PARSE_ERROR, "Failed to parse JSON response: not a JSON-RPC message")
    if "error" in message and isinstance(error := message["error"], dict):
        raise _mcp_error(error)
    result = message.get("result")
    if not isinstance(result, dict):
        raise MCPError(PARSE_ERROR, "Failed to parse JSON response: no result")
    return result


def refused_status(status: int, body_error: dict[str, Any] | None) -> MCPError | None:
    """What a non-2xx answer becomes when the SDK's path would not be asked again: its JSON-RPC error,
    or for a 5xx the SDK's stand-in. None: the server did not take the request (see `HttpLeg.post`)."""
    if body_error is not None:
        return _mcp_error(body_error)
    if status >= 500:
        return MCPError(INTERNAL_ERROR, "Server returned an error response")
    return None


def _mcp_error(error: dict[str, Any]) -> MCPError:
    code = error.get("code")
    return MCPError(code if isinstance(code, int) else INTERNAL_ERROR, str(error.get("message", "")), error.get("data"))


def _parse_failure(body: bytes) -> str:
    """Why `body` is no JSON, in the words the SDK's client uses for it (its message adapter's error), so
    that a call says the same whichever path took it."""
    try:
        jsonrpc_message_adapter.validate_json(body, by_name=False)
    except ValidationError as exc:
        return str(exc)
    return "not JSON"  # the adapter read what the parser could not: not met so far


def _error_in(body: bytes) -> dict[str, Any] | None:
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    error = message.get("error") if isinstance(message, dict) else None
    return error if isinstance(error, dict) else None


class _Resume:
    """Where an answer stream can be taken up again: its last event's id and the server's retry interval."""

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    @property
    def delay(self) -> float:
        return (self.retry_ms if self.retry_ms is not None else DEFAULT_RECONNECTION_DELAY_MS) / 1000


# --- the I/O -----------------------------------------------------------------------------------------

# httpcore checks every idle connection of a pool (a poll(2) on its socket each) whenever a request starts
# or ends there, so one pool serving 32 calls in flight spent a sixth of the gateway's CPU per call on
# those checks. The leg spreads its POSTs over up to `_CLIENTS_MAX` pooled clients, opening the next one
# only when each has `_CALLS_PER_CLIENT` calls in flight: one pool of a few connections each, and a single
# client (the session's own) while calls come one at a time. All of them together carry at most
# `HTTP_KEEPALIVE` calls at once, as the one pool did; more wait their turn.
_CALLS_PER_CLIENT = 4
_CLIENTS_MAX = 8

OpenClient = Callable[[], Awaitable[httpx2.AsyncClient]]


class HttpLeg:
    """The raw leg of one backend session: its pooled client, its URL and its session id (session era)."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        server: str,
        scrub: Callable[[str], str] = lambda text: text,
        open_client: OpenClient | None = None,
    ) -> None:
        """`client` is the session's own; `open_client` opens another like it (its headers, timeouts and
        cookie jar, closed with the session) for when many calls are in flight."""
        self.client = client
        self.url = url
        self.server = server
        self.scrub = scrub  # the server's own redaction (`ServerConfig.scrub`): a transport error may quote it
        self.session_id: str | None = None
        self.deliver: Deliver | None = None  # the session's own handling of a server notification
        self.answer: Answer | None = None  # the session's own answer to a server's request
        self.posts = 0  # POSTs answered on this leg (with a result or an error)
        self.retries = 0  # POSTs sent again after a connection-level failure
        self.fallbacks = 0  # requests handed back to the SDK's path
        self.resumed = 0  # answer streams taken up again with Last-Event-ID
        self._ids = itertools.count(1)
        self._open_client = open_client
        self._clients = [client]
        self._in_flight = [0]  # calls in flight on each of `_clients`
        self._opening = False
        self._room = anyio.Semaphore(HTTP_KEEPALIVE)  # calls in flight on all of them
        client.event_hooks["response"].append(self._note_session)  # beside the start's other watchers

    async def _note_session(self, response: httpx2.Response) -> None:
        # Watched only while the session opens: the handshake's answer carries the session's id.
        if session_id := response.headers.get(SESSION_HEADER):
            self.session_id = session_id

    def opened(self, deliver: Deliver, answer: Answer) -> None:
        """The session is open: stop watching answers for its id; what the server sends in an answer's
        stream goes to the session, a notification to `deliver`, a request to `answer`."""
        self.deliver, self.answer = deliver, answer
        with suppress(ValueError):
            self.client.event_hooks["response"].remove(self._note_session)

    async def post(
        self, method: str, params: Mapping[str, Any] | None, headers: Mapping[str, str]
    ) -> dict[str, Any] | None:
        """Send one request; its result, or None when the server did not take it (send it the SDK's way)."""
        request_id, message = raw_request(next(self._ids), method, params, self.server)
        body = json.dumps(message, separators=(",", ":")).encode()
        sent = dict(_BASE_HEADERS)
        if self.session_id:
            sent[SESSION_HEADER] = self.session_id
        sent.update(headers)
        async with self._room:
            index = await self._client_with_room()
            client = self._clients[index]
            self._in_flight[index] += 1
            try:
                request = client.build_request("POST", self.url, content=body, headers=sent)
                return await self._exchange(client, request, request_id)
            except anyio.get_cancelled_exc_class():
                if self.session_id is not None:  # a session's server hears of it as the SDK's client tells it
                    with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                        await self._cancel(request_id, sent)
                raise  # at 2026-07-28 the POST's closed connection is the signal
            finally:
                self._in_flight[index] -= 1

    @property
    def clients(self) -> int:
        """The pooled clients the leg's POSTs have gone out on so far (the session's own included)."""
        return len(self._clients)

    async def _client_with_room(self) -> int:
        """The index of the client the next POST goes out on: the first with fewer than `_CALLS_PER_CLIENT`
        calls in flight, else a new one (up to `_CLIENTS_MAX`), else the least busy."""
        in_flight = self._in_flight
        for index, calls in enumerate(in_flight):
            if calls < _CALLS_PER_CLIENT:
                return index
        if self._open_client is not None and len(self._clients) < _CLIENTS_MAX and not self._opening:
            self._opening = True
            try:
                client = await self._open_client()
            except Exception:  # never a call's failure: the clients already open serve it
                logger.exception("server %r: could not open another HTTP client for the raw leg", self.server)
                self._open_client = None
            else:
                self._clients.append(client)
                in_flight.append(0)
                return len(self._clients) - 1
            finally:
                self._opening = False
        return min(range(len(in_flight)), key=in_flight.__getitem__)

    async def _exchange(
        self, client: httpx2.AsyncClient, request: httpx2.Request, request_id: str
    ) -> dict[str, Any] | None:
        try:
            response = await client.send(request, stream=True)
        except _NEVER_SENT as exc:
            logger.debug("server %r: POST failed before it was sent (%s); once more", self.server, type(exc).__name__)
            self.retries += 1
            try:
                response = await client.send(request, stream=True)
            except httpx2.TransportError as again:
                raise self._failed(again) from again
        except httpx2.TransportError as exc:
            raise self._failed(exc) from exc
        try:
            result = await self._answer(response, request_id)
        except httpx2.TransportError as exc:
            raise self._failed(exc) from exc
        except MCPError:  # answered on the leg, with an error (the server's, or an answer that did not parse)
            self._answered()
            raise
        except AnswerTooLarge as exc:  # as the SDK's client words an answer it could not read
            self._answered()
            raise MCPError(PARSE_ERROR, f"Failed to parse JSON response: {exc}") from None
        finally:
            await response.aclose()
        if result is None:
            self.fallbacks += 1
        else:
            self._answered()
        return result

    def _answered(self) -> None:
        if not self.posts:
            logger.info("server %r: plain tools/call requests go on the raw HTTP leg", self.server)
        self.posts += 1

    def _failed(self, exc: Exception) -> BackendUnavailable:
        # One call fails, not the session: the next call goes out on another connection.
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return BackendUnavailable(self.server, self.scrub(f"tools/call failed: the HTTP request broke off ({reason})"))

    async def _answer(self, response: httpx2.Response, request_id: str) -> dict[str, Any] | None:
        status = response.status_code
        if status == 202:
            raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if status >= 300:
            error = None
            if status >= 400 and response.headers.get("content-type", "").lower().startswith("application/json"):
                with suppress(AnswerTooLarge):  # then the status speaks, as in the SDK's client
                    error = _error_in(await response.aread())
            refused = refused_status(status, error)
            if refused is None:
                return None
            raise refused
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            body = await response.aread()
            try:
                message = pydantic_core.from_json(body)
            except ValueError:
                raise MCPError(PARSE_ERROR, f"Failed to parse JSON response: {_parse_failure(body)}") from None
            return result_of(message)
        if content_type.startswith("text/event-stream"):
            return await self._read_stream(response, request_id)
        raise MCPError(INVALID_REQUEST, f"Unexpected content type: {content_type}")

    async def _read_stream(self, response: httpx2.Response, request_id: str) -> dict[str, Any]:
        """The answer in `response`'s event stream; when the stream ends without it after an event with an
        id (a server polling, SEP-1699, or a dropped connection), resumed with a GET and `Last-Event-ID`
        after the server's `retry` interval, as the SDK's client does (up to 2 failed tries in a row)."""
        resume = _Resume()
        found = await self._read_events(response, request_id, resume, response.request)
        failures = 0
        while found is None:
            if resume.last_event_id is None:
                raise BackendUnavailable(
                    self.server, "tools/call failed: the server's answer stream ended without the answer"
                )
            if failures >= MAX_RECONNECTION_ATTEMPTS:
                raise BackendUnavailable(
                    self.server,
                    f"tools/call failed: the server's answer stream ended without the answer, and resuming it "
                    f"failed {failures} times",
                )
            await anyio.sleep(resume.delay)
            headers = {key: value for key, value in response.request.headers.items() if key in _RESUME_HEADERS}
            headers.update(accept="text/event-stream", **{LAST_EVENT_ID: resume.last_event_id})
            try:
                async with self.client.stream("GET", self.url, headers=headers, follow_redirects=False) as again:
                    content_type = again.headers.get("content-type", "").lower()
                    if again.status_code != 200 or not content_type.startswith("text/event-stream"):
                        failures += 1
                        continue
                    before = resume.last_event_id
                    found = await self._read_events(again, request_id, resume, response.request)
                    # A try counts as failed unless it moved on: a server that no longer knows the event
                    # (restarted, or another replica) answers an empty stream at once, again and again.
                    failures = 0 if found is not None or resume.last_event_id != before else failures + 1
            except httpx2.SSEError:
                raise
            except httpx2.TransportError:
                failures += 1
            else:
                self.resumed += 1
        return found

    async def _read_events(
        self, response: httpx2.Response, request_id: str, resume: _Resume, posted: httpx2.Request
    ) -> dict[str, Any] | None:
        """The answer to `request_id` (POSTed as `posted`) in one event stream, or None when the stream ends
        (or breaks) first with something to resume from. An oversized event (the SDK client's 1 MiB bound;
        an `SSEError`, a transport error) fails the call, as one the SDK's client read would."""
        try:
            async for event in httpx2.EventSource(response, max_event_size=DEFAULT_MAX_SSE_EVENT_SIZE):
                if event.id:
                    resume.last_event_id = event.id
                if event.retry is not None:
                    resume.retry_ms = event.retry
                if event.event != "message" or not event.data:
                    continue
                try:
                    message = pydantic_core.from_json(event.data)
                except ValueError:
                    continue  # the SDK's reader skips what does not parse, too
                if not isinstance(message, dict):
                    continue
                if "method" not in message:
                    if message.get("id") == request_id:
                        return result_of(message)
                    continue
                if "id" in message:  # the server asks its client (a session that declared nothing: a ping, say)
                    await self._reply(message, posted)
                elif self.deliver is not None:
                    params = message.get("params")
                    await self.deliver(str(message["method"]), params if isinstance(params, dict) else None)
        except httpx2.SSEError:
            raise
        except httpx2.TransportError:
            if resume.last_event_id is None:
                raise
        return None

    async def _cancel(self, request_id: str, headers: dict[str, str]) -> None:
        cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
        with suppress(httpx2.TransportError):
            await self.client.post(self.url, content=json.dumps(cancelled).encode(), headers=headers)

    async def _reply(self, asked: dict[str, Any], request: httpx2.Request) -> None:
        """Answer the server's request as the session answers it, in a POST of its own (as the SDK's client does)."""
        params = asked.get("params")
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": asked["id"]}
        try:
            if self.answer is None:
                raise MCPError(METHOD_NOT_FOUND, "Method not found")
            params = params if isinstance(params, dict) else None
            reply["result"] = await self.answer(asked["id"], str(asked["method"]), params)
        except MCPError as exc:
            reply["error"] = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        headers = {key: request.headers[key] for key in _ANSWER_HEADERS if key in request.headers}
        with suppress(httpx2.TransportError):
            await self.client.post(self.url, content=json.dumps(reply).encode(), headers=headers)
