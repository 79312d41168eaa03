"""Held calls across replicas: a 2026-07-28 client's retry that reaches a replica other than the one holding
its call is handed to that replica, which resumes the call and answers; the answer is relayed back.

The sealed `requestState` names the holder (`HeldCalls.holder`); the replica directory maps it to the
holder's internal address; the replicas show each other a shared token on the internal route
(`/_manifold/held`), which clients cannot use. The resumed call's progress and logs stay on the holder
(its answer and further questions come back); a holder that is gone is a clear error: call again.
"""

from __future__ import annotations

import hmac
from typing import Any

import httpx2 as httpx  # the MCP SDK's HTTP client
import mcp_types as types
from pydantic import BaseModel

from mcp_manifold._core.clients import Request
from mcp_manifold._errors import ManifoldError
from mcp_manifold._runtime.input_bridge import HeldCalls, State
from mcp_manifold._runtime.shared_state.replicas import ReplicaDirectory

HELD_PATH = "/_manifold/held"
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
    if "error" in answer:
        raise ManifoldError(str(answer["error"]))
    model = _RESULTS.get(str(answer.get("type")))
    if model is None:
        raise ManifoldError("the replica holding this call sent an answer this replica cannot read; call it again")
    return model.model_validate(answer["result"])


_GONE = (
    "the replica holding the call these answers are for is gone (stopped or crashed), and the call with it; "
    "call the tool again"
)


def _plain(answer: Any) -> Any:
    return answer.model_dump(mode="json", by_alias=True, exclude_none=True) if isinstance(answer, BaseModel) else answer


class HeldForwarding:
    """Both ends: `forward` (the replica a retry reached) and `answer` (the holder)."""

    def __init__(self, held: HeldCalls, directory: ReplicaDirectory, token: str, timeout: float) -> None:
        self.held = held
        self.directory = directory
        self.token = token
        self.timeout = timeout
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout + 30, connect=5))

    async def forward(self, state: State, request: Request) -> Any:
        url = await self.directory.address(state.holder or "")
        if url is None:
            raise ManifoldError(_GONE)
        responses = {key: _plain(answer) for key, answer in (request.input_responses or {}).items()}
        body = {"holder": state.holder, "id": state.held_id, "responses": responses}
        try:
            response = await self._client.post(
                url.rstrip("/") + HELD_PATH, json=body, headers={TOKEN_HEADER: self.token}
            )
        except httpx.ConnectError:  # its row has not expired yet, but nothing listens there any more
            raise ManifoldError(_GONE) from None
        except httpx.HTTPError as exc:
            raise ManifoldError(
                f"could not reach the replica holding this call ({type(exc).__name__}); call the tool again"
            ) from None
        if response.status_code != 200:
            raise ManifoldError(f"the replica holding this call refused its answers (HTTP {response.status_code})")
        return decode(response.json())

    def allowed(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.token.encode())

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The holder's side: resume the held call with the forwarded answers; its answer, encoded."""
        state = State("held", held_id=str(body.get("id")), holder=str(body.get("holder")))
        responses = body.get("responses")
        try:
            result = await self.held.resume_forwarded(state, responses if isinstance(responses, dict) else {})
        except Exception as exc:  # the call's own failure, as a local retry would raise it
            return {"error": str(exc)}
        return encode(result)

    async def close(self) -> None:
        await self._client.aclose()
