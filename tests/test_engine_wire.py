"""The gateway's end of the code-mode engine's wire (`_surfaces/code/engine_wire.py`), with no engine: what a
hostile engine process may send, from arbitrary bytes, and the round trip of what either side writes."""

from __future__ import annotations

import io
import json
import math
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_manifold._surfaces.code.engine_wire import WireBroken, read_message, read_plainly, write_message

MOST = 512  # the bound on a message's length in these tests


@contextmanager
def sent(data: bytes, at: int | None = None) -> Iterator[int]:
    """A pipe holding `data`, its writing end closed (as an engine process that exits): the reading end's fd,
    moved to `at` when given."""
    reader, writer = os.pipe()
    try:
        os.write(writer, data)
        os.close(writer)
        if at is not None:
            os.dup2(reader, at)
            os.close(reader)
            reader = at
        yield reader
    finally:
        os.close(reader)


def read(fd: int) -> dict[str, Any] | None:
    return read_message(fd, time.monotonic() + 30, MOST, lambda: False)


def rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=700) | st.binary(max_size=64).map(lambda tail: b"\0" * 6 + tail))
def test_arbitrary_bytes_are_a_message_or_the_wires_one_error(data: bytes) -> None:
    """Whatever an engine process sends, the gateway gets an object read to exactly its end, or `WireBroken`:
    never another exception, never a wait (the pipe is closed), never a read past a length it refused."""
    with sent(data) as fd:
        try:
            message = read(fd)
        except WireBroken:
            return
        assert type(message) is dict
        length = int.from_bytes(data[:8], "big")
        assert length <= MOST and rest(fd) == data[8 + length :]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None, exclude_categories=())),  # lone surrogates too (a JavaScript string's)
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
messages = st.dictionaries(st.text(max_size=8), json_values, max_size=4)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(messages, min_size=1, max_size=3))
def test_what_either_side_writes_it_reads_back_in_order(written: list[dict[str, Any]]) -> None:
    stream = io.BytesIO()
    for message in written:
        start = stream.tell()
        write_message(stream, message)
        assert stream.getvalue()[start + 8 :].isascii()  # a lone surrogate crosses escaped
    data = stream.getvalue()
    stream.seek(0)
    assert [read_plainly(stream) for _ in written] == written and read_plainly(stream) is None
    if len(data) < 60_000:  # a pipe's buffer
        with sent(data) as fd:
            assert [read_message(fd, time.monotonic() + 30, len(data), lambda: False) for _ in written] == written


def test_a_message_longer_than_the_bound_is_refused_before_it_is_read() -> None:
    with sent((MOST + 1).to_bytes(8, "big") + b"{}") as fd:
        with pytest.raises(WireBroken, match=f"more than the {MOST}"):
            read(fd)
        assert rest(fd) == b"{}"


def test_an_engine_whose_pipe_is_numbered_past_1023_is_read() -> None:
    """`select` cannot wait on a descriptor numbered past 1023 (FD_SETSIZE): in a gateway holding that many (1100
    idle HTTP connections), every engine process started then failed its every program."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= 1500:
        pytest.skip("this process may not open descriptor 1500")
    body = json.dumps({"done": {"ok": True}}).encode()
    with sent(len(body).to_bytes(8, "big") + body, at=1500) as fd:
        assert read(fd) == {"done": {"ok": True}}
