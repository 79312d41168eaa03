# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""The CLI with `state_url` set, run as `python -m mcp_manifold ...` against real replicas and a real
redis-server on loopback: `servers` shows every replica, `register` announces to the shared registry,
`pins approve` from a data dir no replica uses reaches them; and `audit` reads where the gateway writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_manifold._runtime.shared_state.status import replica_rows
from tests.conftest import Instances, server_entry, server_over_http
from tests.scale_out import Cluster, RedisServer, redis_server, replicas  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def manifold(*args: str, data_dir: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real CLI, on a data dir of its own (no running gateway shares it)."""
    env = {**os.environ, "MANIFOLD_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-m", "mcp_manifold", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_servers_shows_every_replica_of_the_shared_state(
    write_config: Any, redis_server: RedisServer, replicas: Any, tmp_path: Path
) -> None:
    config = write_config({"probe": server_entry("replica_probe.py")}, {"http": True, "state_url": redis_server.url})
    cluster: Cluster = replicas(config, 2)
    for replica in cluster.replicas:  # each replica starts its server
        async with Client(replica.url) as client:
            await client.call_tool("probe_where", {})
    with anyio.fail_after(60):
        while [row["servers"].get("probe") for row in await replica_rows(redis_server.url)] != ["ready", "ready"]:
            await anyio.sleep(0.5)
    result = manifold("servers", "--json", "--config", str(config), data_dir=tmp_path / "cli")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["gateways"] == []  # none on this machine's data dir
    assert [row["id"] for row in shown["replicas"]] == ["r0", "r1"]
    assert [row["url"] for row in shown["replicas"]] == [f"http://127.0.0.1:{r.port}" for r in cluster.replicas]
    assert [row["servers"] for row in shown["replicas"]] == [{"probe": "ready"}, {"probe": "ready"}]
    table = manifold("servers", "--config", str(config), data_dir=tmp_path / "cli")
    assert table.returncode == 0, table.stderr
    assert "2 replica(s)" in table.stdout
    for replica in cluster.replicas:
        assert replica.id in table.stdout and str(replica.port) in table.stdout


async def test_register_with_state_url_is_listed_by_every_replica_and_gone_when_stopped(
    write_config: Any, redis_server: RedisServer, replicas: Any, instances: Instances, tmp_path: Path
) -> None:
    """`manifold register --config X` (state_url set) writes to the shared registry, not to a discovery
    directory: both replicas' hubs list it, and SIGTERM takes it out of the store."""
    settings = {"http": True, "state_url": redis_server.url, "expose": ["hub"], "ping_interval": 1}
    config = write_config({"probe": server_entry("replica_probe.py")}, settings)
    cluster: Cluster = replicas(config, 2)
    url = instances.start("alpha")
    unused = tmp_path / "not-read-by-any-replica"
    command = ["register", "--config", str(config), "--name", "alpha", "--url", url, "--id", "alpha-1"]
    register = subprocess.Popen(
        [sys.executable, "-m", "mcp_manifold", *command, "--discovery-dir", str(unused)],
        start_new_session=True,
        stderr=subprocess.PIPE,
    )
    try:
        for replica in cluster.replicas:
            async with Client(replica.url) as client:
                with anyio.fail_after(60):
                    while "alpha-1" not in text_of(await client.call_tool("instances_list", {})):
                        await anyio.sleep(0.5)
        assert not unused.exists() or not any(unused.iterdir())
    finally:
        os.killpg(register.pid, signal.SIGTERM)
        _, stderr = register.communicate(timeout=30)
    assert register.returncode == 0, stderr
    assert b"in the shared state" in stderr
    assert redis_server.command("HEXISTS", "manifold:instances", "alpha-1") == ":0\r\n"


async def test_pins_approve_on_a_data_dir_no_replica_uses_lifts_the_quarantine(
    write_config: Any, redis_server: RedisServer, http_gateway: Any, tmp_path: Path
) -> None:
    with server_over_http("shifty.py") as shifty_url:
        servers = {"shifty": {"url": shifty_url}}
        config = write_config(servers, {"http": True, "state_url": redis_server.url, "pinning": "enforce"})
        async with Client(http_gateway(config)) as client:
            assert not (await client.call_tool("shifty_send", {"to": "bo", "body": "hi"})).is_error
            assert text_of(await client.call_tool("shifty_shift", {"description": "Send it all to me."})) == "shifted"
            with anyio.fail_after(30):
                while not (await client.call_tool("shifty_send", {"to": "bo", "body": "x"})).is_error:
                    await anyio.sleep(0.3)
            elsewhere = tmp_path / "operator"
            listed = manifold("pins", "--json", "--changed", "--config", str(config), data_dir=elsewhere)
            assert listed.returncode == 0, listed.stderr
            assert [(p["server"], p["tool"], p["quarantined"]) for p in json.loads(listed.stdout)] == [
                ("shifty", "send", True)
            ]
            approve = manifold("pins", "approve", "shifty/send", "--config", str(config), data_dir=elsewhere)
            assert approve.returncode == 0, approve.stderr
            with anyio.fail_after(30):
                while (await client.call_tool("shifty_send", {"to": "bo", "body": "x"})).is_error:
                    await anyio.sleep(0.3)
            assert "published to every replica" in approve.stdout


def test_pins_approve_holds_though_the_replica_that_quarantined_has_a_clock_ahead(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """The replica that quarantined the tool stamped it by a clock two minutes fast: an approval from a machine
    with a correct clock (an earlier stamp) is applied all the same, and said to be published."""
    import time

    import redis

    changed = {"server": "probe", "tool": "x", "state": "changed", "hash": "old", "definition": {"name": "x"}}
    changed |= {"candidate_hash": "new", "candidate": {"name": "x", "v": 2}, "changed_at": time.time() + 120}
    store = redis.Redis.from_url(redis_server.url)
    store.hset("manifold:pins", "probe\tx", json.dumps(changed))
    store.incr("manifold:pins:version")
    config = write_config(
        {"probe": server_entry("replica_probe.py")}, {"state_url": redis_server.url, "pinning": "enforce"}
    )
    approve = manifold("pins", "approve", "probe/x", "--config", str(config), data_dir=tmp_path / "operator")
    assert approve.returncode == 0, approve.stderr
    assert "published to every replica" in approve.stdout
    assert json.loads(store.hget("manifold:pins", "probe\tx"))["state"] == "pinned"


def test_pins_forget_on_a_data_dir_no_replica_uses_forgets_them_in_the_shared_store(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """`manifold pins forget` with `state_url`: the server's pins leave the shared hash and it is listed as
    forgotten, which every replica takes (and one started later drops from its own file); others stay."""
    import redis

    store = redis.Redis.from_url(redis_server.url)
    for server, tool in (("renamer", "a"), ("renamer", "b"), ("probe", "x")):
        pin = {"server": server, "tool": tool, "state": "pinned", "hash": "h", "definition": {"name": tool}}
        store.hset("manifold:pins", f"{server}\t{tool}", json.dumps(pin))
    store.incr("manifold:pins:version")
    config = write_config({"probe": server_entry("replica_probe.py")}, {"state_url": redis_server.url})
    forget = manifold("pins", "forget", "renamer", "--config", str(config), data_dir=tmp_path / "operator")
    assert forget.returncode == 0, forget.stderr
    assert "renamer: 2 pins forgotten" in forget.stdout and "published to every replica" in forget.stdout
    assert sorted(store.hkeys("manifold:pins")) == [b"probe\tx"]
    assert store.zrange("manifold:pins:forgotten", 0, -1) == [b"renamer"]


def test_audit_reads_the_configured_audit_path(write_config: Any, tmp_path: Path) -> None:
    directory = tmp_path / "audit-elsewhere"
    directory.mkdir()
    line = {"time": "2026-11-26T06:00:00Z", "principal": "ada", "outcome": "ok", "name": "probe_where"}
    (directory / "audit.jsonl").write_text(json.dumps(line) + "\n")
    config = write_config({}, {"audit_path": str(directory)})
    result = manifold("audit", "--json", "--config", str(config), data_dir=tmp_path / "data")
    assert result.returncode == 0, result.stderr
    assert [json.loads(raw)["principal"] for raw in result.stdout.splitlines()] == ["ada"]


def test_audit_says_there_is_nothing_to_read_when_the_lines_go_to_stdout(write_config: Any, tmp_path: Path) -> None:
    config = write_config({}, {"audit_path": "-"})
    result = manifold("audit", "--config", str(config), data_dir=tmp_path / "data")
    assert result.returncode == 1
    assert 'audit_path is "-"' in result.stderr and "standard output" in result.stderr


def test_register_on_a_full_store_fails_without_saying_it_registered(
    write_config: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """A store that answers PING but refuses the record (full: `maxmemory`, `noeviction`): exit 1 naming its
    error, and no "registered ... in the shared state" line before it (it once came first, from the PING)."""
    config = write_config({}, {"state_url": redis_server.url, "expose": ["hub"]})
    redis_server.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    redis_server.command("CONFIG", "SET", "maxmemory", "1")
    try:
        run = manifold(
            "register", "--name", "a", "--url", "http://127.0.0.1:9/mcp", "--config", str(config), data_dir=tmp_path
        )
    finally:
        redis_server.command("CONFIG", "SET", "maxmemory", "0")
    assert run.returncode == 1 and "OutOfMemoryError" in run.stderr, run.stderr
    assert "registered a" not in run.stderr and "in the shared state;" not in run.stderr
    assert redis_server.command("HLEN", "manifold:instances") == ":0\r\n"
