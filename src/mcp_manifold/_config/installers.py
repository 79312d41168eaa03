"""Putting the gateway into a client's own config file: the other half of `manifold import`.

`manifold install claude-desktop|cursor|claude-code` adds one `mcpServers` entry that starts
`python -m mcp_manifold serve --config FILE` with the Python that runs this command (the one that has
the gateway and the SDK installed). Everything else in the client's file is kept as it is; the file as
it was is copied next to it first (`<name>.bak-<time>`), and `plan_install` alone changes nothing, so
`--dry-run` can show the result.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_manifold._config.files import read_config_data
from mcp_manifold._config.importers import Client, default_path, runs_manifold
from mcp_manifold._errors import ConfigError, ConfigProblem
from mcp_manifold._files import atomic_write


@dataclass
class InstallPlan:
    """The client file as it will be written, and what to tell the user about it."""

    client: Client
    path: Path  # the client's config file
    data: dict[str, Any]  # its whole content after the change
    entry: dict[str, Any]  # the gateway's entry in it
    replaced: bool  # an entry of that name (an earlier install) is replaced
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        return json.dumps(self.data, indent=2, ensure_ascii=False) + "\n"


def gateway_entry(client: Client, config: Path, python: str | None = None) -> dict[str, Any]:
    """The `mcpServers` entry that starts this gateway over stdio with `config`."""
    entry: dict[str, Any] = {
        "command": python or sys.executable,
        "args": ["-m", "mcp_manifold", "serve", "--config", str(config.resolve())],
    }
    if client == "claude-code":
        entry = {"type": "stdio", **entry, "env": {}}  # the shape `claude mcp add` writes
    return entry


def plan_install(
    client: Client,
    config: Path,
    served: Mapping[str, Any],
    *,
    name: str = "manifold",
    client_file: Path | None = None,
    force: bool = False,
) -> InstallPlan:
    """What installing the gateway (serving `config`, whose servers are `served`) into the client means.

    Refuses (`ConfigError`) a client file that is not a JSON object, and an entry called `name` that runs
    something other than mcp-manifold unless `force`."""
    path = client_file or default_path(client)
    data: dict[str, Any] = {}
    if path.exists():
        loaded = read_config_data(path)
        if not isinstance(loaded, dict):
            raise _problem(path, "expected a JSON object at the top level; not changed")
        data = loaded
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise _problem(path, "'mcpServers' is not an object; not changed")
    current = servers.get(name)
    if current is not None and not force and not (isinstance(current, Mapping) and runs_manifold(current)):
        raise _problem(path, f"already has a server called {name!r} that is not mcp-manifold; use --name or --force")
    entry = gateway_entry(client, config)
    servers[name] = entry
    plan = InstallPlan(client, path, data, entry, replaced=current is not None)
    twice = sorted(set(servers) & set(served) - {name})
    if twice:
        plan.notes.append(
            f"{len(twice)} server(s) are in the client's file and behind the gateway too, so the client sees them "
            f"twice: {', '.join(twice)}; remove them from {path} if the gateway is to serve them alone"
        )
    return plan


def apply_install(plan: InstallPlan) -> Path | None:
    """Write the plan: the old file is copied aside first. Returns the backup's path (None: no file before)."""
    backup = None
    try:
        if plan.path.exists():
            backup = _backup_path(plan.path)
            shutil.copy2(plan.path, backup)
        plan.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(plan.path, plan.text())
    except OSError as exc:
        raise _problem(plan.path, f"cannot write: {exc.strerror or exc}") from exc
    return backup


def unchanged(plan: InstallPlan) -> bool:
    """Whether the client's file already says exactly this (an install run twice)."""
    try:
        return plan.path.is_file() and read_config_data(plan.path) == plan.data
    except ConfigError:
        return False


def _backup_path(path: Path) -> Path:
    """`<name>.bak-<time>`, never one that exists: a backup is never overwritten, not even within a second."""
    stem = f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, number = path.with_name(stem), 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{stem}-{number}")
    return candidate


def _problem(path: Path, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(str(path), None, None, message)])
