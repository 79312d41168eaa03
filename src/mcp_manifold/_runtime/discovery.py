"""Instance records: MCP servers that announce themselves at run time in a discovery directory.

A running server (or `manifold register` on its behalf) writes one JSON file, `<id>.json`, and keeps
its `last_ping` fresh; the hub reads the directory and drops records that went stale. Plain code:
small synchronous file reads and writes, no event loop, no MCP.

    {"id": "alpha-3f9c2a", "name": "alpha", "url": "http://127.0.0.1:8000/mcp",
     "directory": "/home/me/project", "pid": 4242, "started_at": 1700000000.0,
     "last_ping": 1700000010.0, "ping_interval": 10}

`command` (+ `args`) replaces `url` for a server the hub should start itself over stdio. Times are
Unix seconds. `ping_interval` says how often the writer refreshes `last_ping` (default 10 s); a
record is stale when its pid is gone or it missed three refreshes.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcp_manifold._config import ServerConfig, Transport
from mcp_manifold._config.values import http_url_unusable
from mcp_manifold._files import PID_MAX, atomic_write, pid_is_alive

logger = logging.getLogger(__name__)

DEFAULT_REFRESH = 10.0
MISSED_REFRESHES = 3  # a record whose writer skipped this many refreshes is stale
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


class RecordError(ValueError):
    """An instance file that cannot be used; the message names the field."""


@dataclass(frozen=True)
class InstanceRecord:
    """One registered instance, as written in its discovery file."""

    id: str
    name: str
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    transport: Transport | None = None
    directory: str | None = None
    pid: int | None = None
    started_at: float = 0.0
    last_ping: float = 0.0
    ping_interval: float = DEFAULT_REFRESH
    # The id was made up by `manifold register` (no `--id`): no later registration names it again, so once the
    # record goes, what the gateway keeps for the id (its tools' pins) is forgotten.
    generated_id: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def server_config(self) -> ServerConfig:
        """How the gateway reaches this instance: a Backend config named by the instance id."""
        if self.url is not None:
            return ServerConfig(name=self.id, transport=self.transport or "http", url=self.url, lazy=True)
        assert self.command is not None
        return ServerConfig(
            name=self.id, transport="stdio", command=self.command, args=self.args, cwd=self.directory, lazy=True
        )

    def endpoint(self) -> str:
        """The url, or the command line, for listings and logs: redacted (a URL may carry a token)."""
        return self.server_config().endpoint()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        data["args"] = list(self.args)
        shown = {key: value for key, value in data.items() if value is not None and value != [] and value is not False}
        return {**extra, **shown}

    def stale_reason(self, now: float, pid_alive: Callable[[int], bool] | None = None) -> str | None:
        """Why this record no longer describes a running instance, or None while it does."""
        alive = pid_alive or pid_is_alive
        if self.pid is not None and not alive(self.pid):
            return f"process {self.pid} is gone"
        age = now - self.last_ping
        limit = MISSED_REFRESHES * self.ping_interval
        if age > limit:
            return f"last ping {age:.0f}s ago (more than {limit:g}s)"
        return None


def parse_record(data: Any, source: str = "record") -> InstanceRecord:
    """Check and convert one record's JSON; raises RecordError naming the first bad field."""
    if not isinstance(data, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(data).__name__}")

    def text(key: str, required: bool = False) -> str | None:
        value = data.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise RecordError(f"{source}: field {key!r} must be a non-empty string")
        return value

    def number(key: str, default: float) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RecordError(f"{source}: field {key!r} must be a number")
        return float(value)

    instance_id = text("id", required=True)
    assert instance_id is not None
    if not _ID.match(instance_id):
        raise RecordError(f"{source}: field 'id' must be 1-64 letters, digits, '.', '_' or '-', got {instance_id!r}")
    url, command = text("url"), text("command")
    if (url is None) == (command is None):
        raise RecordError(f"{source}: exactly one of 'url' and 'command' is needed")
    # Checked as every later use parses it (the hub's listings, the live status): a URL that only starts
    # right (`http://[::1/mcp`) made those raise, and ended the gateway.
    if url is not None and (problem := http_url_unusable(url)) is not None:
        raise RecordError(f"{source}: field 'url' {problem}")
    args = data.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise RecordError(f"{source}: field 'args' must be a list of strings")
    transport = data.get("transport")
    if transport not in (None, "http", "sse"):
        raise RecordError(f"{source}: field 'transport' must be 'http' or 'sse'")
    pid = data.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= PID_MAX):
        raise RecordError(f"{source}: field 'pid' must be a positive integer of at most {PID_MAX}")
    refresh = number("ping_interval", DEFAULT_REFRESH)
    if refresh <= 0:
        raise RecordError(f"{source}: field 'ping_interval' must be greater than 0")
    generated = data.get("generated_id", False)
    if not isinstance(generated, bool):
        raise RecordError(f"{source}: field 'generated_id' must be true or false")
    known = {f for f in InstanceRecord.__dataclass_fields__ if f != "extra"}
    return InstanceRecord(
        id=instance_id,
        name=text("name") or instance_id,
        url=url,
        command=command,
        args=tuple(args),
        transport=transport,
        directory=text("directory"),
        pid=pid,
        started_at=number("started_at", 0.0),
        last_ping=number("last_ping", 0.0),
        ping_interval=refresh,
        generated_id=generated,
        extra={key: value for key, value in data.items() if key not in known},
    )


def new_instance_id(name: str) -> str:
    """`<name>-<6 hex>`, with the name reduced to characters an id may hold."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:50] or "instance"
    return f"{base}-{secrets.token_hex(3)}"


def default_discovery_dir(env: dict[str, str] | None = None) -> Path:
    """`$XDG_RUNTIME_DIR/manifold/instances`, else `$XDG_STATE_HOME/mcp-manifold/instances`, else
    `~/.local/state/mcp-manifold/instances`.

    Never a fixed name under the shared temp dir: another local user could create it first and plant
    records (a record names a command the hub starts). Both fallbacks are in the user's own home.
    """
    env = dict(os.environ) if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "manifold" / "instances"
    state = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(state) / "mcp-manifold" / "instances"


def untrusted(path: Path | int, what: str) -> str | None:
    """Why `path` (or an open file descriptor) may hold records someone else wrote, or None.

    Trusted means: owned by the user the gateway runs as, and writable by nobody else (no group or
    other write bit). Where the system has no uids (Windows), everything is trusted.
    """
    if not hasattr(os, "getuid"):
        return None
    info = os.fstat(path) if isinstance(path, int) else os.stat(path)
    if info.st_uid != os.getuid():
        return f"the {what} is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"the {what} is writable by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def discovery_dir(setting: str | None) -> Path:
    """The directory in use: the `discovery_dir` setting, else the default."""
    return Path(setting).expanduser() if setting else default_discovery_dir()


def record_path(directory: Path, instance_id: str) -> Path:
    return directory / f"{instance_id}.json"


def write_record(directory: Path, record: InstanceRecord) -> Path:
    """Write (or refresh) a record atomically, so readers never see half a file."""
    # Private to the user: records name local commands and ports.
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = record_path(directory, record.id)
    atomic_write(target, json.dumps(record.to_json(), indent=2))
    return target


def remove_record(directory: Path, instance_id: str) -> bool:
    """Delete a record; False if it was already gone."""
    try:
        record_path(directory, instance_id).unlink()
    except FileNotFoundError:
        return False
    return True


@dataclass
class Scan:
    """What one pass over the discovery directory found."""

    live: dict[str, InstanceRecord] = field(default_factory=dict)
    stale: dict[str, tuple[InstanceRecord, str]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # file name -> what is wrong
    refused: str | None = None  # why the whole directory is not trusted (then nothing else is read)


def read_records(directory: Path, now: float | None = None, pid_alive: Callable[[int], bool] | None = None) -> Scan:
    """Read every `*.json` record; malformed files land in `problems`, never in the result."""
    now = time.time() if now is None else now
    scan = Scan()
    try:
        scan.refused = untrusted(directory, "directory")
    except FileNotFoundError:
        return scan  # nobody has registered yet
    except OSError as exc:
        scan.refused = f"cannot inspect it: {exc}"
    if scan.refused is not None:
        return scan
    try:
        paths = sorted(directory.glob("*.json"))
    except OSError as exc:
        scan.problems[str(directory)] = f"cannot list the discovery directory: {exc}"
        return scan
    for path in paths:
        try:
            data = json.loads(_read_trusted(path))
            record = parse_record(data, path.name)
            if path.stem != record.id:
                raise RecordError(f"{path.name}: file name does not match id {record.id!r}")
            # In here: one file's fault, whatever it is, costs that file, never the whole directory's scan
            # (a pid past what `os.kill` takes once made every `instances_list` fail).
            reason = record.stale_reason(now, pid_alive)
        except FileNotFoundError:
            continue  # removed between listing and reading
        except (OSError, RecordError) as exc:  # both already name the file
            scan.problems[path.name] = str(exc)
            continue
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            scan.problems[path.name] = f"{path.name}: {exc}"  # the log line must say which file
            continue
        except Exception as exc:
            scan.problems[path.name] = f"{path.name}: cannot be used: {exc!r}"
            continue
        if reason is None:
            scan.live[record.id] = record
        else:
            scan.stale[record.id] = (record, reason)
    return scan


def _read_trusted(path: Path) -> str:
    """The text of a record file, if it is a regular file (not a symlink) that only this user can write."""
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError(f"{path.name}: refused: a symbolic link") from None
        raise
    with os.fdopen(handle, "rb") as stream:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise RecordError(f"{path.name}: refused: not a regular file")
        problem = untrusted(handle, "file")
        if problem is not None:
            raise RecordError(f"{path.name}: refused: {problem}")
        return stream.read().decode("utf-8")
