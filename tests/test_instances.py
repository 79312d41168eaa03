"""Instance records in the discovery directory, and the register loop that keeps one fresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mcp_manifold._files import pid_is_alive
from mcp_manifold._runtime.discovery import (
    InstanceRecord,
    RecordError,
    default_discovery_dir,
    new_instance_id,
    parse_record,
    read_records,
    remove_record,
    write_record,
)
from mcp_manifold._runtime.registration import build_record, keep_registered

NOW = 1_700_000_000.0


def record(**fields: object) -> InstanceRecord:
    data = {"id": "alpha-1", "name": "alpha", "url": "http://127.0.0.1:8000/mcp", "last_ping": NOW, **fields}
    return parse_record(data)


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    original = record(pid=os.getpid(), directory="/src/alpha", started_at=NOW - 5, owner="me")
    path = write_record(tmp_path, original)
    assert path == tmp_path / "alpha-1.json"
    assert json.loads(path.read_text())["owner"] == "me"  # unknown fields survive a rewrite
    scan = read_records(tmp_path, now=NOW + 1)
    assert scan.live == {"alpha-1": original} and not scan.problems and not scan.stale
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left nothing behind
    assert remove_record(tmp_path, "alpha-1") and not remove_record(tmp_path, "alpha-1")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "Expecting property name"),
        ("[]", "expected a JSON object"),
        ('{"name": "x", "url": "http://h/mcp"}', "'id' must be a non-empty string"),
        ('{"id": "bad id!", "url": "http://h/mcp"}', "'id' must be 1-64 letters"),
        ('{"id": "x", "name": "x"}', "exactly one of 'url' and 'command'"),
        ('{"id": "x", "url": "http://h/mcp", "command": "srv"}', "exactly one of 'url' and 'command'"),
        ('{"id": "x", "url": "ftp://h/mcp"}', "'url' must be an http:// or https:// URL"),
        ('{"id": "x", "url": "http://[::1/mcp"}', "'url' must be an http:// or https:// URL with a host, which"),
        ('{"id": "x", "url": "http://h:99999/mcp"}', "cannot parse (Port out of range 0-65535)"),
        ('{"id": "x", "url": "http:///mcp"}', "'url' must be an http:// or https:// URL with a host"),
        ('{"id": "x", "url": "http://h/mcp", "pid": "12"}', "'pid' must be a positive integer"),
        ('{"id": "x", "url": "http://h/mcp", "pid": 18446744073709551616}', "'pid' must be a positive integer of"),
        ('{"id": "x", "url": "http://h/mcp", "last_ping": true}', "'last_ping' must be a number"),
        ('{"id": "x", "command": "srv", "args": [1]}', "'args' must be a list of strings"),
        ('{"id": "x", "url": "http://h/mcp", "generated_id": "yes"}', "'generated_id' must be true or false"),
        ('{"id": "other", "url": "http://h/mcp", "last_ping": 1e12}', "does not match id 'other'"),
    ],
)
def test_malformed_files_are_reported_and_skipped(tmp_path: Path, content: str, problem: str) -> None:
    (tmp_path / "x.json").write_text(content)
    write_record(tmp_path, record())
    scan = read_records(tmp_path, now=NOW)
    assert list(scan.live) == ["alpha-1"]  # the good one is still read
    assert problem in scan.problems["x.json"]
    assert scan.problems["x.json"].startswith("x.json")  # the log line names the file


def test_stale_when_the_process_is_gone_or_the_pings_stop(tmp_path: Path) -> None:
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    write_record(tmp_path, record(id="gone", pid=exited.pid))
    write_record(tmp_path, record(id="quiet", last_ping=NOW - 31))  # three 10 s refreshes missed
    write_record(tmp_path, record(id="slow", last_ping=NOW - 31, ping_interval=20))  # its own pace
    write_record(tmp_path, record(id="fine", pid=os.getpid()))
    scan = read_records(tmp_path, now=NOW)
    assert set(scan.live) == {"slow", "fine"}
    assert f"process {exited.pid} is gone" in scan.stale["gone"][1]
    assert "last ping 31s ago" in scan.stale["quiet"][1]


def test_a_pid_no_process_can_have_is_not_alive(tmp_path: Path) -> None:
    """`os.kill` raised OverflowError past a pid_t (what read the live status and the discovery files)."""
    assert not pid_is_alive(2**64) and not pid_is_alive(2**31) and not pid_is_alive(0) and not pid_is_alive(-1)
    assert pid_is_alive(os.getpid())
    (tmp_path / "big.json").write_text(json.dumps({"id": "big", "url": "http://h/mcp", "pid": 2**64}))
    write_record(tmp_path, record())
    scan = read_records(tmp_path, now=NOW)  # the one bad file costs itself, not the scan
    assert list(scan.live) == ["alpha-1"] and "field 'pid'" in scan.problems["big.json"]


def test_server_config_for_url_and_command() -> None:
    http = record().server_config()
    assert (http.name, http.transport, http.url, http.lazy) == ("alpha-1", "http", "http://127.0.0.1:8000/mcp", True)
    assert record(transport="sse").server_config().transport == "sse"
    stdio = parse_record({"id": "b", "command": "srv", "args": ["--x"], "directory": "/p"}).server_config()
    assert (stdio.transport, stdio.command, stdio.args, stdio.cwd) == ("stdio", "srv", ("--x",), "/p")


def test_default_directory_and_ids() -> None:
    assert default_discovery_dir({"XDG_RUNTIME_DIR": "/run/user/7"}) == Path("/run/user/7/manifold/instances")
    # Without a runtime dir: in the user's home, where no other user can create it first (not /tmp).
    assert default_discovery_dir({"HOME": "/home/u"}) == Path("/home/u/.local/state/mcp-manifold/instances")
    assert default_discovery_dir({"HOME": "/home/u", "XDG_STATE_HOME": "/s"}) == Path("/s/mcp-manifold/instances")
    made = new_instance_id("my project/v2")
    assert made.startswith("my-project-v2-") and parse_record({"id": made, "url": "http://h/mcp"}).id == made


def test_build_record_checks_its_input() -> None:
    built = build_record("alpha", url="http://127.0.0.1:1/mcp", pid=42, interval=2, now=NOW)
    assert built.name == "alpha" and built.pid == 42 and built.ping_interval == 2 and built.last_ping == NOW
    assert build_record("s", command="python server.py --fast").args == ("server.py", "--fast")
    # An id `register` made up is marked so (its pins go with it); a given one is not, and not written.
    assert built.generated_id and built.to_json()["generated_id"] is True
    given = build_record("alpha", url="http://127.0.0.1:1/mcp", instance_id="alpha-1")
    assert not given.generated_id and "generated_id" not in given.to_json()
    with pytest.raises(RecordError, match="exactly one of 'url' and 'command'"):
        build_record("alpha")


@pytest.mark.anyio
async def test_keep_registered_refreshes_and_removes_its_record(tmp_path: Path) -> None:
    clock = iter(range(1000, 2000))
    record_in = build_record("alpha", url="http://127.0.0.1:1/mcp", instance_id="alpha-1", interval=0.05)
    path = tmp_path / "alpha-1.json"
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: keep_registered(tmp_path, record_in, clock=lambda: float(next(clock))))
        with anyio.fail_after(5):
            while not path.exists() or json.loads(path.read_text())["last_ping"] < 1003:
                await anyio.sleep(0.02)
        tasks.cancel_scope.cancel()
    assert not path.exists()


def test_a_directory_or_record_others_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "instances"
    write_record(folder, record(last_ping=NOW))
    assert set(read_records(folder, now=NOW).live) == {"alpha-1"}

    folder.chmod(0o777)  # anyone may plant a record here
    refused = read_records(folder, now=NOW)
    assert refused.live == {} and "writable by other users (mode 777)" in (refused.refused or "")
    folder.chmod(0o700)

    (folder / "alpha-1.json").chmod(0o622)
    (folder / "planted.json").symlink_to(folder / "alpha-1.json")
    scan = read_records(folder, now=NOW)
    assert scan.refused is None and scan.live == {}
    assert "file is writable by other users" in scan.problems["alpha-1.json"]
    assert scan.problems["planted.json"] == "planted.json: refused: a symbolic link"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_directory_or_record_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "instances"
    write_record(folder, record(last_ping=NOW))
    os.chown(folder / "alpha-1.json", 4242, -1)
    assert "file is owned by uid 4242, not by this user" in read_records(folder, now=NOW).problems["alpha-1.json"]
    os.chown(folder, 4242, -1)
    assert "directory is owned by uid 4242" in (read_records(folder, now=NOW).refused or "")


def test_the_gateway_says_why_it_refuses_a_discovery_directory(tmp_path: Path) -> None:
    folder = tmp_path / "instances"
    write_record(folder, record(last_ping=9e9))
    folder.chmod(0o777)
    config = tmp_path / "mcp.json"
    settings = {"expose": ["hub"], "discovery_dir": str(folder), "data_dir": str(tmp_path / "data")}
    config.write_text(json.dumps({"mcpServers": {}, "manifold": settings}))
    command = [sys.executable, "-m", "mcp_manifold", "servers", "--config", str(config), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []  # the planted-looking record is not connected to
    assert f"refusing the discovery directory {folder}: the directory is writable by other users" in done.stderr
