"""kitchen_pipes: `tests/servers/kitchen.py` over stdio with the SDK's stdio transport reading and writing
its pipes on the event loop, where mcp 2.3's `stdio_server()` hands every line read, every write and
every flush to a worker thread (`anyio.wrap_file`).

For the HTTP throughput bench only. It answers what the SDK's stdio server costs per call without those
three thread hops, and so what a gateway in front of such a server can do on two shared cores
(`bench/stdio_alone.py`, `bench/http_throughput.py --with-pipes`). The server, its tools and the SDK's
session are kitchen.py's own; only the two streams under `stdio_server()` differ. If the SDK stops
looking up `stdio_server` in `mcp.server.mcpserver.server`, this fails at start rather than measure the
unchanged transport.

Run: ``python bench/kitchen_pipes.py`` (stdio).
"""

from __future__ import annotations

import asyncio
import contextlib
import runpy
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp.server.mcpserver.server as mcpserver_module
import mcp.server.stdio as sdk_stdio

KITCHEN = Path(__file__).resolve().parent.parent / "tests" / "servers" / "kitchen.py"
LINE_LIMIT = 2**24  # a request line may be large; the SDK's own reader has no limit


class _Lines:
    """What `stdio_server()` iterates for its requests: stdin's lines as text, read on the event loop."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode()


class _Writer:
    """What `stdio_server()` writes its answers to: stdout's pipe, written on the event loop."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport

    async def write(self, text: str) -> None:
        self._transport.write(text.encode())

    async def flush(self) -> None:
        """Nothing to flush: the transport writes at once, or buffers what the pipe cannot take yet."""


@contextlib.asynccontextmanager
async def stdio_on_the_loop(stdin: Any = None, stdout: Any = None) -> AsyncIterator[Any]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    async with sdk_stdio.stdio_server(stdin=_Lines(reader), stdout=_Writer(transport)) as streams:
        yield streams


def main() -> None:
    if getattr(mcpserver_module, "stdio_server", None) is not sdk_stdio.stdio_server:
        raise SystemExit("kitchen_pipes: the SDK no longer serves stdio through mcpserver.server.stdio_server")
    mcpserver_module.stdio_server = stdio_on_the_loop  # type: ignore[attr-defined]
    sys.path.insert(0, str(KITCHEN.parent))
    sys.argv = [str(KITCHEN), *sys.argv[1:]]
    runpy.run_path(str(KITCHEN), run_name="__main__")


if __name__ == "__main__":
    main()
