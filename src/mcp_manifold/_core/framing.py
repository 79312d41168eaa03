"""What to answer a line that is not a JSON-RPC message the SDK can read: an error, never silence.

The SDK's reader (pydantic's JSON parser) refuses some lines outright: malformed JSON, nesting past
its limit, a lone surrogate in a string (`"\\ud800"`), a batch, an object that is no JSON-RPC message.
Over stdio it then answers nothing, and the client waits on that request forever. JSON-RPC says to
answer a parse error (id null) or an invalid request (its id, when one can be read), so the stdio
front does, with a message saying what was wrong. Notifications and responses get no answer, as the
protocol says. Plain code: the front writes what this returns.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types

from mcp_manifold._core.arguments import encoding_problem


def unreadable_line_answer(line: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error answering `line`, which the SDK could not read; None when nothing is due."""
    try:
        message = json.loads(line)
    except RecursionError:
        return _error(None, types.PARSE_ERROR, "Parse error: the message is nested too deeply")
    except ValueError:
        return _error(None, types.PARSE_ERROR, "Parse error: the message is not valid JSON")
    if isinstance(message, list):
        return _error(None, types.INVALID_REQUEST, "Invalid request: batches are not supported")
    if not isinstance(message, dict):
        return _error(None, types.INVALID_REQUEST, "Invalid request: a JSON-RPC message is a JSON object")
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str) or encoding_problem(request_id):
        request_id = None  # an id that cannot be echoed back: JSON-RPC answers with null
    if "method" not in message:
        return None  # a response (or something like one): answering it could start a loop
    if request_id is None:
        if "id" not in message:
            return None  # a notification gets no answer, even a bad one
        return _error(None, types.INVALID_REQUEST, f"Invalid request: {_id_problem(message['id'])}")
    return _error(request_id, types.INVALID_REQUEST, f"Invalid request: {_what_is_wrong(message)}")


# An `"id"` whose value is neither a string nor an integer (null, a boolean, a fraction, an exponent, an
# array, an object, or Python's NaN and -Infinity): only a message with one needs `misread_request_answer`'s look.
_ODD_ID = re.compile(rb'"id"\s*:\s*(?:[^\s"\-0-9]|-[^0-9]|-?[0-9]+[.eE])')


def may_be_misread(data: bytes) -> bool:
    """Whether `data` may hold a request the SDK would take for a notification (a quick scan)."""
    return _ODD_ID.search(data) is not None


def misread_request_answer(data: bytes) -> dict[str, Any] | None:
    """The error for a request whose `id` JSON-RPC does not allow (`1.5`, `null`, `true`, ...), which the
    SDK reads as a notification and so never answers; None for anything else."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return None
    request_id = message["id"]
    if isinstance(request_id, int | str) and not isinstance(request_id, bool):
        return None  # a usable id: the SDK reads a request, and answers it
    return _error(None, types.INVALID_REQUEST, f"Invalid request: {_id_problem(request_id)}")


def _id_problem(request_id: Any) -> str:
    if isinstance(request_id, str):
        return encoding_problem(request_id, "'id'") or "'id' is not usable"
    return "'id' must be a string or an integer"


def _what_is_wrong(message: dict[str, Any]) -> str:
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    problem = encoding_problem(arguments) if isinstance(arguments, dict) else None
    problem = problem or encoding_problem(message, "field")
    if problem is not None:
        return problem
    if message.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if not isinstance(message.get("method"), str):
        return "'method' must be a string"
    return "the message does not fit JSON-RPC 2.0"


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
