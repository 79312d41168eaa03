"""The raw stdio leg's answers read off the server's stdout (`stdio_leg._StdoutAnswers`), with no I/O:
whatever the server writes, cut into reads anywhere, every well-formed answer to the leg is taken (and
wakes its request with what it said), every other byte reaches the SDK's reader unchanged and in order,
whole lines at a time, and what came before an answer is handed over before the answer is taken."""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any

import anyio
import anyio.abc
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from mcp_manifold._runtime.stdio_leg import StdioLeg


class _Reads(anyio.abc.ByteReceiveStream):
    """A pipe that gives these chunks, one per read, then its end."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)

    async def aclose(self) -> None:
        self.chunks.clear()


def _line(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


# What a server may write beside the leg's answers, each left for the SDK's reader.
OTHERS: dict[str, bytes] = {
    "notification": _line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}}),
    "the session's own answer, naming a leg id": _line(
        {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": '"manifold-1'}]}}
    ),
    "a leg id written with escapes": b'{"jsonrpc":"2.0","id":"\\u006danifold-1","result":{}}\n',
    "an answer with a member too many": _line({"jsonrpc": "2.0", "id": "manifold-2", "result": {}, "extra": 1}),
    "a result that is no object": _line({"jsonrpc": "2.0", "id": "manifold-2", "result": [1]}),
    "an error with a code that is no integer": _line(
        {"jsonrpc": "2.0", "id": "manifold-2", "error": {"code": "-1", "message": "m"}}
    ),
    "a request from the server with a leg-like id": _line({"jsonrpc": "2.0", "id": "manifold-3", "method": "ping"}),
    "no JSON": b'{"jsonrpc":"2.0","id":"manifold-1",\n',
    "not UTF-8": b'{"id":"manifold-1","x":"\xff"}\n',
    "text in many scripts": _line({"jsonrpc": "2.0", "method": "m", "params": {"t": "é漢字🙂" * 40}}),
    "an empty line": b"\n",
}
# Answers to a request given up (nobody waits): taken all the same, and dropped.
LATE = _line({"jsonrpc": "2.0", "id": "manifold-99", "result": {"content": []}})


def _answer(request_id: str, number: int, error: bool) -> bytes:
    if error:
        return _line({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"bad {number}"}})
    return _line({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": f"é{number}"}]}})


async def _run(others: list[str], late: bool, errors: list[bool], seed: int, cuts: list[int]) -> None:
    leg = StdioLeg("kitchen")
    stdin_send, stdin_receive = anyio.create_memory_object_stream[bytes](10)
    leg.attach(stdin_send)
    outcomes: dict[str, Any] = {}

    async def call(number: int) -> None:
        try:
            outcomes[str(number)] = await leg.post("tools/call", {"name": "echo"}, {})
        except MCPError as exc:
            outcomes[str(number)] = exc.error.message

    with anyio.fail_after(10):  # a request its answer never reached would wait forever
        async with anyio.create_task_group() as group:
            ids = []
            for number in range(len(errors)):
                group.start_soon(call, number)
                ids.append(json.loads(await stdin_receive.receive())["id"])
            answers = [
                _answer(request_id, number, error)
                for number, (request_id, error) in enumerate(zip(ids, errors, strict=True))
            ]
            lines = answers + [OTHERS[name] for name in others] + ([LATE] if late else [])
            random.Random(seed).shuffle(lines)
            data = b"".join(lines)
            points = sorted({cut % len(data) for cut in cuts} - {0})
            chunks = [data[start:end] for start, end in zip([0, *points], [*points, len(data)], strict=True)]
            stdout = leg.reading_stdout(_Reads(chunks))
            handed: list[bytes] = []
            while True:
                try:
                    handed.append(await stdout.receive())
                except anyio.EndOfStream:
                    break

    kept = [line for line in lines if line not in answers and line != LATE]
    assert b"".join(handed) == b"".join(kept)
    assert all(piece.endswith(b"\n") for piece in handed)  # whole lines only
    assert outcomes == {
        str(number): f"bad {number}" if error else {"content": [{"type": "text", "text": f"é{number}"}]}
        for number, error in enumerate(errors)
    }


@settings(max_examples=300, deadline=None)
@given(
    others=st.lists(st.sampled_from(sorted(OTHERS)), max_size=8),
    late=st.booleans(),
    errors=st.lists(st.booleans(), min_size=1, max_size=4),
    seed=st.integers(0, 2**32),
    cuts=st.lists(st.integers(1, 10_000), max_size=40),
)
def test_answers_are_taken_and_everything_else_reaches_the_sdk_unchanged(
    others: list[str], late: bool, errors: list[bool], seed: int, cuts: list[int]
) -> None:
    anyio.run(_run, others, late, errors, seed, cuts)


def test_a_log_written_before_an_answer_is_handled_before_the_answer_wakes_its_request() -> None:
    """Shaped like the SDK's stdio transport and session: a reader task reads lines off stdout and hands
    each, on a stream with no buffer, to a dispatcher task, which starts a task for each notification."""

    async def main() -> None:
        leg = StdioLeg("kitchen")
        stdin_send, stdin_receive = anyio.create_memory_object_stream[bytes](10)
        leg.attach(stdin_send)
        seen: list[str] = []
        to_session, session = anyio.create_memory_object_stream[bytes](0)

        async def call() -> None:
            await leg.post("tools/call", {"name": "log"}, {})
            seen.append("answer")

        async def reader(stdout: anyio.abc.ByteReceiveStream) -> None:
            async with to_session:
                with contextlib.suppress(anyio.EndOfStream):
                    while True:
                        for line in (await stdout.receive()).splitlines():
                            await to_session.send(line)

        async def note(line: bytes) -> None:
            seen.append(json.loads(line)["params"]["data"])

        async def dispatcher() -> None:
            async with session, anyio.create_task_group() as notifications:
                async for line in session:
                    notifications.start_soon(note, line)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                request_id = json.loads(await stdin_receive.receive())["id"]
                group.start_soon(dispatcher)
                await anyio.wait_all_tasks_blocked()  # the session waits for what the server says
                log = OTHERS["notification"]
                # One read holds both, as when the server writes them back to back under load.
                group.start_soon(reader, leg.reading_stdout(_Reads([log + _answer(request_id, 1, False)])))
        assert seen == ["x", "answer"]

    anyio.run(main)


def test_a_last_line_without_its_newline_still_reaches_the_sdk() -> None:
    async def main() -> None:
        leg = StdioLeg("kitchen")
        stdout = leg.reading_stdout(_Reads([b'{"jsonrpc":"2.0",', b'"method":"m"}']))
        assert await stdout.receive() == b'{"jsonrpc":"2.0","method":"m"}'

    anyio.run(main)
