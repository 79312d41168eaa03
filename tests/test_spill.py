"""The spill store, reading result files back, and rendering results as text: plain code, no processes."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import mcp_types as types
import pytest

from mcp_manifold._core.results import SpillPolicy, estimate_tokens, render_result, spill_if_due
from mcp_manifold._errors import AccessDenied, InvalidRequest, NotFound
from mcp_manifold._runtime import result_files as readresult
from mcp_manifold._runtime.spill import (
    MAX_ARGUMENTS_CONTAINERS,
    MAX_TOON_ARGUMENTS_BYTES,
    MIN_FILE_BYTES,
    SpillStore,
    read_arguments,
)


def text_result(text: str, **extra: object) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], **extra)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> SpillStore:
    return SpillStore(tmp_path / "spill", ttl=60)


# --- the store -------------------------------------------------------------------------------------


def test_files_are_private_and_removed_at_close(store: SpillStore) -> None:
    spilled = store.write("one\ntwo\nthree", ".txt")
    assert spilled.path.read_text() == "one\ntwo\nthree"
    assert (spilled.byte_size, spilled.line_count, spilled.estimated_tokens) == (13, 3, 4)
    assert stat.S_IMODE(spilled.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(spilled.path.parent.stat().st_mode) == 0o700
    assert spilled.path.parent.parent == store.base
    store.close()
    assert not spilled.path.parent.exists()


def test_nothing_is_created_until_something_is_spilled(tmp_path: Path) -> None:
    SpillStore(tmp_path / "spill", ttl=60).close()
    assert not (tmp_path / "spill").exists()


def test_expired_files_are_swept(tmp_path: Path) -> None:
    now = [time.time()]
    store = SpillStore(tmp_path / "spill", ttl=30, clock=lambda: now[0])
    old = store.write("old")
    now[0] += 31
    fresh = store.write("fresh")  # writing sweeps first
    assert not old.path.exists() and fresh.path.exists()
    now[0] += 31
    store.sweep()
    assert not fresh.path.exists()


def test_a_spill_never_lists_the_directory_however_many_files_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiry and `max_bytes` are kept from what the store wrote. Each spill scanned and stat'ed every file of its
    directory, on the event loop: 130 ms a spill at 3,000 files here, and up to 262,144 (1 GiB / 4 KiB) live for
    an hour, so busy spilling stalled every session. The oldest still go first, and the expired."""
    now = [time.time()]
    store = SpillStore(tmp_path / "spill", ttl=30, max_bytes=3 * MIN_FILE_BYTES, clock=lambda: now[0])
    first, second, third = (store.write(f"result {n}") for n in range(3))
    listed: list[object] = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda *args: listed.append(args) or scandir(*args))
    fourth = store.write("result 3")  # no room: the oldest goes
    assert not first.path.exists() and all(f.path.exists() for f in (second, third, fourth))
    assert store.bytes_on_disk() == 3 * len("result 3")
    now[0] += 31
    store.sweep()
    assert not any(f.path.exists() for f in (second, third, fourth)) and store.bytes_on_disk() == 0
    assert not listed


def test_directories_of_dead_gateways_are_removed(tmp_path: Path) -> None:
    base = tmp_path / "spill"
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = base / f"gw-{finished.stdout.strip()}-abcd"
    alive = base / f"gw-{os.getppid()}-abcd"
    for directory in (dead, alive):
        directory.mkdir(parents=True)
        (directory / "result-x.json").write_text("{}")
    SpillStore(base, ttl=60).write("new")
    assert not dead.exists() and alive.exists()


# --- paths clients send back -------------------------------------------------------------------------


def test_resolve_accepts_spilled_files_by_path_or_name(store: SpillStore) -> None:
    spilled = store.write("{}")
    assert store.resolve(str(spilled.path), "resultFile") == spilled.path.resolve()
    assert store.resolve(spilled.path.name, "resultFile") == spilled.path.resolve()


def test_resolve_refuses_paths_outside_and_traversal(store: SpillStore, tmp_path: Path) -> None:
    spilled = store.write("{}")
    outside = tmp_path / "secret.json"
    outside.write_text('{"password": "x"}')
    with pytest.raises(AccessDenied, match="'argumentsFile' must name a file in the spill directory"):
        store.resolve(str(outside), "argumentsFile")
    with pytest.raises(AccessDenied, match="outside"):
        store.resolve("/etc/passwd", "argumentsFile")
    with pytest.raises(AccessDenied, match=r"may not contain '\.\.'"):
        store.resolve(str(spilled.path.parent / ".." / ".." / "secret.json"), "resultFile")
    with pytest.raises(AccessDenied, match=r"\.\."):
        store.resolve("../secret.json", "resultFile")
    link = spilled.path.parent / "link.json"
    link.symlink_to(outside)
    with pytest.raises(AccessDenied, match="symlinks are followed"):
        store.resolve(str(link), "resultFile")
    with pytest.raises(NotFound, match="no such file"):
        store.resolve(str(spilled.path.parent / "gone.json"), "resultFile")
    (spilled.path.parent / "sub").mkdir()
    with pytest.raises(InvalidRequest, match="not a regular file"):
        store.resolve(str(spilled.path.parent / "sub"), "resultFile")
    with pytest.raises(InvalidRequest, match="'resultFile' must be the path of a file"):
        store.resolve(42, "resultFile")


def test_allowed_directories_are_accepted_too(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "args.json").write_text('{"a": 1}')
    store = SpillStore(tmp_path / "spill", ttl=60, allowed_dirs=[workspace])
    assert read_arguments(store.resolve(str(workspace / "args.json"), "argumentsFile")) == {"a": 1}


def test_read_arguments_takes_json_or_toon_objects_only(tmp_path: Path) -> None:
    path = tmp_path / "args"
    path.write_text('{"text": "hi", "n": 2}')
    assert read_arguments(path) == {"text": "hi", "n": 2}
    path.write_text("text: hi\nn: 2")
    assert read_arguments(path) == {"text": "hi", "n": 2}
    path.write_text("[1, 2]")
    with pytest.raises(InvalidRequest, match="holds JSON: an array"):
        read_arguments(path)
    path.write_text("[2]: 1,2")
    with pytest.raises(InvalidRequest, match="not a JSON or TOON object"):
        read_arguments(path)


def test_an_arguments_file_of_too_many_objects_or_too_much_toon_is_refused_unparsed(tmp_path: Path) -> None:
    """Parsed, 30 MB of `{}` took the gateway to 1.66 GB, and TOON decodes at about a second per MB:
    both are refused, naming the bound, before anything is parsed."""
    path = tmp_path / "many.json"
    path.write_text('{"a": [' + "{}," * MAX_ARGUMENTS_CONTAINERS + "{}]}")
    with pytest.raises(InvalidRequest, match=rf"holds {MAX_ARGUMENTS_CONTAINERS + 3} brackets; .* at most "):
        read_arguments(path)
    path.write_text('{"a": [' + "{}," * (MAX_ARGUMENTS_CONTAINERS - 3) + "{}]}")
    assert len(read_arguments(path)["a"]) == MAX_ARGUMENTS_CONTAINERS - 2
    toon = tmp_path / "big.toon"
    toon.write_text("text: " + "x" * MAX_TOON_ARGUMENTS_BYTES)
    with pytest.raises(InvalidRequest, match=r"not JSON, and at .* bytes too large to be read as TOON"):
        read_arguments(toon)


def test_odd_paths_and_deep_json_are_clear_errors(store: SpillStore, tmp_path: Path) -> None:
    # Regression: a NUL byte, an unknown `~user` and a deeply nested arguments file raised
    # ValueError, RuntimeError and RecursionError, which reached the client as tracebacks.
    with pytest.raises(InvalidRequest, match="'resultFile' may not contain a NUL character"):
        store.resolve("result\0.json", "resultFile")
    with pytest.raises(NotFound, match=re.escape("'argumentsFile': cannot use '~no-such-user-xyz/a.json'")):
        store.resolve("~no-such-user-xyz/a.json", "argumentsFile")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InvalidRequest, match=re.escape("'argumentsFile': deep.json is nested too deeply")):
        read_arguments(deep)


# --- reading a result file in parts ------------------------------------------------------------------


@pytest.fixture
def numbered(tmp_path: Path) -> Path:
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1, 121)))
    return path


def test_stat(numbered: Path) -> None:
    facts = readresult.stat(numbered)
    assert facts == {"resultFile": str(numbered), "byteSize": 972, "lineCount": 120, "estimatedTokens": 243}


def test_head_tail_and_slice(numbered: Path) -> None:
    head = readresult.head(numbered, 3)
    assert head.body == "line 1\nline 2\nline 3" and head.note == "lines 1-3 of 120"
    assert readresult.head(numbered, 50).body.count("\n") == 49
    tail = readresult.tail(numbered, 2)
    assert tail.body == "line 119\nline 120" and tail.note == "lines 119-120 of 120"
    part = readresult.slice_lines(numbered, 10, 12)
    assert part.body == "line 10\nline 11\nline 12" and part.note == "lines 10-12 of 120"
    assert readresult.slice_lines(numbered, 119, 500).note == "lines 119-120 of 120"
    assert "no lines there" in readresult.slice_lines(numbered, 200, 210).note
    with pytest.raises(InvalidRequest, match=r"'toLine' .* must not be smaller"):
        readresult.slice_lines(numbered, 5, 4)


def test_grep_with_context(numbered: Path) -> None:
    found = readresult.grep(numbered, r"LINE 1[01]$", 1)
    assert found.body.splitlines() == ["9- line 9", "10: line 10", "11: line 11", "12- line 12"]
    assert found.note == "2 matching line(s) of 120"
    apart = readresult.grep(numbered, r"^line (5|50)$", 0)
    assert apart.body.splitlines() == ["5: line 5", "--", "50: line 50"]
    assert readresult.grep(numbered, "nothing", 2).note.startswith("no line of 120 matches")
    with pytest.raises(InvalidRequest, match="'pattern' is not a valid regular expression"):
        readresult.grep(numbered, "(", 0)


def test_read_with_limits(numbered: Path) -> None:
    size = numbered.stat().st_size
    assert readresult.read(numbered, 0, 0).body == numbered.read_text()
    first = readresult.read(numbered, 0, 10)
    assert first.body == "line 1\nlin" and first.note == f"bytes 0-10 of {size}; continue with offset 10"
    assert readresult.read(numbered, size - 9, 0).body == "line 120\n"


def test_huge_numbers_are_answered_not_crashed_on(numbered: Path) -> None:
    # Regression: tail with lines=10**30 raised OverflowError, read with a huge maxBytes tried to
    # allocate it (MemoryError), and a huge offset made seek fail (ValueError / OSError).
    size = numbered.stat().st_size
    assert readresult.tail(numbered, 10**30).note == "lines 1-120 of 120"
    assert readresult.read(numbered, 0, 2**40).body == numbered.read_text()
    assert readresult.read(numbered, 0, 10**30).note == f"all {size} bytes"
    for offset in (2**62, 10**30):
        past = readresult.read(numbered, offset, 10)
        assert past.body == "" and past.note == f"offset {offset} is past the end: the file has {size} bytes"
    assert readresult.read(numbered, size, 0).body == ""


def test_long_lines_are_clipped_but_read_gets_everything(tmp_path: Path) -> None:
    path = tmp_path / "one-line.json"
    path.write_text("x" * 5000 + "needle" + "y" * 5000)
    head = readresult.head(path, 1)
    assert len(head.body) < 2100 and "more characters; use op 'read'" in head.body
    around = readresult.grep(path, "needle", 0).body
    assert "needle" in around and len(around) < 2100
    assert len(readresult.read(path, 0, 0).body) == 10006


def test_multibyte_characters_are_not_garbled_at_a_byte_boundary(tmp_path: Path) -> None:
    path = tmp_path / "utf8.txt"
    path.write_text("é" * 10)
    assert readresult.read(path, 0, 3).body == "é"  # the half character is dropped


# --- results as text ---------------------------------------------------------------------------------


def test_render_json_text_structured_and_other_content() -> None:
    as_json = render_result(text_result('{"files": [1, 2], "total": 2}'))
    assert as_json.suffix == ".json" and json.loads(as_json.text) == {"files": [1, 2], "total": 2}
    assert as_json.text.count("\n") > 2  # indented, so line-based reads work
    assert as_json.top_level_keys() == "[files, total]"
    plain = render_result(text_result("just words"))
    assert (plain.suffix, plain.text, plain.top_level_keys()) == (".txt", "just words", None)
    structured = render_result(
        types.CallToolResult(content=[], structured_content={"result": 3})  # type: ignore[call-arg]
    )
    assert json.loads(structured.text) == {"result": 3}
    assert structured.inline[0].text == '{"result":3}'  # type: ignore[union-attr]
    image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    mixed = render_result(types.CallToolResult(content=[types.TextContent(type="text", text="hi"), image]))
    assert json.loads(mixed.text)[1]["mimeType"] == "image/png"


def test_render_as_toon() -> None:
    rendered = render_result(text_result('{"rows": [{"a": 1, "b": 2}, {"a": 3, "b": 4}]}'), toon=True)
    assert rendered.suffix == ".toon" and rendered.text == "rows[2]{a,b}:\n  1,2\n  3,4"
    assert rendered.inline[0].text == rendered.text  # type: ignore[union-attr]
    assert render_result(text_result("not json"), toon=True).suffix == ".txt"


def test_spill_large_replaces_only_large_results(store: SpillStore) -> None:
    small = text_result("x" * 100)
    assert spill_if_due(small, SpillPolicy(threshold=100, ttl=60), store.write) is None
    assert spill_if_due(small, SpillPolicy(threshold=0, ttl=60), store.write) is None
    big = text_result("y" * 101, is_error=True)
    due = spill_if_due(big, SpillPolicy(threshold=100, ttl=60), store.write)
    assert due is not None
    spilled = due.result
    assert spilled.is_error
    notice = spilled.content[0].text  # type: ignore[union-attr]
    assert "auto-spilled (exceeded 100 bytes)" in notice and "Size: 101 bytes" in notice
    assert spilled.meta is not None and spilled.meta["autoSpilled"] is True
    assert Path(spilled.meta["resultFile"]).read_text() == "y" * 101


def test_token_estimate() -> None:
    assert [estimate_tokens(n) for n in (0, 1, 4, 5, 83421)] == [0, 1, 1, 2, 20856]
