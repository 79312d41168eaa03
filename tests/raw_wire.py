"""Raw JSON-RPC to a real gateway, for input no SDK client would send: lines on a stdio gateway's stdin,
and what a serving gateway says of its backends (the live snapshot `manifold servers` reads)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.conftest import manifold_command

MODERN = "2026-07-28"
SESSION = "2025-11-25"
CLIENT_INFO = {"name": "raw-wire", "version": "1"}


def modern_meta() -> dict[str, Any]:
    """The `_meta` envelope every 2026-07-28 request carries."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


async def live_backends(data_dir: Path, timeout: float = 20.0) -> dict[str, dict[str, Any]]:
    """Each backend's status row (pid, restarts, state, ...) from a snapshot written after this call."""
    asked = time.time()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in (data_dir / "live").glob("*.json"):
            try:
                snapshot = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if snapshot.get("written_at", 0) > asked:
                return {row["name"]: row for row in snapshot["servers"]}
        await anyio.sleep(0.2)
    raise TimeoutError(f"no live snapshot in {data_dir} after {timeout}s")


class RawStdio:
    """A gateway on stdio as a subprocess, spoken to line by line; answers are collected by id."""

    def __init__(self, config: Path, *extra: str) -> None:
        self.config = config
        self.data_dir = Path(json.loads(config.read_text())["manifold"]["data_dir"])
        self.command = manifold_command(config, *extra)
        self.answers: list[dict[str, Any]] = []  # every answer (a message with an id, no method), in order
        self.messages: list[dict[str, Any]] = []  # everything the gateway wrote, notifications too, in order
        self.lines = 0  # lines read from the gateway
        self._arrived = anyio.Event()
        self._next_id = 0
        self._process: anyio.abc.Process | None = None

    async def __aenter__(self) -> RawStdio:
        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        try:
            await self._stack.enter_async_context(self._running())
        except BaseException:
            await self._stack.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._stack.__aexit__(*exc_info)

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        with open(self.config.parent / "gateway-stderr.log", "ab") as stderr:
            process = await anyio.open_process(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=dict(os.environ)
            )
        self._process = process
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    if process.stdin is not None:
                        await process.stdin.aclose()
                    with anyio.move_on_after(10):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                tasks.cancel_scope.cancel()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stream = BufferedByteReceiveStream(self._process.stdout)
        while True:
            try:
                line = await stream.receive_until(b"\n", 512 * 1024 * 1024)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                break
            self.lines += 1
            message = json.loads(line)
            self.messages.append(message)
            if "method" not in message:  # requests and notifications from the gateway are not answers
                self.answers.append(message)
            self._arrived.set()
            self._arrived = anyio.Event()
        self._arrived.set()

    async def send_raw(self, line: bytes) -> None:
        assert self._process is not None and self._process.stdin is not None
        await self._process.stdin.send(line.rstrip(b"\n") + b"\n")

    async def wait_answer(self, request_id: Any, timeout: float = 60.0, start: int = 0) -> dict[str, Any]:
        """The first answer (from index `start`) with `request_id` (None: an error answered with id null)."""
        with anyio.fail_after(timeout):
            while True:
                for answer in self.answers[start:]:
                    if answer.get("id") == request_id and (request_id is not None or "error" in answer):
                        return answer
                if not self.alive and self._process is not None and self._process.returncode is not None:
                    raise AssertionError(f"the gateway exited with {self._process.returncode}")
                await self._arrived.wait()

    async def ask_raw(self, line: bytes, request_id: Any, timeout: float = 60.0) -> dict[str, Any]:
        start = len(self.answers)
        await self.send_raw(line)
        return await self.wait_answer(request_id, timeout, start)

    def new_id(self) -> str:
        self._next_id += 1
        return f"raw-{self._next_id}"

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0) -> dict[str, Any]:
        request_id = self.new_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.ask_raw(json.dumps(message).encode(), request_id, timeout)

    async def open_session(self) -> None:
        """The session-era opening: initialize, then notifications/initialized."""
        params = {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
        answer = await self.request("initialize", params)
        assert "result" in answer, answer
        await self.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    async def open_modern(self) -> None:
        """The 2026-07-28 opening: server/discover with the envelope."""
        answer = await self.request("server/discover", {"_meta": modern_meta()})
        assert "result" in answer, answer

    async def backends(self) -> dict[str, dict[str, Any]]:
        return await live_backends(self.data_dir)
