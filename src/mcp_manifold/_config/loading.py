"""Assembling a `Config` from a file, or from already-parsed data, with every problem at once.

Here the top level of the data is checked and its two sections handed to `servers` and `settings`.
Nothing is raised until everything has been looked at: the file, the environment and the flags all
report into one list, and even a file that does not parse still has the environment and flag
problems reported in the same pass.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcp_manifold._config.files import read_file
from mcp_manifold._config.model import Config
from mcp_manifold._config.problems import Problems, kind, unknown
from mcp_manifold._config.redaction import show_references
from mcp_manifold._config.security import check_against_settings, parse_auth, parse_profiles
from mcp_manifold._config.servers import parse_servers
from mcp_manifold._config.settings import given_in, resolve_settings
from mcp_manifold._config.variables import referenced_values
from mcp_manifold._errors import ConfigError, ConfigProblem

TOP_LEVEL_KEYS = ("mcpServers", "manifold", "auth", "profiles")
# Keys a client's own file has beside `mcpServers` (Claude Desktop's), which the gateway has no use for:
# its file is taken as it is.
CLIENT_KEYS = ("globalShortcut",)


def _other_clients_file(data: Mapping[Any, Any], source: str) -> str | None:
    """What to do with a client's file whose servers are not (only) a top-level `mcpServers`, else None.

    Given as it is, Claude Code's ~/.claude.json (its servers per project too, beside dozens of its own
    settings) got a problem per key, `projects` with "did you mean 'profiles'?"; VS Code's mcp.json names
    its map `servers`."""
    if isinstance(data.get("projects"), Mapping) and "profiles" not in data:
        return (
            "this looks like Claude Code's ~/.claude.json, which keeps servers per project and much else: "
            f"make a config of its servers with `manifold import claude-code {source} --output FILE`"
        )
    if isinstance(data.get("servers"), Mapping) and "mcpServers" not in data:
        return "this looks like VS Code's mcp.json: its 'servers' map is 'mcpServers' here (and 'inputs' have no equal)"
    return None


def _section(raw: Any, problems: Problems, key: str, contents: str) -> Mapping[Any, Any]:
    """A top-level section as a mapping: empty when it is absent or null, and reported when it is not a mapping."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(None, key, f"must be a mapping of {contents}, not {kind(raw)}")
        return {}
    return raw


def _build(
    data: Any,
    source: str,
    env: Mapping[str, str] | None,
    overrides: Mapping[str, Any] | None,
    base: Path | None = None,
) -> tuple[Config, list[ConfigProblem]]:
    """Check everything and build what can be built; the config is only valid when there are no problems."""
    env = os.environ if env is None else env
    problems: list[ConfigProblem] = []
    in_file = Problems(source, problems)
    if data is None:  # an empty YAML file
        data = {}
    if not isinstance(data, Mapping):
        in_file.add(None, None, f"the top level must be a mapping with 'mcpServers', not {kind(data)}")
        data = {}
    if (other := _other_clients_file(data, source)) is not None:
        in_file.add(None, None, other)  # one line, not one per key of that client's own
    else:
        for key in data:
            if key not in TOP_LEVEL_KEYS and key not in CLIENT_KEYS:
                in_file.add(None, str(key), unknown("top-level key", str(key), TOP_LEVEL_KEYS))
    entries = _section(data.get("mcpServers"), in_file, "mcpServers", "server names to servers")
    servers = parse_servers(entries, env, in_file, base)
    section = _section(data.get("manifold"), in_file, "manifold", "settings")
    settings = resolve_settings(section, overrides, env, in_file, base)
    auth = parse_auth(_section(data.get("auth"), in_file, "auth", "api_keys and oauth"), env, in_file)
    profiles = parse_profiles(
        _section(data.get("profiles"), in_file, "profiles", "profile names to profiles"), env, in_file
    )
    check_against_settings(profiles, settings, in_file, given_in("profile", overrides, env, in_file))
    # A message may quote a value that came from the environment (`not a number: '<token>'`), and
    # problems are shown by `config check`, the dashboard and reloads: such a value reads `${VAR}`.
    expanded = referenced_values(dict(data), env)
    problems = [replace(problem, message=show_references(problem.message, expanded)) for problem in problems]
    return Config(servers=servers, settings=settings, auth=auth, profiles=profiles), problems


def parse_config_data(
    data: Mapping[str, Any],
    *,
    source: str,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Like `load_config` for already-parsed data; `source` names it in problems."""
    config, problems = _build(data, source, env, overrides)
    if problems:
        raise ConfigError(problems)
    return config


def _load(
    path: str | Path | None, env: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
) -> tuple[Config, list[ConfigProblem]]:
    if path is None:
        return _build({}, "<no config file>", env, overrides)
    path = Path(path)
    data, file_problems = read_file(path)
    # Keep going after a broken file so environment and flag problems are reported in the same pass.
    config, problems = _build(data, str(path), env, overrides, base=path.expanduser().absolute().parent)
    config.path = path
    config.overrides = dict(overrides or {})
    return config, file_problems + problems


def load_config(
    path: str | Path | None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load, expand and check a config file; `ConfigError` lists every problem.

    `path` None gives no servers and settings from `env` (default `os.environ`) and `overrides`
    (CLI flags by setting name; None values are ignored).
    """
    config, problems = _load(path, env, overrides)
    if problems:
        raise ConfigError(problems)
    return config


def check_config(
    path: str | Path | None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> list[ConfigProblem]:
    """Every problem `load_config` would raise, as a list; empty when the config is fine.

    `manifold config check`, a running gateway's reload and its dashboard all check this way.
    """
    return _load(path, env, overrides)[1]
