"""Importing Claude Desktop, Cursor and Claude Code configs, all from temp files (never the real home)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_manifold._config import load_config, parse_config_data
from mcp_manifold._config.importers import default_path, format_config, import_client_config, write_config
from mcp_manifold._errors import ConfigError

GIT = {"command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_AUTHOR": "me"}}
DOCS = {"url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer abc"}}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


# --- default locations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client", "platform", "env", "relative"),
    [
        ("claude-desktop", "linux", {}, ".config/Claude/claude_desktop_config.json"),
        ("claude-desktop", "darwin", {}, "Library/Application Support/Claude/claude_desktop_config.json"),
        ("claude-desktop", "win32", {}, "AppData/Roaming/Claude/claude_desktop_config.json"),
        ("cursor", "linux", {}, ".cursor/mcp.json"),
        ("claude-code", "darwin", {}, ".claude.json"),
    ],
)
def test_default_paths(home: Path, client: Any, platform: str, env: dict[str, str], relative: str) -> None:
    assert default_path(client, home=home, platform=platform, env=env) == home / relative


def test_claude_desktop_on_windows_uses_appdata(tmp_path: Path) -> None:
    path = default_path("claude-desktop", home=tmp_path, platform="win32", env={"APPDATA": str(tmp_path / "roam")})
    assert path == tmp_path / "roam" / "Claude" / "claude_desktop_config.json"


def test_unknown_client(home: Path) -> None:
    with pytest.raises(ValueError, match="unknown client"):
        import_client_config("vscode", home=home)  # type: ignore[arg-type]


# --- Claude Desktop -----------------------------------------------------------------------------


def test_claude_desktop_from_default_path(home: Path) -> None:
    source = write_json(
        home / ".config/Claude/claude_desktop_config.json",
        {"mcpServers": {"git": GIT, "docs": DOCS}, "globalShortcut": "Ctrl+Space"},
    )
    result = import_client_config("claude-desktop", home=home, platform="linux")
    assert result.config == {"mcpServers": {"git": GIT, "docs": DOCS}, "manifold": {}}
    assert result.warnings == []
    assert (result.source, result.sources) == (source, [source])


def test_claude_desktop_from_explicit_file_and_directory(tmp_path: Path) -> None:
    source = write_json(tmp_path / "claude_desktop_config.json", {"mcpServers": {"git": GIT}})
    assert import_client_config("claude-desktop", source).config["mcpServers"] == {"git": GIT}
    assert import_client_config("claude-desktop", tmp_path).source == source


def test_claude_desktop_values_stay_literal(tmp_path: Path) -> None:
    entry = {"command": "srv", "env": {"PRICE": "$5", "RAW": "${NOT_EXPANDED}", "TWO": "a$$b"}}
    source = write_json(tmp_path / "c.json", {"mcpServers": {"s": entry}})
    result = import_client_config("claude-desktop", source)
    imported = result.config["mcpServers"]["s"]["env"]
    assert imported == {"PRICE": "$5", "RAW": "$${NOT_EXPANDED}", "TWO": "a$$$$b"}
    assert len(result.warnings) == 2 and all("literal text in Claude Desktop" in w for w in result.warnings)
    loaded = parse_config_data(result.config, source="imported", env={})
    assert dict(loaded.servers["s"].env) == entry["env"]  # manifold passes exactly what Claude Desktop did


def test_unknown_keys_are_dropped_with_warnings_and_disabled_is_translated(tmp_path: Path) -> None:
    entry = {**GIT, "autoApprove": ["x"], "disabled": True, "description": "d"}
    source = write_json(tmp_path / "c.json", {"mcpServers": {"git": entry}})
    result = import_client_config("claude-desktop", source)
    assert result.config["mcpServers"]["git"] == {**GIT, "enabled": False}
    assert sorted(result.warnings) == [
        "server 'git': dropped field 'autoApprove' (manifold does not use it)",
        "server 'git': dropped field 'description' (manifold does not use it)",
    ]


def test_manifold_extras_survive_import(tmp_path: Path) -> None:
    entry = {**GIT, "prefix": "g", "tools": {"exclude": ["push"]}, "timeout": 5, "type": "stdio"}
    source = write_json(tmp_path / "c.json", {"mcpServers": {"git": entry}})
    assert import_client_config("claude-desktop", source).config["mcpServers"]["git"] == entry


def test_non_mapping_entries_are_skipped(tmp_path: Path) -> None:
    source = write_json(tmp_path / "c.json", {"mcpServers": {"bad": "uvx thing", "git": GIT}})
    result = import_client_config("claude-desktop", source)
    assert list(result.config["mcpServers"]) == ["git"]
    assert result.warnings == ["server 'bad': skipped, its entry is not an object"]


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "/home/me/src/mcp-manifold/.venv/bin/manifold", "args": ["serve", "--config", "/x/mcp.json"]},
        {"command": "python3", "args": ["-m", "mcp_manifold", "serve"]},
        {"command": "uvx", "args": ["mcp-manifold", "serve", "--http"]},
        {"command": "C:\\tools\\manifold.exe", "args": ["serve"]},
    ],
)
def test_the_gateway_itself_is_not_imported(tmp_path: Path, entry: dict[str, Any]) -> None:
    """Once a client goes through manifold, importing its config again must not put manifold behind itself."""
    source = write_json(tmp_path / "c.json", {"mcpServers": {"gateway": entry, "git": GIT}})
    result = import_client_config("claude-desktop", source)
    assert list(result.config["mcpServers"]) == ["git"]
    assert result.warnings == ["server 'gateway': skipped, it runs mcp-manifold itself (a gateway behind itself)"]


def test_other_servers_named_like_manifold_are_kept(tmp_path: Path) -> None:
    entries = {"a": {"command": "manifold-helper", "args": ["serve"]}, "b": {"command": "manifold", "args": ["tools"]}}
    source = write_json(tmp_path / "c.json", {"mcpServers": entries})
    assert import_client_config("claude-desktop", source).config["mcpServers"] == entries


def test_no_servers_is_a_warning(tmp_path: Path) -> None:
    source = write_json(tmp_path / "c.json", {"globalShortcut": "x"})
    result = import_client_config("claude-desktop", source)
    assert result.config == {"mcpServers": {}, "manifold": {}}
    assert result.warnings == [f"no MCP servers found in {source}"]


def test_missing_source_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        import_client_config("claude-desktop", home=home, platform="darwin")
    [problem] = caught.value.problems
    assert problem.file.endswith("claude_desktop_config.json") and problem.message == "file not found"


def test_unparsable_source_is_a_config_error_with_position(tmp_path: Path) -> None:
    source = tmp_path / "c.json"
    source.write_text('{"mcpServers": {')
    with pytest.raises(ConfigError, match=r"invalid JSON at line 1, column \d+"):
        import_client_config("claude-desktop", source)


def test_non_object_source_is_a_config_error(tmp_path: Path) -> None:
    source = write_json(tmp_path / "c.json", ["git"])
    with pytest.raises(ConfigError, match="JSON object"):
        import_client_config("cursor", source)


# --- Cursor -------------------------------------------------------------------------------------


def test_cursor_global_file(home: Path) -> None:
    write_json(home / ".cursor/mcp.json", {"mcpServers": {"docs": DOCS}})
    result = import_client_config("cursor", home=home)
    assert result.config["mcpServers"] == {"docs": DOCS}
    assert result.source == home / ".cursor/mcp.json"


@pytest.mark.parametrize("point_at", ["project", "dot_cursor", "file"])
def test_cursor_project(tmp_path: Path, home: Path, point_at: str) -> None:
    project = tmp_path / "proj"
    source = write_json(project / ".cursor/mcp.json", {"mcpServers": {"git": GIT}})
    path = {"project": project, "dot_cursor": project / ".cursor", "file": source}[point_at]
    result = import_client_config("cursor", path, home=home)
    assert result.config["mcpServers"] == {"git": GIT}
    assert result.source == source


def test_cursor_project_without_config_is_an_error(tmp_path: Path, home: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        import_client_config("cursor", tmp_path, home=home)


def test_cursor_variables_become_manifold_references(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "proj"
    entry = {
        "command": "srv",
        "args": ["${workspaceFolder}/data", "${userHome}${/}x", "${workspaceFolderBasename}", "cost $5"],
        "env": {"TOKEN": "${env:MY_TOKEN}", "ODD": "${unknownThing}"},
    }
    write_json(project / ".cursor/mcp.json", {"mcpServers": {"s": entry}})
    result = import_client_config("cursor", project, home=home)
    imported = result.config["mcpServers"]["s"]
    assert imported["args"] == [f"{project}/data", f"{home}/x", "proj", "cost $5"]
    assert imported["env"] == {"TOKEN": "${MY_TOKEN}", "ODD": "$${unknownThing}"}
    assert result.warnings == ["server 's': Cursor variable ${unknownThing} has no manifold equivalent; kept as text"]
    loaded = parse_config_data(result.config, source="imported", env={"MY_TOKEN": "t"})
    assert dict(loaded.servers["s"].env) == {"TOKEN": "t", "ODD": "${unknownThing}"}


def test_cursor_global_file_leaves_workspace_folder_unresolved(home: Path) -> None:
    write_json(home / ".cursor/mcp.json", {"mcpServers": {"s": {"command": "srv", "args": ["${workspaceFolder}"]}}})
    result = import_client_config("cursor", home=home)
    assert result.config["mcpServers"]["s"]["args"] == ["$${workspaceFolder}"]
    assert len(result.warnings) == 1


# --- Claude Code --------------------------------------------------------------------------------


def claude_json(home: Path, projects: dict[str, Any], user: dict[str, Any] | None = None) -> Path:
    data: dict[str, Any] = {"numStartups": 3, "projects": projects}
    if user is not None:
        data["mcpServers"] = user
    return write_json(home / ".claude.json", data)


def test_claude_code_merges_user_projects_and_mcp_json(tmp_path: Path, home: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    write_json(one / ".mcp.json", {"mcpServers": {"shared": {"command": "from-mcp-json"}, "lint": {"command": "l"}}})
    source = claude_json(
        home,
        {
            str(one): {"mcpServers": {"db": {"type": "stdio", "command": "db"}, "git": {"command": "other-git"}}},
            str(two): {"mcpServers": {"db": {"type": "stdio", "command": "db"}, "shared": {"command": "s"}}},
        },
        user={"git": GIT, "remote": {"type": "http", "url": "https://r/mcp"}},
    )
    result = import_client_config("claude-code", home=home)
    servers = result.config["mcpServers"]
    assert list(servers) == ["git", "remote", "db", "shared", "lint"]
    assert servers["git"] == GIT  # the user-level definition came first and wins
    assert servers["shared"] == {"command": "from-mcp-json"}
    assert result.source == source
    assert result.sources == [source, one / ".mcp.json"]
    duplicates = [w for w in result.warnings if "defined in both" in w]
    assert len(duplicates) == 3
    assert any("'db'" in w and w.endswith("(identical); kept the first") for w in duplicates)
    assert any("'git'" in w and "(identical)" not in w for w in duplicates)


def test_claude_code_keeps_variables_and_loads(tmp_path: Path, home: Path) -> None:
    entry = {"type": "http", "url": "https://api/${ENDPOINT:-mcp}", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    claude_json(home, {}, user={"api": entry})
    result = import_client_config("claude-code", home=home)
    assert result.config["mcpServers"]["api"] == entry
    assert result.warnings == []
    config = parse_config_data(result.config, source="imported", env={"TOKEN": "t"})
    assert (config.servers["api"].url, config.servers["api"].transport) == ("https://api/mcp", "http")


def test_claude_code_project_directory(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "proj"
    write_json(project / ".mcp.json", {"mcpServers": {"lint": {"command": "l"}, "git": {"command": "x"}}})
    claude_json(
        home, {str(project.resolve()): {"mcpServers": {"db": {"command": "db"}}}, "/elsewhere": {}}, {"git": GIT}
    )
    result = import_client_config("claude-code", project, home=home)
    assert list(result.config["mcpServers"]) == ["git", "db", "lint"]
    assert result.sources == [home / ".claude.json", project / ".mcp.json"]


def test_claude_code_project_directory_without_user_file(tmp_path: Path, home: Path) -> None:
    write_json(tmp_path / ".mcp.json", {"mcpServers": {"lint": {"command": "l"}}})
    result = import_client_config("claude-code", tmp_path, home=home)
    assert result.config["mcpServers"] == {"lint": {"command": "l"}}
    assert result.source == tmp_path / ".mcp.json"


def test_claude_code_single_mcp_json(tmp_path: Path, home: Path) -> None:
    source = write_json(tmp_path / ".mcp.json", {"mcpServers": {"lint": {"command": "l", "oauth": {}}}})
    result = import_client_config("claude-code", source, home=home)
    assert result.config["mcpServers"] == {"lint": {"command": "l"}}
    assert result.warnings == ["server 'lint': dropped field 'oauth' (manifold does not use it)"]


def test_claude_code_missing_files(tmp_path: Path, home: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        import_client_config("claude-code", home=home)
    with pytest.raises(ConfigError, match="file not found"):
        import_client_config("claude-code", tmp_path, home=home)


def test_claude_code_bad_projects_section_is_a_warning(home: Path) -> None:
    write_json(home / ".claude.json", {"mcpServers": {"git": GIT}, "projects": ["x"]})
    result = import_client_config("claude-code", home=home)
    assert result.config["mcpServers"] == {"git": GIT}
    assert result.warnings == [f"{home / '.claude.json'}: 'projects' is not an object; skipped"]


# --- writing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["out.json", "out.yaml", "sub/dir/out.yml"])
def test_written_config_loads_back(tmp_path: Path, home: Path, name: str) -> None:
    write_json(home / ".cursor/mcp.json", {"mcpServers": {"git": GIT, "docs": DOCS}})
    result = import_client_config("cursor", home=home)
    target = write_config(result.config, tmp_path / name)
    config = load_config(target, env={})
    assert list(config.servers) == ["git", "docs"]
    assert config.servers["git"].args == ("mcp-server-git",)


def test_write_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("keep me")
    with pytest.raises(ConfigError, match="already exists"):
        write_config({"mcpServers": {}}, target)
    assert target.read_text() == "keep me"
    write_config({"mcpServers": {"git": GIT}}, target, force=True)
    assert json.loads(target.read_text()) == {"mcpServers": {"git": GIT}}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left behind


def test_write_rejects_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unsupported file type"):
        write_config({}, tmp_path / "out.toml")


def test_format_config_yaml_keeps_order() -> None:
    text = format_config({"mcpServers": {"z": {"command": "z"}, "a": {"command": "a"}}, "manifold": {}}, "yaml")
    assert list(yaml.safe_load(text)["mcpServers"]) == ["z", "a"]
    assert format_config({"a": 1}).endswith("\n")
