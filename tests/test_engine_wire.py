"""The gateway's end of the code-mode engine's wire (`_surfaces/code/engine_wire.py`), with no engine: what a
hostile engine process may send, from arbitrary bytes, and the round trip of what either side writes."""

from __future__ import annotations

import io
import json
import logging
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_manifold._runtime.worker_processes import WorkerProcesses
from mcp_manifold._surfaces.code.engine_processes import MODULE, IsolatedSandbox
from mcp_manifold._surfaces.code.engine_wire import WireBroken, read_message, read_plainly, write_message
from mcp_manifold._surfaces.code.sandbox import Limits, Settled, most_containers

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
    return read_message(fd, time.monotonic() + 30, MOST, lambda: False, MOST // 4)


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


def test_a_message_of_more_objects_than_the_bound_is_refused_before_it_is_parsed() -> None:
    body = b'{"round":[' + b"{}," * 100 + b"{}]}"  # 103 objects and arrays
    with sent(len(body).to_bytes(8, "big") + body) as fd, pytest.raises(WireBroken, match="more than 102 objects"):
        read_message(fd, time.monotonic() + 30, len(body), lambda: False, 102)
    with sent(len(body).to_bytes(8, "big") + body) as fd:
        assert read_message(fd, time.monotonic() + 30, len(body), lambda: False, 103) is not None


class HostileEngines:
    """Engine processes that send `body` as their first message (an engine whose program escaped its sandbox)."""

    def __init__(self, body: bytes) -> None:
        self.script = (
            f"import sys; sys.stdout.buffer.write({len(body).to_bytes(8, 'big') + body!r}); sys.stdout.flush()"
        )
        self.discarded = 0

    def take(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", self.script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def give_back(self, process: subprocess.Popen[bytes]) -> None:
        raise AssertionError("a hostile engine is never kept")

    def discard(self, process: subprocess.Popen[bytes]) -> None:
        self.discarded += 1
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def test_an_engine_sending_more_objects_than_a_program_may_is_stopped_unparsed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The gateway parsed any message up to 6 x code_memory_mb + 1 MiB (769 MB by default) whatever it held:
    60 MB of `{}` from an engine took it to 1.6 GB. Past the objects a program's messages may hold, the engine
    is stopped and the program fails, as for any message its worker does not write."""
    limits = Limits(memory_bytes=1 << 20, output_chars=1000, max_calls=10)
    engines = HostileEngines(b'{"round":[' + b"{}," * most_containers(limits) + b"{}]}")
    with caplog.at_level(logging.WARNING):
        outcome = IsolatedSandbox(engines, ["t"], limits).run("1", lambda calls, left: [])
    assert outcome.error == "the program's engine stopped answering as it should" and engines.discarded == 1
    assert f"a message of more than {most_containers(limits)} objects and arrays" in caplog.text  # never parsed


def test_a_round_of_as_many_objects_as_a_program_may_send_reaches_the_gateway() -> None:
    """The bound holds what the engine's worker writes: a round of 40,000 `{}` in its arguments (41,943 may be sent
    together for 16 MB), through a real engine process."""
    engines = WorkerProcesses(MODULE, 1)
    seen: list[int] = []

    def perform(calls: list[Any], left: float) -> list[Settled]:
        seen.extend(len(call.arguments["a"]) for call in calls)
        return [Settled(call.id, True, "{}") for call in calls]

    try:
        code = "return (await tools.x({a: Array(40000).fill({})})) !== undefined"
        outcome = IsolatedSandbox(engines, ["x"], Limits(memory_bytes=16 << 20)).run(code, perform)
    finally:
        engines.close()
    assert outcome.ok and outcome.value == "true" and seen == [40000], outcome
