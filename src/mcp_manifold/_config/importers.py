"""Import the MCP servers configured in Claude Desktop, Cursor or Claude Code into a manifold config.

All three clients use the `mcpServers` format manifold reads, so entries are copied as they are,
with three exceptions, each reported as a warning: keys manifold does not know are dropped,
`disabled: true` (Cline-style) becomes `enabled: false`, and `$` in string values is rewritten so
manifold's `${VAR}` expansion gives the value the client would have used (Claude Desktop takes
values literally, Cursor writes `${env:NAME}`, Claude Code already uses manifold's syntax).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from mcp_manifold._config import CONFIG_SUFFIXES, SERVER_FIELDS, escape_vars, read_config_data
from mcp_manifold._errors import ConfigError, ConfigProblem
from mcp_manifold._files import atomic_write

Client = Literal["claude-desktop", "cursor", "claude-code"]
CLIENTS: tuple[str, ...] = get_args(Client)

_CLAUDE_DESKTOP_FILE = "claude_desktop_config.json"
_REFERENCE = re.compile(r"\$\{([^}]*)\}")

Rewrite = Callable[[str], str]  # rewrites one string value
RewriterFor = Callable[[str], Rewrite]  # makes the rewriter for one server (warnings name the server)


@dataclass
class ImportResult:
    """A manifold config dict, what was changed or skipped on the way, and the files read."""

    config: dict[str, Any]
    warnings: list[str]
    source: Path  # the main file; `sources` lists every file that contributed, in order
    sources: list[Path] = field(default_factory=list)


# --- where each client keeps its config ------------------------------------------------------


def default_path(
    client: Client,
    *,
    home: str | Path | None = None,
    platform: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The client's user-level config file; `home`, `platform` and `env` are injectable for tests."""
    home = Path(home) if home is not None else Path.home()
    platform = platform or sys.platform
    env = os.environ if env is None else env
    if client == "claude-desktop":
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / _CLAUDE_DESKTOP_FILE
        if platform.startswith(("win", "cygwin")):
            appdata = env.get("APPDATA")
            base = Path(appdata) if appdata else home / "AppData" / "Roaming"
            return base / "Claude" / _CLAUDE_DESKTOP_FILE
        return home / ".config" / "Claude" / _CLAUDE_DESKTOP_FILE
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "claude-code":
        return home / ".claude.json"
    raise ValueError(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")


def _file_error(path: Path, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(str(path), None, None, message)])


def _read_mapping(path: Path) -> Mapping[str, Any]:
    """A client file's top level; `ConfigError` when it is missing, broken or not an object."""
    if not path.is_file():
        raise _file_error(path, "file not found" if not path.exists() else "not a file")
    data = read_config_data(path)
    if not isinstance(data, Mapping):
        raise _file_error(path, "expected a JSON object at the top level")
    return data


# --- rewriting values --------------------------------------------------------------------------


def _rewrite_strings(value: Any, rewrite: Rewrite) -> Any:
    """Apply `rewrite` to every string inside `value`, keys excluded."""
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, Mapping):
        return {key: _rewrite_strings(item, rewrite) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite_strings(item, rewrite) for item in value]
    return value


def _keep_literal(text: str, *, before_reference: bool = False) -> str:
    """Literal text as manifold must see it; a lone `$` is already literal, so most text stays as is."""
    if "${" in text or "$$" in text or (before_reference and text.endswith("$")):
        return escape_vars(text)
    return text


def _rewrite_references(text: str, translate: Callable[[re.Match[str]], str]) -> str:
    """`text` with each `${...}` replaced by `translate` and the text between them kept literal."""
    pieces, position = [], 0
    for match in _REFERENCE.finditer(text):
        pieces += [_keep_literal(text[position : match.start()], before_reference=True), translate(match)]
        position = match.end()
    pieces.append(_keep_literal(text[position:]))
    return "".join(pieces)


def _literal_rewriter(server: str, warnings: list[str]) -> Rewrite:
    """Claude Desktop passes values as written, so `${X}` there is literal text, not a variable."""

    def rewrite(text: str) -> str:
        kept = _keep_literal(text)
        if kept != text:
            warnings.append(
                f"server {server!r}: {text!r} is literal text in Claude Desktop, so its '$' were escaped as '$$'; "
                "remove the escaping if you want manifold to expand the variable"
            )
        return kept

    return rewrite


def _claude_code_rewriter(server: str, warnings: list[str]) -> Rewrite:
    """Claude Code expands `${VAR}` and `${VAR:-default}` like manifold; only its literal `$$` needs care."""

    def rewrite(text: str) -> str:
        kept = _rewrite_references(text, lambda match: match.group(0))
        if kept != text:
            warnings.append(f"server {server!r}: escaped the literal '$' in {text!r} as '$$'")
        return kept

    return rewrite


def _cursor_rewriter(server: str, warnings: list[str], home: Path, project: Path | None) -> Rewrite:
    """Cursor's `${env:NAME}`, `${userHome}`, `${workspaceFolder}` and `${/}` in manifold's terms."""
    fixed = {"userHome": str(home), "/": os.sep, "pathSeparator": os.sep}
    if project is not None:  # in the global file the workspace is whatever is open, unknown here
        fixed["workspaceFolder"] = str(project)
        fixed["workspaceFolderBasename"] = project.name

    def translate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("env:"):
            return "${" + name.removeprefix("env:") + "}"
        if name in fixed:
            return escape_vars(fixed[name])
        warnings.append(f"server {server!r}: Cursor variable {match.group(0)} has no manifold equivalent; kept as text")
        return escape_vars(match.group(0))

    return lambda text: _rewrite_references(text, translate)


def _clean_entry(name: str, entry: Any, rewrite: Rewrite | None, warnings: list[str]) -> dict[str, Any] | None:
    """Keep what manifold knows, translate `disabled`, drop the rest with a warning."""
    if not isinstance(entry, Mapping):
        warnings.append(f"server {name!r}: skipped, its entry is not an object")
        return None
    if runs_manifold(entry):
        # The client already goes through a gateway: behind itself it would start itself, endlessly.
        warnings.append(f"server {name!r}: skipped, it runs mcp-manifold itself (a gateway behind itself)")
        return None
    cleaned: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "disabled" and isinstance(value, bool):
            cleaned["enabled"] = not value
        elif key in SERVER_FIELDS:
            cleaned[key] = _rewrite_strings(value, rewrite) if rewrite else value
        else:
            warnings.append(f"server {name!r}: dropped field {key!r} (manifold does not use it)")
    return cleaned


def runs_manifold(entry: Mapping[str, Any]) -> bool:
    """`manifold serve ...`, `python -m mcp_manifold serve ...`, `uvx mcp-manifold serve ...` and the like."""
    command, args = entry.get("command"), entry.get("args")
    if not isinstance(command, str) or not isinstance(args, list) or "serve" not in args:
        return False
    words = [command, *(arg for arg in args if isinstance(arg, str))]
    names = {re.split(r"[\\/]", word)[-1].removesuffix(".exe") for word in words}  # Windows paths too
    return bool(names & {"manifold", "mcp_manifold", "mcp-manifold"})


# --- merging several sources (Claude Code) -------------------------------------------------------


class _Merger:
    """Collects servers from several places; the first definition of a name wins."""

    def __init__(self, warnings: list[str], rewriter_for: RewriterFor | None = None) -> None:
        self.rewriter_for = rewriter_for
        self.servers: dict[str, dict[str, Any]] = {}
        self.origin: dict[str, str] = {}
        self.warnings = warnings

    def add(self, servers: Any, where: str) -> None:
        if servers is None:
            return
        if not isinstance(servers, Mapping):
            self.warnings.append(f"{where}: 'mcpServers' is not an object; skipped")
            return
        for name, entry in servers.items():
            rewrite = self.rewriter_for(name) if self.rewriter_for else None
            cleaned = _clean_entry(name, entry, rewrite, self.warnings)
            if cleaned is None:
                continue
            if name in self.servers:
                same = " (identical)" if cleaned == self.servers[name] else ""
                self.warnings.append(
                    f"server {name!r} is defined in both {self.origin[name]} and {where}{same}; kept the first"
                )
                continue
            self.servers[name] = cleaned
            self.origin[name] = where


def _claude_code(path: Path, home: Path, warnings: list[str]) -> tuple[dict[str, Any], list[Path]]:
    """Claude Code: user servers, then each project's local servers and its `.mcp.json`.

    A directory means one project: its `.mcp.json` plus what `~/.claude.json` has for it.
    """
    merger = _Merger(warnings, lambda name: _claude_code_rewriter(name, warnings))
    read: list[Path] = []
    if path.is_dir():
        project = path.resolve()
        user_file = home / ".claude.json"
        if user_file.is_file():
            data = _read_mapping(user_file)
            read.append(user_file)
            merger.add(data.get("mcpServers"), f"{user_file} (user)")
            projects = _projects(data, user_file, warnings)
            local = projects.get(str(project)) or projects.get(str(path.absolute())) or {}
            merger.add(local.get("mcpServers"), f"{user_file} (project {project})")
        _add_mcp_json(merger, project / ".mcp.json", read, required=not read)
    elif path.name == ".mcp.json":
        _add_mcp_json(merger, path, read, required=True)
    else:
        data = _read_mapping(path)
        read.append(path)
        merger.add(data.get("mcpServers"), f"{path} (user)")
        for project, settings in _projects(data, path, warnings).items():
            merger.add(settings.get("mcpServers"), f"{path} (project {project})")
            _add_mcp_json(merger, Path(project) / ".mcp.json", read, required=False)
    return merger.servers, read


def _projects(data: Mapping[str, Any], path: Path, warnings: list[str]) -> dict[str, Mapping[str, Any]]:
    projects = data.get("projects") or {}
    if not isinstance(projects, Mapping):
        warnings.append(f"{path}: 'projects' is not an object; skipped")
        return {}
    return {str(key): value for key, value in projects.items() if isinstance(value, Mapping)}


def _add_mcp_json(merger: _Merger, path: Path, read: list[Path], *, required: bool) -> None:
    if not path.is_file():
        if required:
            raise _file_error(path, "file not found")
        return
    merger.add(_read_mapping(path).get("mcpServers"), str(path))
    read.append(path)


# --- the public entry points ---------------------------------------------------------------------


def _single_file(path: Path, rewriter_for: RewriterFor, warnings: list[str]) -> dict[str, dict[str, Any]]:
    merger = _Merger(warnings, rewriter_for)
    merger.add(_read_mapping(path).get("mcpServers"), str(path))
    return merger.servers


def _cursor_file(path: Path, home: Path) -> tuple[Path, Path | None]:
    """The mcp.json to read and, for a project, the project directory (for `${workspaceFolder}`)."""
    if not path.is_dir():
        in_project = path.parent.name == ".cursor" and path.parent.parent.resolve() != home.resolve()
        return path, path.parent.parent if in_project else None
    if (path / ".cursor" / "mcp.json").is_file() or path.name != ".cursor":
        return path / ".cursor" / "mcp.json", path
    return path / "mcp.json", path.parent


def import_client_config(
    client: Client,
    path: str | Path | None = None,
    *,
    home: str | Path | None = None,
    platform: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ImportResult:
    """Read a client's MCP servers as a manifold config dict (`mcpServers` + an empty `manifold`).

    `path` None reads the client's user-level file under `home` (default: the real home directory).
    A directory means a project: `<dir>/.cursor/mcp.json` for Cursor, `<dir>/.mcp.json` (plus the
    project's entries in `~/.claude.json`) for Claude Code, `<dir>/claude_desktop_config.json` for
    Claude Desktop. Raises `ConfigError` when the source file is missing or does not parse.
    """
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")
    home_dir = Path(home) if home is not None else Path.home()
    source = (
        Path(path).expanduser() if path is not None else default_path(client, home=home_dir, platform=platform, env=env)
    )
    warnings: list[str] = []
    if client == "claude-desktop":
        if source.is_dir():
            source = source / _CLAUDE_DESKTOP_FILE
        servers = _single_file(source, lambda name: _literal_rewriter(name, warnings), warnings)
        sources = [source]
    elif client == "cursor":
        source, project = _cursor_file(source, home_dir)
        servers = _single_file(source, lambda name: _cursor_rewriter(name, warnings, home_dir, project), warnings)
        sources = [source]
    else:
        servers, sources = _claude_code(source, home_dir, warnings)
        source = sources[0] if sources else source
    if not servers:
        warnings.append(f"no MCP servers found in {', '.join(map(str, sources)) or source}")
    return ImportResult({"mcpServers": servers, "manifold": {}}, warnings, source, sources)


def format_config(data: Mapping[str, Any], fmt: Literal["json", "yaml"] = "json") -> str:
    """A config dict as the text of a .json or .yaml file."""
    if fmt == "yaml":
        return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, default_flow_style=False)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_config(data: Mapping[str, Any], path: str | Path, *, force: bool = False) -> Path:
    """Write a config as JSON or YAML (by extension); refuses to replace an existing file unless `force`."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in CONFIG_SUFFIXES:
        raise _file_error(path, f"unsupported file type {path.suffix!r}: use .json, .yaml or .yml")
    text = format_config(data, "json" if suffix == ".json" else "yaml")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if force:
            atomic_write(path, text)
        else:
            with path.open("x", encoding="utf-8") as handle:  # "x" fails if the file appeared meanwhile
                handle.write(text)
    except FileExistsError:
        raise _file_error(path, "already exists; use --force to overwrite it") from None
    except OSError as exc:
        raise _file_error(path, f"cannot write: {exc.strerror or exc}") from exc
    return path


__all__ = [
    "CLIENTS",
    "Client",
    "ImportResult",
    "default_path",
    "format_config",
    "import_client_config",
    "write_config",
]
