"""The gateway's configuration: which servers sit behind it and how the gateway itself behaves.

A config file is the `mcpServers` map Claude Desktop and Cursor use, as JSON or YAML, plus an
optional `manifold` section with the gateway's settings. Every problem found in a file, the
environment or the command line is collected and reported together in one `ConfigError`, so a
user can fix everything in one pass.

Settings resolve in this order: command-line flag > `MANIFOLD_<NAME>` environment variable >
file > default. String values in the file may use `${VAR}` and `${VAR:-default}`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mcp_manifold._errors import ConfigError, ConfigProblem
from mcp_manifold.config.files import CONFIG_SUFFIXES, read_config_data, read_file
from mcp_manifold.config.model import Config, ServerConfig, ToolFilter, Transport
from mcp_manifold.config.problems import Invalid, Problems, kind, unknown
from mcp_manifold.config.redaction import redact_args, redact_url
from mcp_manifold.config.settings import (
    SURFACE_NAMES,
    SettingField,
    Settings,
    default_data_dir,
    env_var,
    resolve_settings,
    settings_fields,
)
from mcp_manifold.config.values import (
    as_bool,
    as_float,
    as_int,
    as_str,
    as_text,
    checked,
    expand_user,
    http_url_problem,
    non_negative,
    not_blank,
    positive,
    tool_name_problem,
)
from mcp_manifold.config.variables import escape_vars, expand_fields, expand_vars
from mcp_manifold.naming import sanitize_prefix

# Every key a server entry may have; `type` is the Claude Code / VS Code spelling of `transport`.
SERVER_FIELDS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "transport",
    "type",
    "enabled",
    "prefix",
    "tools",
    "lazy",
    "timeout",
    "max_concurrency",
    "cache_ttl",
)
TOP_LEVEL_KEYS = ("mcpServers", "manifold")


# --- servers -----------------------------------------------------------------------------------


def _normalise_transport(value: Any) -> Transport:
    """Map the spellings clients use (streamable-http, streamableHttp, ...) onto the three transports."""
    word = as_str(value).strip().lower().replace("-", "").replace("_", "")
    known: dict[str, Transport] = {"stdio": "stdio", "http": "http", "streamablehttp": "http", "sse": "sse"}
    if word not in known:
        raise Invalid(f"unknown transport {value!r}: expected stdio, http, streamable-http or sse")
    return known[word]


class _ServerReader:
    """Checks one server entry field by field, reporting every problem under the server's name."""

    def __init__(self, name: str, values: dict[str, Any], broken: set[str], problems: Problems) -> None:
        self.name = name
        self.values = values
        self.broken = broken  # fields whose ${VAR}s failed: present, but already reported
        self.problems = problems

    def report(self, field_name: str, message: str) -> None:
        self.problems.add(self.name, field_name, message)

    def get(self, key: str, convert: Callable[[Any], Any], default: Any = None) -> Any:
        if key not in self.values:
            return default
        try:
            return convert(self.values[key])
        except Invalid as exc:
            self.report(exc.path or key, str(exc))
            return default

    def present(self, key: str) -> bool:
        return key in self.values or key in self.broken

    def transport(self) -> Transport | None:
        declared = [(key, self.get(key, _normalise_transport)) for key in ("transport", "type")]
        named = {value for _, value in declared if value is not None}
        if len(named) > 1:
            self.report("type", "'transport' and 'type' disagree; give only one of them")
        has_command, has_url = self.present("command"), self.present("url")
        if has_command and has_url:
            self.report("url", "has both 'command' and 'url': a server is a local command or a remote url")
            return None
        if not has_command and not has_url:
            self.report("command", "needs 'command' (a local stdio server) or 'url' (a remote server)")
            return None
        wanted = next(iter(named)) if len(named) == 1 else None
        if wanted == "stdio" and not has_command:
            self.report("transport", "transport 'stdio' needs a 'command', not a 'url'")
        if wanted in ("http", "sse") and not has_url:
            self.report("transport", f"transport {wanted!r} needs a 'url', not a 'command'")
        if has_command:
            return "stdio"
        return "sse" if wanted == "sse" else "http"


# Converters of server fields that are a shared coercion plus a shared check.
_non_empty = checked(as_str, not_blank)
_http_url = checked(lambda value: as_str(value).strip(), http_url_problem)
_prefix = checked(as_str, tool_name_problem)


def _text_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise Invalid(f"must be a list of strings, not {kind(value)}")
    items = []
    for index, item in enumerate(value):
        try:
            items.append(as_text(item))
        except Invalid as exc:
            raise Invalid(str(exc), f"{key}[{index}]") from None
    return tuple(items)


def _text_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of names to strings, not {kind(value)}")
    result = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise Invalid(f"names must be non-empty strings, not {name!r}")
        try:
            result[name] = as_text(item)
        except Invalid as exc:
            raise Invalid(str(exc), f"{key}.{name}") from None
    return result


def _tool_filter(value: Any) -> ToolFilter:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping with 'include' and/or 'exclude' lists, not {kind(value)}")
    for key in value:
        if key not in ("include", "exclude"):
            raise Invalid(f"unknown key {key!r}: expected 'include' and/or 'exclude'", f"tools.{key}")
    globs = {}
    for key in ("include", "exclude"):
        raw = value.get(key) or []
        raw = [raw] if isinstance(raw, str) else raw  # a single glob is a list of one
        if not isinstance(raw, list) or not all(isinstance(glob, str) for glob in raw):
            raise Invalid(f"must be a list of glob strings, not {kind(raw)}", f"tools.{key}")
        globs[key] = tuple(raw)
    return ToolFilter(**globs)


def _parse_server(name: str, entry: Any, env: Mapping[str, str], problems: Problems) -> ServerConfig | None:
    """Check one `mcpServers` entry; None when it has any problem (all of them reported)."""
    if not isinstance(entry, Mapping):
        problems.add(name, None, f"must be a mapping of fields, not {kind(entry)}")
        return None
    before = len(problems.items)
    values, broken = expand_fields(entry, env, problems, name)
    for key in values:
        if key not in SERVER_FIELDS:
            problems.add(name, str(key), unknown("field", str(key), SERVER_FIELDS))
    read = _ServerReader(name, values, broken, problems)
    transport = read.transport()
    config = {
        "command": read.get("command", _non_empty),
        "args": read.get("args", lambda value: _text_list(value, "args"), ()),
        "env": read.get("env", lambda value: _text_map(value, "env"), {}),
        "cwd": read.get("cwd", lambda value: expand_user(_non_empty(value), env)),
        "url": read.get("url", _http_url),
        "headers": read.get("headers", lambda value: _text_map(value, "headers"), {}),
        "enabled": read.get("enabled", as_bool, True),
        "prefix": read.get("prefix", _prefix),
        "tools": read.get("tools", _tool_filter, ToolFilter()),
        "lazy": read.get("lazy", as_bool),
        "timeout": read.get("timeout", checked(as_float, positive)),
        "max_concurrency": read.get("max_concurrency", checked(as_int, positive)),
        "cache_ttl": read.get("cache_ttl", checked(as_float, non_negative)),
    }
    if transport is None or len(problems.items) > before:
        return None
    return ServerConfig(name=name, transport=transport, **config)


def _parse_servers(raw: Any, env: Mapping[str, str], problems: Problems) -> dict[str, ServerConfig]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(None, "mcpServers", f"must be a mapping of server names to servers, not {kind(raw)}")
        return {}
    servers = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not name.strip():
            problems.add(None, "mcpServers", f"server names must be non-empty strings, not {name!r}")
            continue
        server = _parse_server(name, entry, env, problems)
        if server is not None:
            servers[name] = server
    _check_prefixes(servers, problems)
    return servers


def _check_prefixes(servers: Mapping[str, ServerConfig], problems: Problems) -> None:
    """Two enabled servers may not share a prefix: their resource URIs could not be told apart, and a
    tool name both have would be listed once. Prefixes compare as exposed (`a.b` and `a_b` are equal)."""
    owners: dict[str, ServerConfig] = {}
    for server in servers.values():
        if not server.enabled:
            continue
        exposed = sanitize_prefix(server.exposed_prefix)
        first = owners.setdefault(exposed, server)
        if first is server:
            continue
        source = f"prefix {exposed!r}" if server.prefix is not None else f"its name gives the prefix {exposed!r}, which"
        problems.add(
            server.name,
            "prefix",
            f"{source} is already used by server {first.name!r}; give one of them a different 'prefix'",
        )


# --- the whole config --------------------------------------------------------------------------


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
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            in_file.add(None, str(key), unknown("top-level key", str(key), TOP_LEVEL_KEYS))
    servers = _parse_servers(data.get("mcpServers"), env, in_file)
    section = _section(data.get("manifold"), in_file, "manifold", "settings")
    settings = resolve_settings(section, overrides, env, in_file, base)
    return Config(servers=servers, settings=settings), problems


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


def check_config(path: str | Path | None, *, env: Mapping[str, str] | None = None) -> list[ConfigProblem]:
    """Every problem `load_config` would raise, as a list; empty when the config is fine."""
    return _load(path, env, None)[1]


__all__ = [
    "CONFIG_SUFFIXES",
    "SERVER_FIELDS",
    "SURFACE_NAMES",
    "Config",
    "ServerConfig",
    "SettingField",
    "Settings",
    "ToolFilter",
    "Transport",
    "check_config",
    "default_data_dir",
    "env_var",
    "escape_vars",
    "expand_vars",
    "load_config",
    "parse_config_data",
    "read_config_data",
    "redact_args",
    "redact_url",
    "settings_fields",
]
