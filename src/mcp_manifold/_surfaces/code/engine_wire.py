"""The messages between the gateway and a program's engine process: JSON objects, each after its length.

JSON, not pickle: the process runs a caller's program, and the gateway never unpickles what such a process
sends. ASCII escapes throughout, so a JavaScript string's lone surrogate crosses as `\\ud800`, never as
bytes UTF-8 cannot hold. The gateway reads with a deadline and a size bound (`read_message`); the engine
process, which only ever waits on the gateway, reads plainly (`read_plainly`).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any, BinaryIO

_LENGTH = struct.Struct(">Q")


class WireBroken(Exception):
    """The other side sent what is no message (or too much), or closed: its process is to be stopped."""


def write_message(stream: BinaryIO, message: dict[str, Any]) -> None:
    body = json.dumps(message, separators=(",", ":")).encode("ascii")
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def read_plainly(stream: BinaryIO) -> dict[str, Any] | None:
    """The next message, waiting as long as it takes; None when the other side closed."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    body = stream.read(length)
    if len(body) < length:
        return None
    return _parsed(body)


def read_message(
    fd: int, deadline: float, most: int, stopped: Any, most_containers: int | None = None
) -> dict[str, Any] | None:
    """The next message on `fd`, or None once `deadline` (monotonic) passed or `stopped()` says so. Raises
    `WireBroken` for a message longer than `most` bytes, or holding more than `most_containers` `{` and `[`
    (in strings too), one that is no JSON object, or a closed pipe."""
    head = _read_exactly(fd, _LENGTH.size, deadline, stopped)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > most:
        raise WireBroken(f"a message of {length} bytes, more than the {most} the engine process may send")
    body = _read_exactly(fd, length, deadline, stopped)
    if body is None:
        return None
    # Parsed, an object or array costs far more than its two bytes: counted in C before, never parsed past.
    if most_containers is not None and body.count(b"{") + body.count(b"[") > most_containers:
        raise WireBroken(f"a message of more than {most_containers} objects and arrays")
    return _parsed(body)


def _read_exactly(fd: int, count: int, deadline: float, stopped: Any) -> bytes | None:
    chunks: list[bytes] = []
    # `poll`, not `select`: select cannot wait on a descriptor numbered past 1023, and a gateway holding that many
    # (its clients' connections) gave each engine process started then such pipes, and failed its every program.
    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    while count:
        left = deadline - time.monotonic()
        if left <= 0 or stopped():
            return None
        # A tenth of a second at most between looks at `stopped`: a cancelled request ends its program soon.
        if not waiting.poll(min(left, 0.1) * 1000):
            continue
        chunk = os.read(fd, min(count, 1 << 20))
        if not chunk:
            raise WireBroken("the engine process closed its end")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _parsed(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        raise WireBroken("a message that is not JSON") from None
    if type(message) is not dict:
        raise WireBroken("a message that is not a JSON object")
    return message
