"""Telling, from a server's answer, that it could not ask its client what it wanted to, and why.

A server that asks its client mid-call (sampling, elicitation, roots) cannot, at 2026-07-28 (no channel
for it), nor in a session that never declared the client can answer (the gateway's shared session over
HTTP promises nothing). It says so in its answer: a sentence its SDK wrote (`_sdk.asked_without_back_channel`)
or a -32021 error naming the capabilities it needed. Whether that is the client's shortcoming (it cannot
answer) or the session's (it can, the session did not say so) decides what the call path does: pass the
answer on, or make the call again where the server can ask (`AskElsewhere`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_types as types

from mcp_manifold._core.clients import ASKS, Caller
from mcp_manifold._core.wire import WireResult
from mcp_manifold._errors import BackendRequestError
from mcp_manifold._sdk import asked_without_back_channel

if TYPE_CHECKING:
    from mcp_manifold._runtime.backends import Backend

# A server's errors to a tool call that ask the client to act (declare a capability it lacks, open a URL),
# with what to do in their data: the client gets them as errors, not as a tool's error text.
CLIENT_MUST_ACT = frozenset({types.MISSING_REQUIRED_CLIENT_CAPABILITY, types.URL_ELICITATION_REQUIRED})
# A server that could not ask its client says so in a sentence or two; longer results are not read for it.
_SAYS_IT_COULD_NOT_ASK = 4096
_ASKED_WITH = {ask: method for method, ask in ASKS.items()}


class AskElsewhere(Exception):
    """The server could not ask its client through the session the call went to: make it again on `backend`."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend.name)
        self.backend = backend


def could_not_ask(backend: Backend, text: str) -> str | None:
    """The method the server says (in `text`) it could not send its client mid-call, if `backend`'s session
    could not have carried it: 2026-07-28 has no channel for it, and a session-era session carries only
    what it declared the client can answer."""
    asked = asked_without_back_channel(text) if text else None
    if asked is None or (not backend.modern and ASKS.get(asked) in backend.declared):
        return None
    return asked


def refused_to_ask(text: str) -> bool:
    """Whether a tool's answer is the server's refusal to ask (it opens with the sentence) rather than a
    text that quotes it somewhere."""
    return asked_without_back_channel(text.lstrip(), opening=True) is not None


def required_untold(backend: Backend, caller: Caller, exc: BackendRequestError) -> str | None:
    """The method of a question a session-era server refused to ask with -32021 because the session never
    declared what `caller` can in fact answer: the session's shortcoming, not the client's. (A 2026-07-28
    request declares its own client's capabilities: there -32021 is the client's to act on.)"""
    if exc.code != types.MISSING_REQUIRED_CLIENT_CAPABILITY or backend.modern or not isinstance(exc.data, dict):
        return None
    required = exc.data.get("requiredCapabilities")
    for ask in required if isinstance(required, dict) else ():
        if ask in caller.asks and ask not in backend.declared:
            return _ASKED_WITH.get(ask)
    return None


def may_say_it_could_not_ask(backend: Backend, caller: Caller, result: types.CallToolResult | WireResult) -> bool:
    """Whether `result` is worth reading for that sentence (most are not, and reading costs on every call):
    an error, or an answer in the server's own words (a session-era SDK's) when the session left out
    something `caller` could have answered."""
    return result.is_error or (not backend.modern and not caller.asks <= backend.declared)


def text_of(result: types.CallToolResult | WireResult) -> str:
    """The text blocks of a short tool result, model or wire form, joined; "" for a long one."""
    texts = []
    size = 0
    for block in result.content:
        text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
        if isinstance(text, str):
            size += len(text)
            if size > _SAYS_IT_COULD_NOT_ASK:
                return ""
            texts.append(text)
    return " ".join(texts)
