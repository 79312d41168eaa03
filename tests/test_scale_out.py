# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""Several replicas of one gateway sharing state through a real redis-server, behind a real HAProxy on loopback
(round robin per request, health checks on /healthz), reached by real SDK clients; and the health probes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx  # the MCP SDK's HTTP client
import mcp_types as types
import pytest
import redis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from mcp_manifold._runtime.shared_state.status import replica_rows
from tests.conftest import SERVERS, Instances, free_port, server_entry, server_over_http, stop_process, wait_for_port
from tests.scale_out import Cluster, RedisServer, Replica, redis_server, replicas, wait_healthy  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADA = types.ElicitResult(action="accept", content={"name": "Ada"})


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


KEY = "a" * 40  # the API key of principal `ada`


def probe_config(write_config: Any, redis: RedisServer | None, *, auth: bool = False, **settings: Any) -> Path:
    manifold = {"http": True, "state_url": redis.url if redis is not None else None, **settings}
    servers = {
        "probe": server_entry("replica_probe.py"),
        # Asks mid-call; a client's own session (which an authenticated 2026-07-28 client gets) carries questions.
        "asks": server_entry("asks.py", "--era", "legacy", session_scope="client"),
    }
    config = write_config(servers, {key: value for key, value in manifold.items() if value is not None})
    if auth:
        config.write_text(json.dumps({**json.loads(config.read_text()), "auth": {"api_keys": {"ada": KEY}}}))
    return config


# --- health probes ------------------------------------------------------------------------------------


async def test_probes_answer_without_a_credential_and_hold_no_data(write_config: Any, http_gateway: Any) -> None:
    config = probe_config(write_config, None, auth=True)
    url = http_gateway(config).removesuffix("/mcp")
    async with httpx.AsyncClient() as client:
        assert (await client.post(f"{url}/mcp", json={})).status_code == 401  # the endpoint still wants a key
        alive = await client.get(f"{url}/healthz")
        ready = await client.get(f"{url}/readyz")
    assert (alive.status_code, alive.text) == (200, "ok")
    assert (ready.status_code, ready.text) == (200, "ready")


async def test_readyz_is_503_while_the_state_store_is_down(
    write_config: Any, http_gateway: Any, redis_server: RedisServer
) -> None:
    url = http_gateway(probe_config(write_config, redis_server)).removesuffix("/mcp")
    async with httpx.AsyncClient(timeout=10) as client:
        assert (await client.get(f"{url}/readyz")).status_code == 200
        redis_server.stop()
        with anyio.fail_after(10):  # the store is asked at most once a second
            while (down := await client.get(f"{url}/readyz")).status_code != 503:
                await anyio.sleep(0.2)
        assert down.text == "not ready"
        assert (await client.get(f"{url}/healthz")).status_code == 200  # alive all the same: no restart wanted
        redis_server.start()
        with anyio.fail_after(30):
            while (await client.get(f"{url}/readyz")).status_code != 200:
                await anyio.sleep(0.2)


# --- replicas behind HAProxy ---------------------------------------------------------------------------


async def test_calls_spread_over_every_replica(write_config: Any, redis_server: RedisServer, replicas: Any) -> None:
    cluster: Cluster = replicas(probe_config(write_config, redis_server))
    async with Client(cluster.url) as client:  # the SDK's default: 2026-07-28, each request on its own
        pids = [int(text_of(await client.call_tool("probe_where", {}))) for _ in range(12)]
    assert {cluster.by_pid(pid).id for pid in pids} == {"r0", "r1", "r2"}
    for replica in cluster.replicas:  # each keeps its own audit log, every line naming it
        lines = [json.loads(line) for line in (replica.data_dir / "audit" / "audit.jsonl").read_text().splitlines()]
        assert lines and {line["replica"] for line in lines} == {replica.id}


async def test_a_servers_question_is_answered_through_another_replica(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """asks.py --era legacy asks mid-call: the replica that calls it holds the call and answers input_required;
    round robin sends the client's retry to the next replica, which hands the answers to the holder."""
    cluster: Cluster = replicas(probe_config(write_config, redis_server, auth=True))
    asked = 0

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        return ADA

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http,
        Client(streamable_http_client(cluster.url, http_client=http), elicitation_callback=elicit) as client,
    ):
        for _ in range(3):
            result = await client.call_tool("asks_ask_name", {})
            assert not result.is_error, text_of(result)
            assert text_of(result) == "hello Ada"
    assert asked == 3


async def test_a_forwarded_held_calls_progress_and_logs_reach_its_client(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """A session-era server asks mid-call, then reports progress and logs before it answers. The client's
    retry lands on the other replica (round robin over two), which hands it to the holder: the progress and
    log messages of the rest of the call come back through it, on the client's retry, before the result."""
    server = server_entry("replica_probe.py", "--era", "legacy", session_scope="client")
    config = write_config({"probe": server}, {"http": True, "state_url": redis_server.url})
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": {"api_keys": {"ada": KEY}}}))
    cluster: Cluster = replicas(config, 2)
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return ADA

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http,
        Client(
            streamable_http_client(cluster.url, http_client=http),
            elicitation_callback=elicit,
            logging_callback=on_log,
            log_level="info",
        ) as client,
    ):
        for _ in range(2):  # the holder is whichever replica the first round reaches: try both orders
            progress.clear()
            logs.clear()
            result = await client.call_tool("probe_ask_then_report", {"steps": 3}, progress_callback=on_progress)
            assert not result.is_error, text_of(result)
            assert text_of(result) == "reported to Ada"
            assert progress == [(step, 3, f"step {step} of 3") for step in (1, 2, 3)]
            assert logs == [f"step {step} for Ada" for step in (1, 2, 3)]
    rounds = sorted(
        (line["time"], line["outcome"], replica.id)
        for replica in cluster.replicas
        for line in map(json.loads, (replica.data_dir / "audit" / "audit.jsonl").read_text().splitlines())
    )
    assert [outcome for _time, outcome, _replica in rounds] == ["input_required", "ok"] * 2
    assert all(rounds[i][2] != rounds[i + 1][2] for i in (0, 2)), rounds  # each retry reached the other one


async def test_one_rate_limit_across_replicas(write_config: Any, redis_server: RedisServer, replicas: Any) -> None:
    config = probe_config(write_config, redis_server, rate_limit=0.01, rate_burst=5)
    cluster: Cluster = replicas(config)
    results: list[types.CallToolResult] = []
    async with Client(cluster.url) as client:

        async def call() -> None:
            results.append(await client.call_tool("probe_where", {}))

        async with anyio.create_task_group() as task_group:
            for _ in range(30):
                task_group.start_soon(call)
    passed = [result for result in results if not result.is_error]
    refused = [text_of(result) for result in results if result.is_error]
    assert len(passed) == 5  # one bucket of 5, not 5 per replica
    assert all("over its rate limit of 0.01 call(s) per second" in text for text in refused), refused[:2]
    assert len(refused) == 25


async def test_a_quarantine_and_its_approval_on_one_replica_hold_on_all(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """One shifty server over HTTP behind every replica: the replica whose session sees the rug pull
    quarantines the tool on all of them; `manifold pins approve` on one replica's data lifts it on all."""
    with server_over_http("shifty.py") as shifty_url:
        servers = {"shifty": {"url": shifty_url}}
        config = write_config(servers, {"http": True, "state_url": redis_server.url, "pinning": "enforce"})
        cluster: Cluster = replicas(config)
        async with Client(cluster.url) as client:
            for _ in range(3):  # each replica lists shifty and pins its tools
                assert not (await client.call_tool("shifty_send", {"to": "bo", "body": "hi"})).is_error
            assert text_of(await client.call_tool("shifty_shift", {"description": "Send it all to me."})) == "shifted"

            async def sends() -> list[bool]:
                return [(await client.call_tool("shifty_send", {"to": "bo", "body": "x"})).is_error for _ in range(6)]

            with anyio.fail_after(30):
                while not all(await sends()):  # refused on every replica, not only the one that saw the change
                    await anyio.sleep(0.3)
            approve = [sys.executable, "-m", "mcp_manifold", "pins", "approve", "shifty/send", "--config", str(config)]
            env = {**os.environ, "MANIFOLD_DATA_DIR": str(cluster.replicas[0].data_dir)}
            subprocess.run(approve, env=env, check=True, capture_output=True, timeout=60)
            with anyio.fail_after(30):
                while any(await sends()):  # served again on every replica
                    await anyio.sleep(0.3)


async def test_a_killed_replica_loses_only_its_calls_in_flight(
    write_config: Any, redis_server: RedisServer, replicas: Any, tmp_path: Path
) -> None:
    """SIGKILL one replica while 9 calls run (3 on each): the 3 on it fail, none runs twice, the others
    finish; once HAProxy's health checks take it out, every later call succeeds. The calls wait for a gate
    the test opens after the kill, and the test asks HAProxy whether the replica is out, so a loaded machine
    changes nothing (no call can finish before the kill, nothing is sent before the balancer knows)."""
    cluster: Cluster = replicas(probe_config(write_config, redis_server))
    journal = tmp_path / "journal.txt"
    gate = tmp_path / "gate"
    victim = cluster.replicas[1]
    outcomes: dict[str, str] = {}
    # A connection per request. HAProxy answers a request whose replica dies before answering with 502
    # only when it is the first on its client connection; a later one on a kept-alive connection gets
    # the connection closed without an answer (so that a browser may retry it), and the SDK's client
    # (mcp 2.3) then fails as a whole, not that call (docs/scale-out.md, "A replica that dies").
    fresh = httpx.AsyncClient(timeout=httpx.Timeout(30, read=300), limits=httpx.Limits(max_keepalive_connections=0))
    async with fresh, Client(streamable_http_client(cluster.url, http_client=fresh), read_timeout_seconds=60) as client:
        for _replica in cluster.replicas:  # every replica has started its probe before the calls that count
            await client.call_tool("probe_where", {})

        async def work(token: str) -> None:
            try:
                result = await client.call_tool(
                    "probe_work", {"token": token, "journal": str(journal), "gate": str(gate)}
                )
            except Exception as exc:
                outcomes[token] = f"failed: {type(exc).__name__}"
            else:
                outcomes[token] = text_of(result) if not result.is_error else f"error: {text_of(result)}"

        async with anyio.create_task_group() as task_group:
            for number in range(9):
                task_group.start_soon(work, f"t{number}")
            with anyio.fail_after(120):
                while len(journal.read_text().splitlines() if journal.exists() else []) < 9:
                    await anyio.sleep(0.05)  # all nine are running
            cluster.kill(victim)
            gate.touch()  # the others may finish now
        ran = [line.split() for line in journal.read_text().splitlines()]
        assert sorted(token for token, _pid in ran) == sorted(outcomes)  # each call ran exactly once
        on_victim = {token for token, pid in ran if int(pid) == victim.process.pid}
        assert len(on_victim) == 3
        assert {token for token, outcome in outcomes.items() if outcome != f"done {token}"} == on_victim, outcomes
        cluster.wait_down(victim)
        later = [await client.call_tool("probe_where", {}) for _ in range(9)]
    assert not any(result.is_error for result in later)
    assert {cluster.by_pid(int(text_of(result))).id for result in later} == {"r0", "r2"}


async def test_a_session_stays_on_its_replica_and_a_new_session_carries_on_when_that_dies(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """A session-era client behind HAProxy's stick table on mcp-session-id: every request of its session reaches
    the replica that opened it. When that replica dies, the next request with its session id is answered HTTP
    404 by a live replica (the spec's signal to start a new session). The SDK's client (mcp 2.3) has no hook
    to do that itself: it raises "Session not found" and keeps the dead id, so the application opens a new
    client session, which works, sticky on a live replica. (What is checked is the 404 and the new session,
    not a recovery the SDK does not make.)"""
    cluster: Cluster = replicas(probe_config(write_config, redis_server), sticky=True)
    session_ids: list[str] = []

    async def remember(response: httpx.Response) -> None:
        if "mcp-session-id" in response.headers:
            session_ids.append(response.headers["mcp-session-id"])

    async with (
        create_mcp_http_client() as http,
        Client(streamable_http_client(cluster.url, http_client=http), mode="legacy", read_timeout_seconds=30) as client,
    ):
        http.event_hooks["response"].append(remember)
        pids = {int(text_of(await client.call_tool("probe_where", {}))) for _ in range(6)}
        assert len(pids) == 1  # sticky: one replica for the whole session
        home = cluster.by_pid(pids.pop())
        cluster.kill(home)
        cluster.wait_down(home)
        with pytest.raises(MCPError, match="Session not found"):
            await client.call_tool("probe_where", {})
    assert session_ids and len(set(session_ids)) == 1
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "mcp-session-id": session_ids[0],
        "mcp-protocol-version": "2025-11-25",
        "accept": "application/json, text/event-stream",
    }
    assert httpx.post(cluster.url, json=listing, headers=headers, timeout=30).status_code == 404
    async with Client(cluster.url, mode="legacy", read_timeout_seconds=30) as client:
        again = {int(text_of(await client.call_tool("probe_where", {}))) for _ in range(4)}
    assert len(again) == 1  # the new session is sticky too, on a replica that lives
    assert cluster.by_pid(again.pop()).id != home.id


async def test_calls_go_on_with_local_limits_while_the_store_is_down(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """Redis stopped mid-run: calls are still served (each replica applies the limits alone) and each replica
    says so loudly, once; Redis started again (empty: no persistence): the shared limits and the shared secrets
    are back, written again by the replicas that hold them."""
    config = probe_config(write_config, redis_server, rate_limit=1000, principal_max_calls=50)
    cluster: Cluster = replicas(config, 2)
    async with Client(cluster.url) as client:
        for _ in range(4):
            assert not (await client.call_tool("probe_where", {})).is_error
        assert redis_server.command("EXISTS", "manifold:limit:rate:anonymous") == ":1\r\n"
        redis_server.stop()
        for _ in range(6):
            result = await client.call_tool("probe_where", {})
            assert not result.is_error, text_of(result)
        for replica in cluster.replicas:
            assert replica.log.read_text().count("SHARED STATE DOWN") == 1
        redis_server.start()
        with anyio.fail_after(30):  # the replicas put the secrets they share back
            while redis_server.command("EXISTS", "manifold:secret:request-state") != ":1\r\n":
                await anyio.sleep(0.2)
        # Each replica tries the store again once a second (not on every call while it is down): within a
        # few of its tries it says the store is back; asked until then, not assumed after a fixed time.
        with anyio.fail_after(30):
            while not all("reachable again" in replica.log.read_text() for replica in cluster.replicas):
                await anyio.sleep(0.2)
        for _ in range(4):
            assert not (await client.call_tool("probe_where", {})).is_error
        assert redis_server.command("EXISTS", "manifold:limit:rate:anonymous") == ":1\r\n"  # shared again
    for replica in cluster.replicas:
        assert replica.log.read_text().count("SHARED STATE DOWN") == 1  # one outage, said once


async def test_nothing_acknowledged_is_lost_when_the_store_restarts_empty(
    write_config: Any, redis_server: RedisServer, replicas: Any, instances: Instances
) -> None:
    """Redis stopped mid-run and started again empty (no persistence: the worst case). An approval and a
    registration acknowledged before are in it again (written back by the replicas and by `manifold
    register`'s heartbeat) and hold on every replica; while it was down, a decision (`pins reject`) and a new
    registration were refused with an error naming the store, so nothing was acknowledged that could be lost."""
    port = free_port()
    shifty = subprocess.Popen([sys.executable, str(SERVERS / "shifty.py"), "--http", str(port)], start_new_session=True)
    register: subprocess.Popen[bytes] | None = None
    try:
        wait_for_port(port, shifty)
        settings = {
            "http": True,
            "state_url": redis_server.url,
            "pinning": "enforce",
            "expose": ["direct", "hub"],
            "ping_interval": 1,
        }
        config = write_config({"shifty": {"url": f"http://127.0.0.1:{port}/mcp"}}, settings)
        cluster: Cluster = replicas(config, 2)
        cli = [sys.executable, "-m", "mcp_manifold"]
        on_a_replica = {**os.environ, "MANIFOLD_DATA_DIR": str(cluster.replicas[0].data_dir)}
        alpha = instances.start("alpha")
        register = subprocess.Popen(
            [*cli, "register", "--name", "alpha", "--url", alpha, "--id", "alpha-1", "--config", str(config)],
            start_new_session=True,
        )
        store = redis.Redis.from_url(redis_server.url)
        async with Client(cluster.url) as client:

            async def refused() -> list[bool]:  # each replica in turn (round robin over two)
                return [(await client.call_tool("shifty_send", {"to": "bo", "body": "x"})).is_error for _ in range(4)]

            async def listed() -> list[bool]:
                return ["alpha-1" in text_of(await client.call_tool("instances_list", {})) for _ in range(2)]

            assert not any(await refused())  # both replicas list shifty and pin its tools
            assert text_of(await client.call_tool("shifty_shift", {"description": "Send it all to me."})) == "shifted"
            with anyio.fail_after(60):
                while not all(await refused()):  # quarantined on both
                    await anyio.sleep(0.3)
            subprocess.run(
                [*cli, "pins", "approve", "shifty/send", "--config", str(config)],
                env=on_a_replica,
                check=True,
                capture_output=True,
                timeout=60,
            )
            with anyio.fail_after(60):
                while any(await refused()) or not all(await listed()):  # approved, and alpha listed, on both
                    await anyio.sleep(0.3)

            redis_server.stop()
            reject = [*cli, "pins", "reject", "shifty/send", "--config", str(config)]
            down = subprocess.run(reject, env=on_a_replica, capture_output=True, text=True, timeout=60)
            assert down.returncode != 0 and "unreachable (pins)" in down.stderr, down.stderr
            assert "nothing was changed" in down.stderr
            beta = [*cli, "register", "--name", "beta", "--url", alpha, "--id", "beta-1", "--config", str(config)]
            late = subprocess.run(beta, capture_output=True, text=True, timeout=60)
            assert late.returncode != 0 and "shared state store is unreachable" in late.stderr, late.stderr
            assert not any(await refused())  # the approval holds on both meanwhile

            redis_server.start()
            with anyio.fail_after(60):
                while store.hget("manifold:pins", "shifty\tsend") is None or not store.hexists(
                    "manifold:instances", "alpha-1"
                ):
                    await anyio.sleep(0.3)
            pin = json.loads(store.hget("manifold:pins", "shifty\tsend"))
            assert (pin["state"], pin["definition"]["description"]) == ("pinned", "Send it all to me.")
            assert not store.hexists("manifold:instances", "beta-1")
            with anyio.fail_after(60):
                while not all(await listed()):
                    await anyio.sleep(0.3)
            assert not any(await refused())  # approved, not rejected: the refused decision left no trace
    finally:
        if register is not None:
            stop_process(register)
        stop_process(shifty)


async def test_a_spilled_result_is_read_through_every_replica(
    write_config: Any, redis_server: RedisServer, replicas: Any, tmp_path: Path
) -> None:
    """spill_dir on a volume every replica mounts (here one directory): a result spilled by one replica is
    read back through the others (round robin sends each read to the next replica)."""
    settings = {"http": True, "state_url": redis_server.url, "expose": ["dispatch"], "spill_threshold": 1000}
    config = write_config({"probe": server_entry("replica_probe.py")}, settings)
    cluster: Cluster = replicas(config, env={"MANIFOLD_SPILL_DIR": str(tmp_path / "shared-spill")})
    async with Client(cluster.url) as client:
        big = await client.call_tool("proxy-dispatch", {"action": "call", "tool": "big", "arguments": {"size": 5000}})
        assert big.meta is not None and big.meta.get("autoSpilled") is True, text_of(big)
        reading = {"action": "readresult", "resultFile": big.meta["resultFile"], "op": "read"}
        for _ in range(3):
            read = await client.call_tool("proxy-dispatch", reading)
            assert not read.is_error, text_of(read)
            assert text_of(read).startswith("0123456789" * 500)


async def test_an_instance_registered_once_is_listed_by_every_replica(
    write_config: Any, redis_server: RedisServer, replicas: Any, instances: Instances
) -> None:
    """`manifold register` into one replica's discovery directory: that replica publishes the record to the
    shared registry, and the hub of every replica lists the instance (round robin asks each in turn)."""
    settings = {"http": True, "state_url": redis_server.url, "expose": ["hub"], "ping_interval": 1}
    cluster: Cluster = replicas(write_config({"probe": server_entry("replica_probe.py")}, settings))
    url = instances.start("alpha")
    directory = cluster.replicas[0].data_dir / "instances"
    command = ["register", "--name", "alpha", "--url", url, "--id", "alpha-1", "--discovery-dir", str(directory)]
    register = subprocess.Popen([sys.executable, "-m", "mcp_manifold", *command], start_new_session=True)
    try:
        async with Client(cluster.url) as client:

            async def listed() -> list[bool]:
                return ["alpha-1" in text_of(await client.call_tool("instances_list", {})) for _ in range(3)]

            with anyio.fail_after(60):
                while not all(await listed()):
                    await anyio.sleep(0.5)
    finally:
        stop_process(register)


async def test_a_listen_stream_on_one_replica_hears_a_change_made_through_another(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """A change made through one replica reaches the listen streams of another, but only those of callers who may
    see something that changed, as on one replica: before, another replica's event went to every stream, so a
    caller whose profile hides a server heard, on any replica but the one that saw it, that it had changed."""
    kitchen = server_entry("kitchen.py", lazy=False)
    config = write_config({"seen": kitchen, "hidden": kitchen}, {"http": True, "state_url": redis_server.url})
    config.write_text(json.dumps({**json.loads(config.read_text()), "profiles": {"one": {"servers": ["seen"]}}}))
    cluster: Cluster = replicas(config, 2)
    listening_at, changing_at = cluster.replicas
    for replica in cluster.replicas:  # listed (and announced) before any stream opens: only the test's changes follow
        wait_healthy(replica.url.replace("/mcp", "/readyz"))
    async with (
        Client(listening_at.url) as listener,
        Client(listening_at.url.replace("/mcp", "/mcp/p/one")) as narrow,
        Client(changing_at.url) as changer,
    ):
        await listener.list_tools()
        await narrow.list_tools()
        async with (
            listener.listen(tools_list_changed=True) as stream,
            narrow.listen(tools_list_changed=True, resource_subscriptions=["seen+kitchen://text"]) as narrowed,
        ):
            await changer.call_tool("hidden_add_tool", {"name": "fresh"})
            with anyio.fail_after(20):
                event = await stream.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            await listener.call_tool("seen_touch", {"uri": "kitchen://text"})  # after the hidden change, here
            with anyio.fail_after(20):
                first = await narrowed.__anext__()
            assert type(first).__name__ == "ResourceUpdated", first  # the hidden change was not its news
            await changer.call_tool("seen_add_tool", {"name": "open"})
            with anyio.fail_after(20):
                assert type(await narrowed.__anext__()).__name__ == "ToolsListChanged"  # one it may see is


async def test_every_replica_has_its_row_in_the_status(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    cluster: Cluster = replicas(probe_config(write_config, redis_server))
    async with Client(cluster.url) as client:
        for _ in range(3):
            await client.call_tool("probe_where", {})
    with anyio.fail_after(20):
        while True:
            rows = await replica_rows(redis_server.url)
            if all(row["servers"].get("probe") == "ready" for row in rows) and len(rows) == 3:
                break
            await anyio.sleep(0.5)
    assert [row["id"] for row in rows] == ["r0", "r1", "r2"]
    assert [row["url"] for row in rows] == [f"http://127.0.0.1:{replica.port}" for replica in cluster.replicas]
    overview = httpx.get(f"http://127.0.0.1:{cluster.replicas[2].port}/ui/api/overview", timeout=10).json()
    assert [row["id"] for row in overview["replicas"]] == ["r0", "r1", "r2"]  # the dashboard of any replica
    cluster.kill(cluster.replicas[1])
    with anyio.fail_after(30):  # a replica that stops beating leaves the status
        while [row["id"] for row in await replica_rows(redis_server.url)] != ["r0", "r2"]:
            await anyio.sleep(0.5)


async def test_a_new_replica_starts_with_the_listings_another_one_saved(
    write_config: Any, redis_server: RedisServer, replicas: Any, http_gateway: Any, tmp_path: Path
) -> None:
    config = probe_config(write_config, redis_server)
    cluster: Cluster = replicas(config, 1)
    async with Client(cluster.url) as client:
        await client.list_tools()
    store = redis.Redis.from_url(redis_server.url)
    with anyio.fail_after(20):
        while store.hlen("manifold:listings") < 2:  # probe's and asks's
            await anyio.sleep(0.2)
    names = {name.decode() for name in store.hkeys("manifold:listings")}
    fresh = tmp_path / "data" / "listings"  # the data_dir of the next gateway (the config's own)
    assert not fresh.exists()
    url = http_gateway(config)  # returns once its port is held: the servers may still be starting
    async with httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(30):
            while (await http.get(url.removesuffix("/mcp") + "/readyz")).status_code != 200:
                await anyio.sleep(0.2)
    assert {path.name for path in fresh.iterdir()} >= names


async def test_a_held_call_whose_replica_died_is_answered_with_a_clear_error(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """The client is answering a server's question when the replica holding that server's call dies: its retry
    reaches a live replica, which says the call is gone (and was not run again); the next call works."""
    cluster: Cluster = replicas(probe_config(write_config, redis_server, auth=True))

    def holder() -> Replica:
        for replica in cluster.replicas:
            audit = replica.data_dir / "audit" / "audit.jsonl"
            if audit.exists() and '"outcome":"input_required"' in audit.read_text():
                return replica
        raise AssertionError("no replica holds the call")

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        held_by = holder()
        if held_by.process.poll() is None:
            cluster.kill(held_by)
            cluster.wait_down(held_by)
        return ADA

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http,
        Client(streamable_http_client(cluster.url, http_client=http), elicitation_callback=elicit) as client,
    ):
        lost = await client.call_tool("asks_ask_name", {})
        assert lost.is_error and "is gone (stopped or crashed), and the call with it" in text_of(lost), text_of(lost)
        assert not (await client.call_tool("probe_where", {})).is_error


async def test_what_one_replica_learns_about_a_server_every_replica_knows(
    write_config: Any, redis_server: RedisServer, replicas: Any
) -> None:
    """midcall.py takes 2026-07-28 but asks mid-call the session-era way: the replica whose call finds it out
    answers "call again" and reaches it in a session from then on; so does every other replica, without
    having to fail a call first."""
    config = write_config(
        {"mid": server_entry("midcall.py", session_scope="client")}, {"http": True, "state_url": redis_server.url}
    )
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": {"api_keys": {"ada": KEY}}}))
    cluster: Cluster = replicas(config, 2)
    first, second = cluster.replicas

    async def confirm(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"ok": True})

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http,
        Client(streamable_http_client(first.url, http_client=http), elicitation_callback=confirm) as at_first,
        Client(streamable_http_client(second.url, http_client=http), elicitation_callback=confirm) as at_second,
    ):
        await at_second.list_tools()  # its own session to midcall is open, in the 2026-07-28 era
        learned = await at_first.call_tool("mid_confirm", {"action": "deploy"})
        assert learned.is_error and "now reaches it in a session" in text_of(learned), text_of(learned)
        await anyio.sleep(5)  # two rounds of the replicas' exchange of what they learned
        told = await at_second.call_tool("mid_confirm", {"action": "deploy"})
        assert not told.is_error and text_of(told) == "confirmed: True", text_of(told)
