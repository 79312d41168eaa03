"""The circuit breaker: its states against a fake clock, then end to end through the gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_manifold._core.breaker import CircuitBreaker
from tests.conftest import SERVERS, keyed_client, server_entry, stdio_gateway


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def breaker(threshold: int = 3, cooldown: float = 10.0) -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    return CircuitBreaker(threshold, cooldown, clock), clock


def test_opens_after_threshold_consecutive_failures_and_fails_fast() -> None:
    b, clock = breaker()
    for _ in range(2):
        assert b.admit().allowed
        b.failure("boom")
    assert b.state == "closed"
    assert b.admit().allowed
    b.failure("boom 3")
    assert b.state == "open" and b.failures == 3 and b.last_failure == "boom 3"
    clock.now += 4
    refused = b.admit()
    assert not refused.allowed and refused.retry_in == pytest.approx(6.0)
    assert b.retry_in() == pytest.approx(6.0)


def test_a_success_resets_the_count() -> None:
    b, _ = breaker()
    b.failure("a")
    b.failure("b")
    b.success()
    b.failure("c")
    b.failure("d")
    assert b.state == "closed" and b.failures == 2


def test_half_open_lets_one_trial_through_and_its_success_closes() -> None:
    b, clock = breaker(threshold=1, cooldown=5)
    b.failure("down")
    assert b.state == "open"
    clock.now += 5
    assert b.state == "half-open" and b.retry_in() is None
    trial = b.admit()
    assert trial.allowed and trial.trial
    # While the trial runs, everyone else still fails fast.
    assert not b.admit().allowed
    b.success()
    assert b.state == "closed" and b.failures == 0
    assert b.admit().allowed and not b.admit().trial


def test_a_failed_trial_reopens_for_a_full_cooldown() -> None:
    b, clock = breaker(threshold=2, cooldown=5)
    b.failure("x")
    b.failure("y")
    clock.now += 6
    assert b.admit().trial
    b.failure("still down")
    assert b.state == "open" and b.retry_in() == pytest.approx(5.0)
    clock.now += 4.9
    assert not b.admit().allowed
    clock.now += 0.1
    assert b.admit().trial


def test_an_abandoned_trial_gives_its_turn_back() -> None:
    b, clock = breaker(threshold=1, cooldown=1)
    b.failure("x")
    clock.now += 1
    assert b.admit().trial
    b.abandon()
    assert b.admit().trial


def test_late_failures_of_calls_admitted_before_opening_do_not_extend_the_cooldown() -> None:
    b, clock = breaker(threshold=1, cooldown=10)
    b.failure("first")
    clock.now += 8
    b.failure("a call that started earlier")
    assert b.retry_in() == pytest.approx(2.0)


def test_zero_cooldown_goes_straight_to_half_open() -> None:
    b, _ = breaker(threshold=1, cooldown=0)
    b.failure("x")
    assert b.state == "half-open" and b.admit().trial


def test_one_principals_run_of_failures_pauses_that_principal_only() -> None:
    b, clock = breaker(threshold=3, cooldown=10)
    for _ in range(3):
        assert b.admit("mallory").allowed
        b.failure("crashed", "mallory")
    assert b.state == "closed" and b.failures == 0  # the server goes on
    assert b.admit("ada").allowed and b.admit(None).allowed
    refused = b.admit("mallory")
    assert not refused.allowed and refused.paused and refused.retry_in == pytest.approx(10.0)
    assert b.paused() == ["mallory"]
    clock.now += 10  # the pause is over: one call of mallory's is its trial, the next waits for it
    trial = b.admit("mallory")
    assert trial.allowed and trial.own_trial
    waiting = b.admit("mallory")
    assert not waiting.allowed and waiting.paused and waiting.retry_in == 0
    b.failure("crashed again", "mallory")  # a failed trial pauses it again at once, for a full cooldown
    assert b.admit("mallory").retry_in == pytest.approx(10.0) and b.failures == 0
    clock.now += 10
    assert b.admit("mallory").own_trial
    b.success("mallory")
    assert b.admit("mallory").allowed and b.paused() == []


def test_a_run_of_two_principals_or_of_none_opens_the_breaker_for_all() -> None:
    for who in (["ada", "mallory", "ada"], [None, None, None], ["mallory", "mallory", None]):
        b, _ = breaker(threshold=3, cooldown=10)
        for principal in who:
            b.failure("down", principal)
        assert b.state == "open", who
        assert not b.admit("ada").allowed and not b.admit("ada").paused


def test_an_abandoned_trial_of_a_paused_principal_gives_its_turn_back() -> None:
    b, clock = breaker(threshold=1, cooldown=1)
    b.failure("x", "mallory")
    clock.now += 1
    assert b.admit("mallory").own_trial
    b.abandon("mallory")
    assert b.admit("mallory").own_trial


def test_a_paused_principals_trial_that_is_the_servers_trial_too_reopens_the_server() -> None:
    b, clock = breaker(threshold=1, cooldown=5)
    b.failure("mine", "mallory")  # mallory paused
    b.failure("down", None)  # and the server open
    clock.now += 5
    both = b.admit("mallory")
    assert both.trial and both.own_trial
    b.failure("still down", "mallory")
    assert b.state == "open" and not b.admit("ada").allowed  # not stuck half-open with a trial running


# --- end to end ------------------------------------------------------------------------------------


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


@pytest.mark.anyio
async def test_a_backend_that_keeps_failing_fails_fast_then_is_tried_again(write_config: Any) -> None:
    servers = {"broken": server_entry("exits_early.py"), "numbers": server_entry("numbers.py")}
    settings = {"expose": ["dispatch"], "breaker_threshold": 2, "breaker_cooldown": 1.0}
    call = {"action": "call", "connection": "broken", "tool": "anything"}
    async with stdio_gateway(write_config(servers, settings)) as client:
        for _ in range(2):
            failed = await client.call_tool("proxy-dispatch", call)
            assert failed.is_error and "circuit breaker" not in text_of(failed)
            assert "broken" in text_of(failed)
        fast = await client.call_tool("proxy-dispatch", call)
        assert fast.is_error
        message = text_of(fast)
        assert "circuit breaker open after 2 consecutive failure(s)" in message
        assert "fail fast for another" in message and "one trial call" in message
        listing = await client.call_tool("proxy-dispatch", {"action": "list", "includeTools": False})
        broken = next(c for c in json.loads(text_of(listing))["connections"] if c["name"] == "broken")
        assert broken["breaker"] == "open" and 0 < broken["breakerRetryIn"] <= 1.0

        await anyio.sleep(1.1)  # cooldown over: half-open, one trial goes to the backend
        trial = await client.call_tool("proxy-dispatch", call)
        assert trial.is_error and "circuit breaker" not in text_of(trial)
        again = await client.call_tool("proxy-dispatch", call)  # the trial failed: open again
        assert "circuit breaker open" in text_of(again)

        # Other connections never noticed.
        ok = await client.call_tool("proxy-dispatch", {"action": "call", "tool": "add", "arguments": {"a": 1, "b": 2}})
        assert not ok.is_error and json.loads(text_of(ok))["content"][0]["text"].startswith("3")


def test_servers_command_shows_the_breaker(write_config: Any) -> None:
    config = write_config({"numbers": server_entry("numbers.py")})
    command = [sys.executable, "-m", "mcp_manifold", "servers", "--config", str(config)]
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60)
    assert as_json.returncode == 0, as_json.stderr
    row = json.loads(as_json.stdout)[0]
    assert row["breaker"] == "closed" and row["breaker_retry_in"] is None
    table = subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert "breaker" in table.stdout and "closed" in table.stdout


@pytest.mark.anyio
async def test_a_server_that_recovers_closes_the_breaker_and_servers_shows_it_live(
    write_config: Any, tmp_path: Path
) -> None:
    # A server that fails to start until a flag file exists, then is the numbers server.
    flag = tmp_path / "fixed"
    script = f'test -f "$0" && exec "{sys.executable}" "{SERVERS / "numbers.py"}"; echo "not fixed yet" >&2; exit 2'
    servers = {"flaky": {"command": "/bin/sh", "args": ["-c", script, str(flag)]}}
    config = write_config(servers, {"expose": ["dispatch"], "breaker_threshold": 2, "breaker_cooldown": 1.0})
    call = {"action": "call", "connection": "flaky", "tool": "add", "arguments": {"a": 1, "b": 2}}

    def live_breaker() -> str:
        command = [sys.executable, "-m", "mcp_manifold", "servers", "--config", str(config), "--json"]
        shown = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert shown.returncode in (0, 1), shown.stderr  # 1 while `flaky` is failed
        (gateway,) = json.loads(shown.stdout)["gateways"]
        return next(s for s in gateway["servers"] if s["name"] == "flaky")["breaker"]

    async with stdio_gateway(config) as client:
        for _ in range(2):
            failed = await client.call_tool("proxy-dispatch", call)
            assert failed.is_error and "circuit breaker" not in text_of(failed)
        assert "circuit breaker open" in text_of(await client.call_tool("proxy-dispatch", call))
        with anyio.fail_after(10):
            # The live snapshot is refreshed every 2 s, the cooldown is 1 s: either not-closed state shows it.
            while (shown := live_breaker()) == "closed":
                await anyio.sleep(0.2)
        assert shown in ("open", "half-open")

        await anyio.sleep(1.1)  # half-open: the trial starts the server again, which fails again
        trial = await client.call_tool("proxy-dispatch", call)
        assert trial.is_error and "not fixed yet" in text_of(trial)
        assert "circuit breaker open" in text_of(await client.call_tool("proxy-dispatch", call))

        flag.touch()  # the server is fixed: the next trial must really try it, and close the breaker
        await anyio.sleep(1.1)
        fixed = await client.call_tool("proxy-dispatch", call)
        assert not fixed.is_error and json.loads(text_of(fixed))["content"][0]["text"].startswith("3"), text_of(fixed)
        listing = await client.call_tool("proxy-dispatch", {"action": "list", "includeTools": False})
        (flaky,) = json.loads(text_of(listing))["connections"]
        assert flaky["state"] == "ready" and "breaker" not in flaky
        with anyio.fail_after(10):
            while live_breaker() != "closed":
                await anyio.sleep(0.5)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_one_callers_crashing_input_pauses_that_caller_not_the_server(
    write_config: Any, http_gateway: Any, mode: str
) -> None:
    """A tool that one caller's input crashes: before, three such calls opened the breaker for every
    caller, as often as that caller liked."""
    keys = {"mallory": "mallory-caller-key-01", "ada": "ada-caller-key-00001"}
    config = write_config({"kitchen": server_entry("kitchen.py")}, {"breaker_cooldown": 60})
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": {"api_keys": keys}}))
    url = http_gateway(config)

    async with keyed_client(url, keys["mallory"], mode) as mallory, keyed_client(url, keys["ada"], mode) as ada:
        for _ in range(3):
            crashed = await mallory.call_tool("kitchen_crash", {})
            assert crashed.is_error and "closed the connection" in text_of(crashed), text_of(crashed)
        refused = await mallory.call_tool("kitchen_echo", {"text": "hi"})
        assert refused.is_error
        assert "your calls to it failed 3 times in a row, so yours fail fast" in text_of(refused), text_of(refused)
        served = await ada.call_tool("kitchen_echo", {"text": "hi"})
        assert not served.is_error and text_of(served) == "hi", text_of(served)
