"""`BoundedLines` (`_runtime/processes.py`), a stdio server's stdout in whole lines with no process: whatever
reads the server's writes arrive in, each line gets the verdict it gets alone."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_manifold._runtime.processes import BoundedLines, LineTooLong

LIMIT = 128 << 10  # max_answer_bytes here: a line may hold LIMIT // 64 = 2048 objects and arrays
COUNTED_PAST = 64 << 10  # lines no longer than this are never counted


class Reads(anyio.abc.ByteReceiveStream):
    """A server's stdout arriving in the given reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = list(reads)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._reads:
            raise anyio.EndOfStream
        return self._reads.pop(0)

    async def aclose(self) -> None:
        self._reads = []


def verdict(lines: list[bytes]) -> tuple[bytes, str | None]:
    """What the reader gets, judging each line alone: the lines before the first unfit one, and why it is."""
    for at, line in enumerate(lines):
        body = line.removesuffix(b"\n")
        if len(body) > LIMIT:
            return b"".join(lines[:at]), "a line of more than"
        if len(body) + 1 > COUNTED_PAST and line.count(b"{") + line.count(b"[") > LIMIT // 64:
            return b"".join(lines[:at]), "an answer of more than"
    return b"".join(lines), None


async def read_all(reads: list[bytes]) -> tuple[bytes, str | None]:
    ended: list[str] = []
    stream = BoundedLines(Reads(reads), "s", ended.append, LIMIT)
    got = []
    try:
        while True:
            got.append(await stream.receive())
    except anyio.EndOfStream:
        assert not ended
        return b"".join(got), None
    except LineTooLong as error:
        assert ended == [str(error)]
        return b"".join(got), str(error).partition(" wrote ")[2]


sizes = st.sampled_from([0, 10, 2000, COUNTED_PAST - 2, COUNTED_PAST - 1, COUNTED_PAST, 100_000, LIMIT, LIMIT + 1])
brackets = st.sampled_from([0, 5, 2047, 2048, 2049, 3000])


@st.composite
def outputs(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    """(a server's lines, its stdout cut into reads)."""
    lines = []
    for size, count in draw(st.lists(st.tuples(sizes, brackets), min_size=1, max_size=5)):
        count = min(count, size)
        lines.append(b"{" * (count // 2) + b"[" * (count - count // 2) + b"x" * (size - count) + b"\n")
    if draw(st.booleans()):  # the last line's newline never comes: the stream ends
        lines[-1] = lines[-1][:-1]
    stdout = b"".join(lines)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(stdout) - 1)), max_size=6))))
    reads = [stdout[a:b] for a, b in zip([0, *cuts], [*cuts, len(stdout)], strict=True) if a < b]
    return lines, reads


@settings(max_examples=100, deadline=None, derandomize=True)
@given(outputs())
def test_each_line_gets_its_own_verdict_however_its_bytes_are_read(case: tuple[list[bytes], list[bytes]]) -> None:
    """A line's verdict was that of everything ending in the same read: an answer of fewer objects than the
    bound, followed in one write by a few small lines of `[`, closed the server's connection; and a line's
    length was judged only while it had no end, so one just past the bound ending in the read that ends it
    passed. (`verdict` judges each line alone.)"""
    lines, reads = case
    expected_bytes, why = verdict(lines)
    got_bytes, got_why = anyio.run(read_all, reads)
    assert got_bytes == expected_bytes
    assert (got_why or "").startswith(why or ""), (got_why, why)
    assert (got_why is None) == (why is None)


@pytest.mark.parametrize("reads", [[b"a\n"], [b"a", b"\n"], [b"a"]])
def test_short_lines_pass_whole(reads: list[bytes]) -> None:
    assert anyio.run(read_all, reads) == (b"".join(reads), None)


def test_a_line_past_the_bound_is_refused_when_its_end_comes_in_the_read_that_ends_it() -> None:
    """It was judged only while it had no end: LIMIT bytes, then a read with one more and its newline, passed."""
    got, why = anyio.run(read_all, [b"x" * LIMIT, b"x\nnext\n"])
    assert (got, why) == (b"", "a line of more than 131072 bytes on stdout (max_answer_bytes)")
