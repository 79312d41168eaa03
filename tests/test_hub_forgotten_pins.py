# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""Replicas sharing state forget the pins of a hub instance registered under a generated id once it is gone:
the store drops them, a running replica drops what it merged, and a replica that was stopped meanwhile drops
them from its own file rather than offering them back. Real gateways, a real redis-server, real SDK clients."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx  # the MCP SDK's HTTP client
import pytest
import redis
from mcp import Client

from mcp_manifold._runtime.discovery import write_record
from mcp_manifold._runtime.registration import build_record
from tests.conftest import answer_elicitation, free_port, gateway_over_http, server_over_http
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def servers_pinned(data_dir: Path) -> set[str]:
    if not (data_dir / "pins.sqlite").exists():
        return set()  # the gateway listens before it opened its data
    with sqlite3.connect(data_dir / "pins.sqlite") as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'pins'").fetchone() is None:
            return set()  # created, its table not yet
        return {server for (server,) in db.execute("SELECT DISTINCT server FROM pins")}


def config(folder: Path, **settings: Any) -> Path:
    folder.mkdir()
    path = folder / "mcp.json"
    manifold = {"http": True, "data_dir": str(folder / "data"), "ping_interval": 0.3, **settings}
    path.write_text(json.dumps({"mcpServers": {}, "manifold": manifold}))
    return path


async def until(condition: Any, what: str) -> None:
    with anyio.move_on_after(30):
        while not condition():
            await anyio.sleep(0.1)
        return
    raise AssertionError(f"not so after 30 s: {what}")


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def ready(port: int) -> bool:
    return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200


async def test_replicas_forget_the_pins_of_a_generated_instance(redis_server: RedisServer, tmp_path: Path) -> None:
    store = redis.Redis.from_url(redis_server.url)
    discovery = tmp_path / "instances"
    discovery.mkdir(mode=0o700)
    shared = {"state_url": redis_server.url}
    a = config(tmp_path / "a", expose=["hub"], discovery_dir=str(discovery), **shared)
    b = config(tmp_path / "b", **shared)
    late = config(tmp_path / "late", **shared)
    with ExitStack() as stack, server_over_http("shifty.py") as url, gateway_over_http(a, port_a := free_port()):
        # `manifold register` without --id, as a developer runs it next to a server
        command = [sys.executable, "-m", "mcp_manifold", "register", "--name", "shifty", "--url", url]
        register = subprocess.Popen(
            [*command, "--discovery-dir", str(discovery), "--ping-interval", "0.5"], start_new_session=True
        )
        stack.callback(lambda: register.poll() is None and register.kill())
        await until(lambda: any(discovery.iterdir()), "register wrote its record")
        instance_id = next(discovery.iterdir()).stem
        async with Client(f"http://127.0.0.1:{port_a}/mcp", mode="legacy") as client:
            assert not (await client.call_tool("instances_connect", {"instance_id": instance_id})).is_error
            await until(lambda: store.hlen("manifold:pins") == 2, "the store has its pins")
            with gateway_over_http(b, free_port(), timeout=60):
                await until(lambda: servers_pinned(tmp_path / "b" / "data") == {instance_id}, "b merged them")
                # A replica stopped now keeps them in its file.
                with sqlite3.connect(tmp_path / "b" / "data" / "pins.sqlite") as source:
                    (tmp_path / "late" / "data").mkdir(mode=0o700)
                    source.backup(sqlite3.connect(tmp_path / "late" / "data" / "pins.sqlite"))

                register.send_signal(signal.SIGTERM)  # deregistered: gone from the store once stale there
                assert register.wait(timeout=10) == 0
                await client.call_tool("instances_disconnect", {})

                async def gone() -> bool:
                    return instance_id not in text_of(await client.call_tool("instances_list", {}))

                with anyio.fail_after(30):
                    while not await gone():
                        await anyio.sleep(0.2)
                assert servers_pinned(tmp_path / "a" / "data") == set()
                await until(lambda: store.hlen("manifold:pins") == 0, "the store forgot them")
                await until(lambda: servers_pinned(tmp_path / "b" / "data") == set(), "b forgot them")
            assert servers_pinned(tmp_path / "late" / "data") == {instance_id}
            with gateway_over_http(late, port := free_port(), timeout=60):
                await until(lambda: ready(port), "the late replica is ready")
                # Forgotten before it offers what it knows: never written back to the store.
                assert servers_pinned(tmp_path / "late" / "data") == set()
            assert store.hlen("manifold:pins") == 0
            assert store.zscore("manifold:pins:forgotten", instance_id) is not None


async def test_what_the_replicas_learned_of_a_generated_instance_goes_with_it(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The replicas share the servers that ask their client mid-call (`needs_session`) in a Redis set keyed by the
    server's name: it gained one entry per hub instance registered under a generated id, kept for good, though
    learned.json's goes when the instance does. Now the set's goes too. (A session-era client is one that can
    answer the question, which is what makes the gateway learn.)"""
    store = redis.Redis.from_url(redis_server.url)
    discovery = tmp_path / "instances"
    discovery.mkdir(mode=0o700)
    settings = {"expose": ["hub"], "discovery_dir": str(discovery), "state_url": redis_server.url}
    with (
        server_over_http("midcall.py") as url,
        gateway_over_http(config(tmp_path / "a", **settings), port := free_port()),
    ):
        async with Client(
            f"http://127.0.0.1:{port}/mcp", mode="legacy", elicitation_callback=answer_elicitation
        ) as client:
            record = build_record("midcall", url=url, pid=os.getpid())
            write_record(discovery, record)
            call = {"instance_id": record.id, "tool": "confirm", "arguments": {"action": "deploy"}}
            await client.call_tool("instances_call", call)
            await until(lambda: store.scard("manifold:asks-mid-call") == 1, "the replicas learned it")
            (discovery / f"{record.id}.json").unlink()
            store.hdel("manifold:instances", record.id)  # deregistered (`manifold register` exits)
            assert record.id not in text_of(await client.call_tool("instances_list", {}))
            await until(lambda: store.scard("manifold:asks-mid-call") == 0, "the replicas forgot it")
