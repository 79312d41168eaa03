"""Whether a stdio server's command can be found, before anything starts it.

A warning, not a config problem: the command may be installed later, or only exist where the gateway
runs. `manifold config check` prints it so that a typo or a missing install shows before a client does.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from mcp_manifold._config.model import ServerConfig


def command_warning(server: ServerConfig) -> str | None:
    """Why `server`'s command would not start, or None when it is found (or the server is not stdio)."""
    command = server.command
    if server.transport != "stdio" or not server.enabled or not command:
        return None
    search = server.env.get("PATH") or os.environ.get("PATH", "")
    warning = _missing(command, search)
    if warning is not None and (split := _with_its_arguments(command, search)) is not None:
        # "npx -y @scope/server" as the command: no client runs it through a shell, so no such file.
        warning += f'; its arguments go in "args": {json.dumps(split)}'
    return warning


def _missing(command: str, search: str) -> str | None:
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command)
        if not path.exists():
            return f"command {command!r} does not exist"
        if path.is_dir() or not os.access(path, os.X_OK):
            return f"command {command!r} is not an executable file"
        return None
    if not any(_runnable(Path(folder) / command) for folder in search.split(os.pathsep) if folder):
        return f"command {command!r} was not found on PATH"
    return None


def _with_its_arguments(command: str, search: str) -> dict[str, Any] | None:
    """`{"command": "npx", "args": ["-y", "@scope/server"]}` when `command` is a runnable one and its arguments."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote
        return None
    if len(words) < 2 or _missing(words[0], search) is not None:
        return None
    return {"command": words[0], "args": words[1:]}


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
