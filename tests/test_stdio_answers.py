"""The raw stdio leg's answers read off the server's stdout (`stdio_leg._StdoutAnswers`), with no I/O:
whatever the server writes, cut into reads anywhere, every well-formed answer to the leg is taken (and
wakes its request with what it said), every other byte reaches the SDK's reader unchanged and in order,
whole lines at a time, and what came before an answer is handed over before the answer is taken."""

from __future__ import annotations

import contextlib
import copy
import json
import random
import sys
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp_types import JSONRPCResponse

from mcp_manifold._runtime.stdio_leg import StdioLeg
from mcp_manifold._sdk import _StdoutReadThrough


class _Reads(anyio.abc.ByteReceiveStream):
    """A pipe that gives these chunks, one per read, then its end."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()  # as a pipe's read may: a reader that never stops can be timed out
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)

    async def aclose(self) -> None:
        self.chunks.clear()


def _leg_on_memory() -> tuple[StdioLeg, anyio.abc.ObjectReceiveStream[bytes]]:
    """A leg whose "stdin" is a memory stream, and that stream's other end: what the leg writes."""
    leg = StdioLeg("kitchen")
    stdin_send, stdin_receive = anyio.create_memory_object_stream[bytes](10)
    leg.attach(stdin_send)  # type: ignore[arg-type]
    return leg, stdin_receive


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
    leg, stdin_receive = _leg_on_memory()
    outcomes: dict[str, Any] = {}
    handed: list[bytes] = []
    taken_after: dict[bytes, int] = {}  # each answer taken: the bytes handed over by then
    take = leg.answered_line

    def answered_line(line: bytes) -> bool:
        taken = take(line)
        if taken:
            taken_after[line] = sum(map(len, handed))
        return taken

    leg.answered_line = answered_line  # type: ignore[method-assign]

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
            for _ in range(len(data) + 2):  # a reader that never ends fails rather than spins
                try:
                    handed.append(await stdout.receive())
                except anyio.EndOfStream:
                    break
            else:
                raise AssertionError("the reader never ended")

    kept = [line for line in lines if line not in answers and line != LATE]
    # Each answer is taken once every line written before it was handed over, and not before.
    offset = 0
    for line in lines:
        if line in kept:
            offset += len(line)
        else:
            assert taken_after[line] == offset
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


@pytest.mark.parametrize("reads", ["one read", "two reads"])
@pytest.mark.parametrize("relay_steps", [0, 1])
def test_a_log_written_before_an_answer_is_handled_before_the_answer_wakes_its_request(
    reads: str, relay_steps: int
) -> None:
    """Shaped like the SDK's stdio transport and session: a reader task reads lines off stdout and hands
    each, on a stream with no buffer, to a dispatcher task, which starts a task for each notification.
    That task may take a step before it relays the log (`relay_steps`), as it could when the answers
    came through the session's read stream."""

    async def main() -> None:
        leg, stdin_receive = _leg_on_memory()
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
            for _ in range(relay_steps):
                await anyio.lowlevel.checkpoint()
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
                log, answer = OTHERS["notification"], _answer(request_id, 1, False)
                # In one read, as when the server writes them back to back under load, or one after the other.
                chunks = [log + answer] if reads == "one read" else [log, answer]
                group.start_soon(reader, leg.reading_stdout(_Reads(chunks)))
        assert seen == ["x", "answer"]

    anyio.run(main)


def test_a_last_line_without_its_newline_still_reaches_the_sdk() -> None:
    async def main() -> None:
        leg = StdioLeg("kitchen")
        stdout = leg.reading_stdout(_Reads([b'{"jsonrpc":"2.0",', b'"method":"m"}']))
        assert await stdout.receive() == b'{"jsonrpc":"2.0","method":"m"}'

    anyio.run(main)


def test_a_second_answer_to_one_request_changes_nothing() -> None:
    """Whichever way each comes (read off stdout, or picked out of the session's stream), the first answer
    to a request is the one its caller gets."""

    async def main() -> None:
        leg, stdin_receive = _leg_on_memory()
        answered: list[Any] = []

        async def call() -> None:
            answered.append(await leg.post("tools/call", {"name": "echo"}, {}))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                request_id = json.loads(await stdin_receive.receive())["id"]
                assert leg.answered_line(_answer(request_id, 1, False))
                assert leg.answered_line(_answer(request_id, 2, False))
                assert leg.answered(JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"content": []}))
        assert answered == [{"content": [{"type": "text", "text": "é1"}]}]

    anyio.run(main)


def test_the_process_read_through_the_leg_is_still_the_process() -> None:
    """What the SDK and the gateway read off the process they were handed: the real one's, but stdout."""
    real = SimpleNamespace(pid=4321, returncode=None, stdin="stdin", stderr=None, _process="asyncio's")
    stdout = _Reads([])
    process = _StdoutReadThrough(real, stdout)  # type: ignore[arg-type]
    assert isinstance(process, anyio.abc.Process)  # the SDK asserts it before it ends the process group
    assert (process.pid, process.returncode, process.stdin, process.stdout) == (4321, None, "stdin", stdout)
    assert process._process == "asyncio's"  # type: ignore[attr-defined]  # the SDK closes its transport
    assert copy.copy(process).pid == 4321  # no endless lookup while a copy is built


# A process that copies what it reads on stdin into the file it is given: the server's side of the pipe.
_RECORDER = "import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, open(sys.argv[1], 'wb'), 1)"
LOOPS = pytest.mark.parametrize("uvloop", [False, True], ids=["asyncio", "uvloop"])


async def _recorded(record: Any, work: Any) -> list[str]:
    """Run `work(leg)` with the leg on a real pipe to a recorder (into the file `record`); the methods it was sent."""
    process = await anyio.open_process([sys.executable, "-c", _RECORDER, str(record)])
    leg = StdioLeg("kitchen")
    assert process.stdin is not None
    leg.attach(process.stdin)
    try:
        with anyio.fail_after(20):
            await work(leg)
    finally:
        await process.stdin.aclose()
        with anyio.fail_after(20):
            await process.wait()
    return [json.loads(line)["method"] for line in record.read_text().splitlines()]


@LOOPS
def test_a_call_given_up_before_it_went_out_never_reaches_the_server(tmp_path: Any, uvloop: bool) -> None:
    """The leg writes to the pipe itself, not through anyio's send: a call whose scope was cancelled before
    it was written (while shielded, as a limiter's acquire is) must not run on the server."""

    async def cancelled_first(leg: StdioLeg) -> None:
        with anyio.CancelScope() as outer:
            with anyio.CancelScope(shield=True):
                outer.cancel()
                await anyio.lowlevel.checkpoint()  # shielded: the cancellation waits
            await leg.post("tools/call", {"name": "echo"}, {})
        assert outer.cancelled_caught

    async def cancelled_waiting(leg: StdioLeg) -> None:  # the control: written, then given up while waiting
        with anyio.move_on_after(0.5):
            await leg.post("tools/call", {"name": "echo"}, {})

    assert anyio.run(_recorded, tmp_path / "a.jsonl", cancelled_first, backend_options={"use_uvloop": uvloop}) == []
    sent = anyio.run(_recorded, tmp_path / "b.jsonl", cancelled_waiting, backend_options={"use_uvloop": uvloop})
    assert sent == ["tools/call", "notifications/cancelled"]


@LOOPS
def test_a_request_on_a_pipe_whose_server_is_gone_fails_as_a_closed_connection(tmp_path: Any, uvloop: bool) -> None:
    """asyncio says so with ConnectionResetError or BrokenPipeError, uvloop with a RuntimeError: either way the
    caller gets the SDK's "Connection closed"."""

    async def main() -> None:
        process = await anyio.open_process([sys.executable, "-c", "pass"])  # reads nothing, and is gone
        await process.wait()
        leg = StdioLeg("kitchen")
        assert process.stdin is not None
        leg.attach(process.stdin)
        with anyio.fail_after(20):
            for _ in range(3):  # the first write may still be taken by the pipe's buffer
                with pytest.raises(MCPError, match=r"^Connection closed$"):
                    await leg.post("tools/call", {"name": "echo", "arguments": {"text": "x" * 100_000}}, {})

    anyio.run(main, backend_options={"use_uvloop": uvloop})
