"""The config contract: file formats, transports, ${VAR}s, settings precedence and problem reporting."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mcp_manifold._config import (
    Config,
    ServerConfig,
    Settings,
    ToolFilter,
    check_config,
    env_var,
    escape_vars,
    expand_vars,
    load_config,
    parse_config_data,
    settings_fields,
)
from mcp_manifold._errors import ConfigError, ConfigProblem

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"
EXAMPLE: dict[str, Any] = {
    "mcpServers": {
        "git": {"command": "mcp-server-git", "args": ["--repository", "."], "env": {"X": "1"}, "cwd": "/tmp"},
        "docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
        "old": {"url": "http://127.0.0.1:9000/sse", "transport": "sse"},
    },
    "manifold": {"expose": ["direct"], "separator": "_"},
}
ENV = {"DOCS_TOKEN": "s3cret", "HOME": "/home/test"}


def write(tmp_path: Path, data: Any, name: str = "manifold.json") -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def parse(data: dict[str, Any], env: dict[str, str] | None = None, **overrides: Any) -> Config:
    return parse_config_data(data, source="test.json", env=ENV if env is None else env, overrides=overrides)


def server(entry: dict[str, Any], env: dict[str, str] | None = None, name: str = "s") -> ServerConfig:
    return parse({"mcpServers": {name: entry}}, env).servers[name]


def problems_of(data: Any, env: dict[str, str] | None = None, **overrides: Any) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as caught:
        parse(data, env, **overrides)
    return caught.value.problems


def one_problem(data: Any, env: dict[str, str] | None = None, **overrides: Any) -> ConfigProblem:
    problems = problems_of(data, env, **overrides)
    assert len(problems) == 1, problems
    return problems[0]


def bad_server(entry: dict[str, Any], env: dict[str, str] | None = None) -> ConfigProblem:
    return one_problem({"mcpServers": {"s": entry}}, env)


# --- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["manifold.json", "manifold.yaml", "manifold.yml"])
def test_json_and_yaml_files_load_the_same_config(tmp_path: Path, name: str) -> None:
    config = load_config(write(tmp_path, EXAMPLE, name), env=ENV)
    assert list(config.servers) == ["git", "docs", "old"]  # file order
    assert config.path == tmp_path / name
    git = config.servers["git"]
    assert (git.transport, git.command, git.args, git.env, git.cwd) == (
        "stdio",
        "mcp-server-git",
        ("--repository", "."),
        {"X": "1"},
        "/tmp",
    )
    assert config.servers["docs"].headers == {"Authorization": "Bearer s3cret"}
    assert config.settings.expose == ["direct"]


def test_yaml_with_unquoted_numbers_in_args_and_env(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("mcpServers:\n  s:\n    command: srv\n    args: [--port, 8080]\n    env: {DEBUG: 1}\n")
    config = load_config(path, env={})
    assert config.servers["s"].args == ("--port", "8080")
    assert config.servers["s"].env == {"DEBUG": "1"}


def test_yaml_boolean_env_value_is_a_problem_with_a_hint() -> None:
    problem = bad_server({"command": "srv", "env": {"DEBUG": True}})
    assert problem.field == "env.DEBUG"
    assert "quote it" in problem.message


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"command": "srv\x00"}, "command"),
        ({"command": "srv", "args": ["--ok", "a\x00b"]}, "args[1]"),
        ({"command": "srv", "env": {"TOKEN": "a\x00b"}}, "env.TOKEN"),
        ({"command": "srv", "cwd": "/tmp\x00"}, "cwd"),
    ],
)
def test_a_nul_character_for_a_process_is_a_problem_naming_its_field(entry: dict[str, Any], field: str) -> None:
    """No command line, environment or path can hold one: the server could never start."""
    problem = bad_server(entry)
    assert (problem.field, problem.message) == (field, "must not contain a NUL character (\\u0000)")


@pytest.mark.parametrize("name", ["A=B", "A\x00", ""])
def test_an_env_name_no_process_can_have_is_a_problem(name: str) -> None:
    problem = bad_server({"command": "srv", "env": {name: "1"}})
    assert problem.field == "env" and "without '=' or a NUL character" in problem.message


def test_a_list_changed_exec_with_a_nul_character_is_a_problem() -> None:
    """It runs in the background on a caller's search: it would fail where nobody sees it."""
    problem = one_problem({"manifold": {"list_changed_exec": "touch a\x00b"}})
    assert (problem.field, problem.message) == ("list_changed_exec", "must not contain a NUL character (\\u0000)")


def test_empty_yaml_file_is_an_empty_config(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("")
    config = load_config(path, env={})
    assert config.servers == {}
    assert config.settings.expose == ["direct"]


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n')
    problems = check_config(path, env={})
    assert len(problems) == 1
    assert problems[0].file == str(path)
    assert "invalid JSON at line 3, column" in problems[0].message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n',
            "invalid JSON at line 3, column 26: a comma before '}': JSON allows no trailing comma",
        ),
        (
            '{"mcpServers": {"a": {"command": "x", "args": ["y",\n]}}}',
            "invalid JSON at line 2, column 1: a comma before ']': JSON allows no trailing comma",
        ),
        (
            '{\n  // my servers\n  "mcpServers": {}\n}',
            "invalid JSON at line 2, column 3: JSON has no comments: "
            "remove it, or write the config as YAML (a .yaml file), where # starts one",
        ),
        (
            "{'mcpServers': {}}",
            "invalid JSON at line 1, column 2: JSON takes double quotes around names and strings, not single ones",
        ),
        (
            "mcpServers:\n  a:\n    command: x\n",
            "invalid JSON at line 1, column 1: this is YAML, not JSON: name the file .yaml (or .yml)",
        ),
        ("", 'the file is empty: a config is a JSON object, at least {"mcpServers": {}}'),
        ("\n  \n", 'the file is empty: a config is a JSON object, at least {"mcpServers": {}}'),
        (
            '{"mcpServers": {"a": {"command": "x" "args": []}}}',
            "invalid JSON at line 1, column 38: Expecting ',' delimiter",
        ),
    ],
)
def test_a_json_mistake_is_named_as_people_make_it(tmp_path: Path, text: str, message: str) -> None:
    """Python's words for a trailing comma were "Expecting property name enclosed in double quotes"."""
    path = tmp_path / "mcp.json"
    path.write_text(text)
    assert [problem.message for problem in check_config(path, env={})] == [message]


def test_a_clients_whole_file_says_how_to_take_its_servers(tmp_path: Path) -> None:
    """~/.claude.json given as it is got a problem per key, `projects` with "did you mean 'profiles'?"."""
    claude = tmp_path / ".claude.json"
    settings = {"numStartups": 3, "userID": "u", "autoUpdates": True}
    projects = {"/home/me/app": {"allowedTools": [], "mcpServers": {"db": {"command": "x"}}}}
    claude.write_text(json.dumps({**settings, "projects": projects, "mcpServers": {"git": {"command": "x"}}}))
    assert [str(problem) for problem in check_config(claude, env={})] == [
        f"{claude}: this looks like Claude Code's ~/.claude.json, which keeps servers per project and much else: "
        f"make a config of its servers with `manifold import claude-code {claude} --output FILE`"
    ]
    vscode = tmp_path / "mcp.json"
    vscode.write_text(json.dumps({"servers": {"git": {"type": "stdio", "command": "x"}}, "inputs": []}))
    assert [str(problem) for problem in check_config(vscode, env={})] == [
        f"{vscode}: this looks like VS Code's mcp.json: its 'servers' map is 'mcpServers' here (and 'inputs' have "
        "no equal)"
    ]


def test_invalid_yaml_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("mcpServers:\n  a:\n    command: [unclosed\n")
    problems = check_config(path, env={})
    assert len(problems) == 1
    assert re.search(r"invalid YAML at line \d+, column \d+", problems[0].message)


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("m.json", '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', None),
        ("m.yaml", "mcpServers:\n  a: {command: x}\n  a: {command: y}\n", 3),
    ],
)
def test_duplicate_keys_are_problems(tmp_path: Path, name: str, text: str, line: int | None) -> None:
    path = tmp_path / name
    path.write_text(text)
    [problem] = check_config(path, env={})
    assert "duplicate key 'a'" in problem.message
    if line:
        assert f"line {line}" in problem.message


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("mcpServers:\n  a: &base {command: srv, args: [a]}\n  b:\n    <<: *base\n    args: [b]\n")
    config = load_config(path, env={})
    assert (config.servers["b"].command, config.servers["b"].args) == ("srv", ("b",))


def test_missing_file_is_a_problem_and_load_raises(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    assert check_config(path, env={}) == [ConfigProblem(str(path), None, None, "file not found")]
    with pytest.raises(ConfigError, match="file not found"):
        load_config(path, env={})


def test_unsupported_extension_and_directory(tmp_path: Path) -> None:
    toml = tmp_path / "m.toml"
    toml.write_text("")
    assert "unsupported file type '.toml'" in check_config(toml, env={})[0].message
    folder = tmp_path / "dir.json"
    folder.mkdir()
    assert "directory" in check_config(folder, env={})[0].message


def test_top_level_must_be_a_mapping_and_known(tmp_path: Path) -> None:
    assert "top level must be a mapping" in check_config(write(tmp_path, [1, 2]), env={})[0].message
    problem = one_problem({"mcpServer": {}})
    assert (problem.field, problem.message) == ("mcpServer", "unknown top-level key; did you mean 'mcpServers'?")


def test_broken_file_still_reports_environment_problems(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text("{")
    problems = check_config(path, env={"MANIFOLD_PORT": "x"})
    assert [p.file for p in problems] == [str(path), "environment"]


def test_check_config_returns_nothing_for_a_good_file(tmp_path: Path) -> None:
    assert check_config(write(tmp_path, EXAMPLE), env=ENV) == []


def test_no_path_gives_no_servers_and_settings_from_env_and_overrides() -> None:
    config = load_config(None, env={"MANIFOLD_PORT": "9000"}, overrides={"http": True})
    assert config.servers == {} and config.path is None
    assert (config.settings.port, config.settings.http) == (9000, True)
    assert check_config(None, env={"MANIFOLD_PORT": "nope"})[0].field == "MANIFOLD_PORT"


# --- transports -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "transport"),
    [
        ({"command": "srv"}, "stdio"),
        ({"command": "srv", "type": "stdio"}, "stdio"),
        ({"url": "http://h/mcp"}, "http"),
        ({"url": "https://h/mcp", "transport": "http"}, "http"),
        ({"url": "http://h/mcp", "type": "streamable-http"}, "http"),
        ({"url": "http://h/mcp", "type": "streamable_http"}, "http"),
        ({"url": "http://h/mcp", "type": "streamableHttp"}, "http"),
        ({"url": "http://h/sse", "transport": "sse"}, "sse"),
        ({"url": "http://h/sse", "type": "SSE"}, "sse"),
        ({"url": "http://h/sse", "type": "sse", "transport": "sse"}, "sse"),
        # No transport given: a path segment `sse` means SSE, as FastMCP (and so smart-mcp-proxy) reads it.
        ({"url": "http://localhost:8000/sse"}, "sse"),
        ({"url": "http://h/sse/"}, "sse"),
        ({"url": "https://h/api/sse?token=x"}, "sse"),
        ({"url": "http://h/sse", "transport": "http"}, "http"),  # said explicitly: that wins
        ({"url": "http://h/ssefeed"}, "http"),
        ({"url": "http://h/mcp?mode=sse"}, "http"),
    ],
)
def test_transport_follows_command_url_and_transport(entry: dict[str, Any], transport: str) -> None:
    assert server(entry).transport == transport


@pytest.mark.parametrize(
    ("entry", "field", "text"),
    [
        ({"command": "srv", "url": "http://h"}, "url", "both 'command' and 'url'"),
        ({"args": ["x"]}, "command", "needs 'command'"),
        ({"command": "srv", "transport": "sse"}, "transport", "needs a 'url'"),
        ({"url": "http://h", "type": "stdio"}, "transport", "needs a 'command'"),
        ({"url": "http://h", "type": "websocket"}, "type", "unknown transport 'websocket'"),
        ({"url": "http://h", "type": "sse", "transport": "http"}, "type", "disagree"),
        ({"url": "ftp://h/x"}, "url", "http:// or https://"),
        ({"url": "http://"}, "url", "with a host"),
        ({"url": "http://[::1/mcp"}, "url", "cannot parse (Invalid IPv6 URL)"),  # was a bare ValueError
        ({"url": "http://h:99999/mcp"}, "url", "cannot parse (Port out of range 0-65535)"),
        ({"command": ""}, "command", "must not be empty"),
        ({"command": ["srv"]}, "command", "must be a string, not a list"),
    ],
)
def test_transport_problems(entry: dict[str, Any], field: str, text: str) -> None:
    problem = bad_server(entry)
    assert (problem.server, problem.field) == ("s", field)
    assert text in problem.message


def test_null_fields_count_as_absent() -> None:
    config = server({"command": "srv", "url": None, "env": None, "timeout": None})
    assert (config.url, config.env, config.timeout) == (None, {}, None)


# --- ${VAR} expansion ---------------------------------------------------------------------------


def test_expansion_in_every_server_string_field() -> None:
    env = {"BIN": "srv", "DIR": "/w", "TOKEN": "t", "HOST": "h"}
    config = server(
        {
            "command": "${BIN}",
            "args": ["--dir", "${DIR}/sub"],
            "env": {"TOKEN": "${TOKEN}"},
            "cwd": "${DIR}",
            "tools": {"include": ["${BIN}_*"]},
            "prefix": "${BIN}",
        },
        env,
    )
    assert (config.command, config.args, config.env, config.cwd) == ("srv", ("--dir", "/w/sub"), {"TOKEN": "t"}, "/w")
    assert (config.tools.include, config.prefix) == (("srv_*",), "srv")
    assert server({"url": "https://${HOST}/mcp", "headers": {"A": "x ${TOKEN}"}}, env).headers == {"A": "x t"}


def test_expansion_default_is_used_when_unset_or_empty() -> None:
    assert expand_vars("${A:-x}/${B:-y}/${C:-z}", {"A": "1", "B": ""}) == "1/y/z"
    assert expand_vars("${A:-}", {}) == ""
    assert expand_vars("${A:-a:-b}", {}) == "a:-b"  # the default is taken literally


def test_dollar_dollar_is_a_literal_dollar_and_a_lone_dollar_stays() -> None:
    assert expand_vars("$${A} costs $5 $$$$", {"A": "no"}) == "${A} costs $5 $$"
    assert server({"command": "srv", "args": ["pa$$word"]}).args == ("pa$word",)


def test_missing_variable_names_server_field_and_variable() -> None:
    problem = one_problem(EXAMPLE, env={})
    assert (problem.server, problem.field) == ("docs", "headers.Authorization")
    assert "'DOCS_TOKEN' is not set" in problem.message


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"command": "${NOPE}"}, "command"),
        ({"command": "srv", "args": ["ok", "${NOPE}"]}, "args[1]"),
        ({"command": "srv", "env": {"K": "${NOPE}"}}, "env.K"),
        ({"command": "srv", "tools": {"exclude": ["${NOPE}"]}}, "tools.exclude[0]"),
    ],
)
def test_missing_variable_field_path(entry: dict[str, Any], field: str) -> None:
    problem = bad_server(entry, env={})
    assert problem.field == field
    assert "NOPE" in problem.message


def test_failed_expansion_is_reported_once_not_as_a_missing_field() -> None:
    problem = bad_server({"url": "${NOPE}"}, env={})  # no extra "needs command or url"
    assert problem.field == "url"


@pytest.mark.parametrize(("text", "message"), [("${A", "unterminated"), ("${1A}", "malformed"), ("${}", "malformed")])
def test_malformed_references(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_vars(text, {"A": "x"})


def test_expansion_in_settings_with_coercion() -> None:
    config = parse(
        {"manifold": {"port": "${PORT:-9000}", "http": "${HTTP:-no}", "host": "${HOST}"}}, {"HOST": "0.0.0.0"}
    )
    assert (config.settings.port, config.settings.http, config.settings.host) == (9000, False, "0.0.0.0")
    problem = one_problem({"manifold": {"openai_model": "${MODEL}"}}, env={})
    assert (problem.server, problem.field) == (None, "openai_model")


def test_numbers_in_server_fields_can_come_from_variables() -> None:
    config = server(
        {"command": "srv", "timeout": "${T:-2.5}", "max_concurrency": "${N}", "lazy": "${L}"}, {"N": "4", "L": "off"}
    )
    assert (config.timeout, config.max_concurrency, config.lazy) == (2.5, 4, False)


_NO_DOLLAR = st.text().filter(lambda text: "$" not in text)


@given(_NO_DOLLAR, st.dictionaries(st.text(min_size=1), st.text()))
def test_text_without_dollar_is_unchanged(text: str, env: dict[str, str]) -> None:
    assert expand_vars(text, env) == text


@given(st.text())
def test_escaped_text_expands_back_to_itself(text: str) -> None:
    assert expand_vars(escape_vars(text), {}) == text


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True), st.text(), _NO_DOLLAR, _NO_DOLLAR)
def test_reference_is_replaced_by_the_value(name: str, value: str, before: str, after: str) -> None:
    assert expand_vars(before + "${" + name + "}" + after, {name: value}) == before + value + after


# --- server fields --------------------------------------------------------------------------------


def test_server_extras_parse() -> None:
    config = server(
        {
            "command": "srv",
            "enabled": False,
            "prefix": "g-1",
            "tools": {"include": ["read_*"], "exclude": "read_secret"},
            "lazy": False,
            "timeout": 3,
            "max_concurrency": 2,
            "cache_ttl": 0,
        }
    )
    assert (config.enabled, config.prefix, config.exposed_prefix) == (False, "g-1", "g-1")
    assert config.tools == ToolFilter(("read_*",), ("read_secret",))
    assert (config.lazy, config.timeout, config.max_concurrency, config.cache_ttl) == (False, 3.0, 2, 0.0)


def test_server_defaults() -> None:
    config = server({"command": "srv"}, name="git")
    assert (config.enabled, config.prefix, config.exposed_prefix, config.lazy) == (True, None, "git", None)
    assert (config.timeout, config.max_concurrency, config.cache_ttl, config.tools) == (None, None, None, ToolFilter())


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("enabled", "maybe", "true or false"),
        ("enabled", 1, "true or false, not a number"),
        ("lazy", [], "true or false"),
        ("prefix", "has space", "1-64 letters"),
        ("timeout", 0, "greater than 0"),
        ("timeout", -1.5, "greater than 0"),
        ("timeout", True, "must be a number"),
        ("max_concurrency", 0, "greater than 0"),
        ("max_concurrency", 1.5, "whole number"),
        ("cache_ttl", -1, "0 or more"),
        ("cache_ttl", "soon", "must be a number"),
        ("args", "--flag", "list of strings"),
        ("env", ["A=1"], "mapping"),
        ("tools", ["read_*"], "mapping"),
        ("cwd", "", "must not be empty"),
    ],
)
def test_server_field_problems(key: str, value: Any, text: str) -> None:
    problem = bad_server({"command": "srv", key: value})
    assert (problem.server, problem.field) == ("s", key)
    assert text in problem.message


def test_unknown_server_field_is_a_problem_with_a_suggestion() -> None:
    problem = bad_server({"command": "srv", "arg": ["x"]})
    assert (problem.field, problem.message) == ("arg", "unknown field; did you mean 'args'?")


def test_unknown_tools_key() -> None:
    problem = bad_server({"command": "srv", "tools": {"allow": ["x"]}})
    assert problem.field == "tools.allow"


@pytest.mark.parametrize("name", ["", "  ", 1])
def test_server_names_must_be_non_empty_strings(name: Any) -> None:
    problem = one_problem({"mcpServers": {name: {"command": "srv"}}})
    assert problem.field == "mcpServers"


def test_server_entry_and_map_must_be_mappings() -> None:
    assert one_problem({"mcpServers": {"s": "srv"}}).message == "must be a mapping of fields, not a string"
    assert one_problem({"mcpServers": ["s"]}).field == "mcpServers"


def test_cwd_tilde_uses_home_from_env() -> None:
    assert server({"command": "srv", "cwd": "~/work"}, {"HOME": "/h"}).cwd == "/h/work"


def test_disabled_servers_are_kept_but_not_enabled() -> None:
    config = parse({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b", "enabled": False}}})
    assert list(config.servers) == ["a", "b"]
    assert list(config.enabled_servers) == ["a"]


def test_two_enabled_servers_may_not_share_a_prefix() -> None:
    explicit = {"a": {"command": "x", "prefix": "p"}, "b": {"command": "y", "prefix": "p"}}
    problem = one_problem({"mcpServers": explicit})
    assert (problem.server, problem.field) == ("b", "prefix")
    assert "prefix 'p' is already used by server 'a'" in problem.message
    # Names are the default prefix and compare as exposed: `my.db` and `my_db` both expose `my_db_...`.
    problem = one_problem({"mcpServers": {"my.db": {"command": "x"}, "my_db": {"command": "y"}}})
    assert (problem.server, problem.field) == ("my_db", "prefix")
    assert "its name gives the prefix 'my_db'" in problem.message and "'my.db'" in problem.message
    # A prefix matching another server's name clashes too; a disabled server clashes with nothing.
    assert one_problem({"mcpServers": {"git": {"command": "x"}, "g2": {"command": "y", "prefix": "git"}}})
    off = {"a": {"command": "x", "prefix": "p"}, "b": {"command": "y", "prefix": "p", "enabled": False}}
    assert list(parse({"mcpServers": off}).servers) == ["a", "b"]


def test_several_problems_are_reported_at_once() -> None:
    data = {
        "mcpServers": {
            "a": {"command": "x", "url": "http://h"},
            "b": {"command": "x", "timeout": 0, "colour": "red"},
            "c": {"url": "http://h", "headers": {"A": "${NOPE}"}},
        },
        "manifold": {"port": 70000, "expose": [], "bogus": 1},
    }
    problems = problems_of(data, env={"MANIFOLD_LAZY": "perhaps"}, call_timeout="soon")
    where = {(p.file, p.server, p.field) for p in problems}
    assert where == {
        ("test.json", "a", "url"),
        ("test.json", "b", "timeout"),
        ("test.json", "b", "colour"),
        ("test.json", "c", "headers.A"),
        ("test.json", None, "port"),
        ("test.json", None, "expose"),
        ("test.json", None, "bogus"),
        ("environment", None, "MANIFOLD_LAZY"),
        ("command line", None, "call_timeout"),
    }
    error = ConfigError(problems)
    assert str(error).count("\n") == len(problems) - 1


# --- ToolFilter -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("include", "exclude", "allowed", "blocked"),
    [
        ((), (), ["anything", ""], []),
        (("read_*",), (), ["read_file", "read_"], ["write_file", "Read_file"]),
        ((), ("*delete*", "drop?"), ["read"], ["force_delete_all", "drop1"]),
        (("git_*", "status"), ("git_push",), ["git_log", "status"], ["git_push", "other"]),
        (("[ab]*",), (), ["alpha", "beta"], ["gamma"]),
    ],
)
def test_tool_filter_globs(include: tuple, exclude: tuple, allowed: list[str], blocked: list[str]) -> None:
    tool_filter = ToolFilter(include, exclude)
    assert all(tool_filter.allows(name) for name in allowed)
    assert not any(tool_filter.allows(name) for name in blocked)


def test_tool_filter_accepts_lists_and_stays_hashable() -> None:
    assert hash(ToolFilter(["a"], ["b"])) == hash(ToolFilter(("a",), ("b",)))  # type: ignore[arg-type]


# --- fingerprint and redaction ----------------------------------------------------------------------


def test_fingerprint_is_stable_and_short() -> None:
    first = server({"command": "srv", "args": ["a"], "env": {"A": "1", "B": "2"}})
    second = server({"env": {"B": "2", "A": "1"}, "args": ["a"], "command": "srv"})
    assert first.fingerprint() == second.fingerprint()
    assert re.fullmatch(r"[0-9a-f]{12}", first.fingerprint())


def test_fingerprint_changes_with_connection_but_not_with_gateway_options() -> None:
    base = server({"command": "srv", "args": ["a"]})
    assert server({"command": "srv", "args": ["b"]}).fingerprint() != base.fingerprint()
    assert server({"command": "srv", "args": ["a", "b"]}).fingerprint() != base.fingerprint()
    assert server({"command": "srv", "args": ["a"], "env": {"X": "1"}}).fingerprint() != base.fingerprint()
    same = server({"command": "srv", "args": ["a"], "timeout": 5, "prefix": "p", "enabled": False}, name="other")
    assert same.fingerprint() == base.fingerprint()


def test_identity_has_the_connection_fields() -> None:
    identity = server({"command": "srv", "args": ["a"], "cwd": "/w"}).identity()
    assert identity == {
        "transport": "stdio",
        "command": "srv",
        "args": ["a"],
        "env": {},
        "cwd": "/w",
        "url": None,
        "headers": {},
    }


def test_redacted_hides_env_and_header_values() -> None:
    shown = server({"command": "srv", "env": {"API_KEY": "sk-1", "MODE": "fast"}}).redacted()
    assert shown["env"] == {"API_KEY": "***", "MODE": "***"}
    assert "sk-1" not in json.dumps(shown)
    shown = server({"url": "https://h/mcp", "headers": {"Authorization": "Bearer x", "X-Id": "7"}}).redacted()
    assert shown["headers"] == {"Authorization": "***", "X-Id": "***"}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@h:8443/mcp", "https://user:***@h:8443/mcp"),
        ("https://ghp_token@h/mcp", "https://***@h/mcp"),
        (
            "https://h/mcp?api_key=k1&page=2&access_token=t&Secret=s&password=p&auth=a",
            "https://h/mcp?api_key=***&page=2&access_token=***&Secret=***&password=***&auth=***",
        ),
        ("https://h/mcp?q=a%20b&flag", "https://h/mcp?q=a%20b&flag"),
        ("http://h/sse", "http://h/sse"),
    ],
)
def test_redacted_hides_url_secrets(url: str, expected: str) -> None:
    assert server({"url": url}).redacted()["url"] == expected


def test_redacted_hides_secret_looking_options() -> None:
    args = ["--api-key", "k1", "--token=t2", "--verbose", "--auth", "--port", "80", "pos"]
    shown = server({"command": "srv", "args": args}).redacted()["args"]
    assert shown == ["--api-key", "***", "--token=***", "--verbose", "--auth", "--port", "80", "pos"]


def test_redacted_keeps_the_original_untouched() -> None:
    config = server({"command": "srv", "env": {"A": "1"}})
    config.redacted()
    assert config.env == {"A": "1"}


def test_server_config_is_hashable_and_frozen() -> None:
    config = server({"command": "srv", "env": {"A": "1"}})
    assert hash(config) == hash(server({"command": "srv", "env": {"A": "1"}}))
    with pytest.raises(AttributeError):
        config.command = "other"  # type: ignore[misc]


# --- settings ---------------------------------------------------------------------------------------


def test_settings_defaults() -> None:
    settings = parse({}, env={"HOME": "/h"}).settings
    assert settings == Settings(data_dir="/h/.local/share/mcp-manifold")
    assert (settings.expose, settings.separator, settings.lazy) == (["direct"], "_", True)
    assert (settings.call_timeout, settings.port, settings.routing) == (120.0, 8765, "call_tool")


def test_data_dir_default_follows_xdg_data_home() -> None:
    assert parse({}, env={"XDG_DATA_HOME": "/x"}).settings.data_dir == "/x/mcp-manifold"


def test_settings_list_default_is_not_shared() -> None:
    first, second = Settings(), Settings()
    first.expose.append("proxy")
    assert second.expose == ["direct"]


@pytest.mark.parametrize(
    ("name", "file", "env", "flag", "default"),
    [
        ("call_timeout", 30, "5", 2.5, 120.0),
        ("lazy", False, "yes", False, True),
        ("expose", ["proxy"], "direct,retrieve", ["hub"], ["direct"]),
    ],
)
def test_precedence_flag_over_env_over_file_over_default(
    name: str, file: Any, env: str, flag: Any, default: Any
) -> None:
    variable = env_var(name)
    converted_env = {"call_timeout": 5.0, "lazy": True, "expose": ["direct", "retrieve"]}[name]
    with_file = {"manifold": {name: file}}
    assert getattr(parse({}).settings, name) == default
    assert getattr(parse(with_file).settings, name) == file
    assert getattr(parse(with_file, {variable: env}).settings, name) == converted_env
    assert getattr(parse(with_file, {variable: env}, **{name: flag}).settings, name) == flag
    assert getattr(parse(with_file, {variable: env}, **{name: None}).settings, name) == converted_env


@pytest.mark.parametrize(
    ("variable", "value", "name", "expected"),
    [
        ("MANIFOLD_HTTP", "on", "http", True),
        ("MANIFOLD_HTTP", "0", "http", False),
        ("MANIFOLD_TOON", "TRUE", "toon", True),
        ("MANIFOLD_PORT", " 9000 ", "port", 9000),
        ("MANIFOLD_EXPOSE", " direct , proxy,,", "expose", ["direct", "proxy"]),
        ("MANIFOLD_SPILL_DIR", "/tmp/spill", "spill_dir", "/tmp/spill"),
        ("MANIFOLD_LOG_LEVEL", "DEBUG", "log_level", "debug"),
        ("MANIFOLD_SEPARATOR", "__", "separator", "__"),
        ("MANIFOLD_DATA_DIR", "~/d", "data_dir", "/h/d"),
    ],
)
def test_environment_values_are_coerced(variable: str, value: str, name: str, expected: Any) -> None:
    assert getattr(parse({}, {variable: value, "HOME": "/h"}).settings, name) == expected


def test_empty_environment_variable_counts_as_unset() -> None:
    assert parse({"manifold": {"port": 1234}}, {"MANIFOLD_PORT": ""}).settings.port == 1234


@pytest.mark.parametrize(
    ("variable", "value", "text"),
    [
        ("MANIFOLD_CALL_TIMEOUT", "fast", "must be a number"),
        ("MANIFOLD_CALL_TIMEOUT", "0", "greater than 0"),
        ("MANIFOLD_CALL_TIMEOUT", "inf", "finite"),
        ("MANIFOLD_LAZY", "2", "true or false"),
        ("MANIFOLD_EXPOSE", "direct,everything", "'everything'"),
        ("MANIFOLD_PORT", "8.5", "whole number"),
    ],
)
def test_bad_environment_values_are_problems(variable: str, value: str, text: str) -> None:
    problem = one_problem({}, {variable: value})
    assert (problem.file, problem.server, problem.field) == ("environment", None, variable)
    assert text in problem.message


def test_smart_mcp_proxy_environment_is_read_as_aliases() -> None:
    seed = {
        "MCPPROXY_ROUTING_TYPE": "DYNAMIC",
        "MCPPROXY_EMBEDDER": "HF",
        "MCPPROXY_HF_MODEL": "all-MiniLM-L6-v2",
        "MCPPROXY_TOP_K": "7",
        "MCPPROXY_LIST_CHANGED_EXEC": "touch /tmp/refresh && pkill -HUP my-client",
    }
    settings = parse({"manifold": {"search_top_k": 4}}, seed).settings
    assert (settings.routing, settings.search_embedder, settings.search_models) == ("dynamic", "hybrid", ["minilm"])
    assert settings.search_top_k == 7  # over the file, like any environment variable
    assert settings.list_changed_exec == "touch /tmp/refresh && pkill -HUP my-client"
    # The manifold name wins where both are set.
    both = parse({}, {**seed, "MANIFOLD_SEARCH_TOP_K": "3", "MANIFOLD_ROUTING": "call_tool"}).settings
    assert (both.search_top_k, both.routing) == (3, "call_tool")
    # The seed's own example environment: HF_MODEL is set but only read with EMBEDDER=HF.
    bm25 = parse({}, {"MCPPROXY_EMBEDDER": "BM25", "MCPPROXY_HF_MODEL": "all-MiniLM-L6-v2"}).settings
    assert (bm25.search_embedder, bm25.search_models) == ("bm25", [])
    assert (
        parse({}, {"MCPPROXY_ROUTING_TYPE": "CALL_TOOL", "MCPPROXY_EMBEDDER": "OPENAI"}).settings.routing == "call_tool"
    )
    problem = one_problem({}, {"MCPPROXY_TOP_K": "many"})
    assert (problem.file, problem.field) == ("environment", "MCPPROXY_TOP_K") and "whole number" in problem.message


def test_overrides_accept_strings_and_report_problems_as_command_line() -> None:
    assert parse({}, call_timeout="7", expose="proxy,hub").settings.call_timeout == 7.0
    problem = one_problem({}, port="eighty")
    assert (problem.file, problem.field) == ("command line", "port")
    assert one_problem({}, not_a_setting=1).message == "unknown setting"


@pytest.mark.parametrize("separator", ["_", "-", "__", "--", "_-", "-_"])
def test_valid_separators(separator: str) -> None:
    assert parse({"manifold": {"separator": separator}}).settings.separator == separator


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("separator", ".", "must be one of"),
        ("separator", "___", "must be one of"),
        ("separator", 1, "must be a string"),
        ("expose", [], "empty list"),
        ("expose", ["direct", "bogus"], "'bogus'"),
        ("expose", [1], "list of strings"),
        ("log_level", "loud", "must be one of"),
        ("search_embedder", "word2vec", "must be one of"),
        ("routing", "magic", "must be one of"),
        ("port", 65536, "0 to 65535"),
        ("port", "x", "whole number"),
        ("init_timeout", 0, "greater than 0"),
        ("stderr_lines", -1, "0 or more"),
        ("max_answer_bytes", 0, "greater than 0"),
        ("search_top_k", 0, "from 1 to 50"),
        ("search_top_k", 51, "from 1 to 50 (the most tools a search returns), not 51"),
        ("proxy_tool_name", "has space", "letters"),
        ("openai_base_url", "localhost:1234", "http://"),
        ("host", "", "must not be empty"),
        ("http", "sometimes", "true or false"),
        ("spill_ttl", -1, "greater than 0"),
    ],
)
def test_setting_problems(name: str, value: Any, text: str) -> None:
    problem = one_problem({"manifold": {name: value}})
    assert (problem.file, problem.server, problem.field) == ("test.json", None, name)
    assert text in problem.message


def test_expose_drops_repeats_and_normalises_case() -> None:
    assert parse({"manifold": {"expose": ["Direct", "proxy", "direct"]}}).settings.expose == ["direct", "proxy"]


def test_unknown_setting_is_a_problem_with_a_suggestion() -> None:
    problem = one_problem({"manifold": {"call_timout": 3}})
    assert (problem.field, problem.message) == ("call_timout", "unknown setting; did you mean 'call_timeout'?")


def test_manifold_section_must_be_a_mapping() -> None:
    assert one_problem({"manifold": ["direct"]}).field == "manifold"


def test_null_setting_means_default() -> None:
    assert parse({"manifold": {"spill_dir": None, "port": None}}).settings.port == 8765


def test_settings_fields_describe_every_setting() -> None:
    described = settings_fields()
    assert [f.name for f in described] == [f.name for f in fields(Settings)]
    by_name = {f.name: f for f in described}
    assert by_name["call_timeout"][:3] == ("call_timeout", float, 120.0)
    assert by_name["expose"].type == list[str] and by_name["expose"].default == ["direct"]
    assert by_name["spill_dir"].type == str | None
    assert all(f.help.endswith(".") for f in described)
    for name, _type, _default, help_text in described:  # plain 4-tuples for the CLI
        assert name and help_text


def test_docs_list_every_setting_and_its_variable() -> None:
    text = DOCS.read_text()
    for setting in settings_fields():
        assert f"`{setting.name}`" in text, setting.name
        assert f"`{env_var(setting.name)}`" in text, setting.name


def _model_folder(root: Path, marker: str = "modules.json") -> str:
    folder = root / "model"
    folder.mkdir()
    (folder / marker).write_text("[]")
    return str(folder)


def test_search_models_accept_minilm_and_model_folders(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path)
    settings = parse({"manifold": {"search_embedder": "hybrid", "search_models": ["minilm", folder]}}).settings
    assert settings.search_models == ["minilm", folder]
    assert parse({}).settings.search_models == []
    from_env = parse({}, {"MANIFOLD_SEARCH_EMBEDDER": "hybrid", "MANIFOLD_SEARCH_MODELS": f"MiniLM,{folder}"})
    assert from_env.settings.search_models == ["MiniLM", folder]
    home = {"HOME": str(tmp_path)}
    assert parse(
        {"manifold": {"search_embedder": "hybrid", "search_models": ["~/model"]}}, home
    ).settings.search_models == [folder]


def test_search_models_problems_name_the_field(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    for entry, text in [
        (str(tmp_path / "missing"), "neither 'minilm' nor an existing directory"),
        (str(tmp_path / "file"), "neither 'minilm' nor an existing directory"),
        (str(tmp_path / "empty"), "no modules.json or config.json"),
        ("mpnet", "neither 'minilm'"),
    ]:
        problem = one_problem({"manifold": {"search_embedder": "hybrid", "search_models": ["minilm", entry]}})
        assert (problem.file, problem.server, problem.field) == ("test.json", None, "search_models"), entry
        assert text in problem.message and repr(entry) in problem.message
    assert "config.json" not in one_problem({"manifold": {"search_models": ["minilm", 3]}}).message


def test_search_models_need_the_hybrid_embedder(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path, "config.json")
    assert parse({"manifold": {"search_models": [folder]}}).settings.search_models == [folder]  # hybrid: the default
    problem = one_problem({"manifold": {"search_embedder": "bm25", "search_models": [folder]}})
    assert (problem.file, problem.field) == ("test.json", "search_models")
    assert "only used with search_embedder 'hybrid'" in problem.message and "'bm25'" in problem.message
    problem = one_problem(
        {"manifold": {"search_embedder": "hybrid"}}, {"MANIFOLD_SEARCH_MODELS": folder}, search_embedder="openai"
    )
    assert (problem.file, problem.field) == ("environment", "MANIFOLD_SEARCH_MODELS")
    assert "'openai'" in problem.message
    assert parse({"manifold": {"search_embedder": "bm25"}}, search_embedder="hybrid", search_models=folder)


def test_relative_paths_in_a_file_mean_the_files_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A desktop client starts the gateway from any directory: a path written in the file must not
    # depend on it. Paths from the environment or a flag keep meaning the working directory.
    folder = tmp_path / "conf"
    (folder / "models" / "mine").mkdir(parents=True)
    (folder / "models" / "mine" / "config.json").write_text("{}")
    manifold = {
        "data_dir": "state",
        "spill_allowed_dirs": ["shared", "/abs/dir", "~/home-dir"],
        "search_embedder": "hybrid",
        "search_models": ["MiniLM", "models/mine"],
    }
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}, "manifold": manifold}))
    monkeypatch.chdir(tmp_path)  # elsewhere than the file
    env = {"HOME": "/home/u", "MANIFOLD_DISCOVERY_DIR": "from-env"}
    settings = load_config(Path("conf/mcp.json"), env=env, overrides={"spill_dir": "from-flag"}).settings
    assert settings.data_dir == str(folder / "state")
    assert settings.spill_allowed_dirs == [str(folder / "shared"), "/abs/dir", "/home/u/home-dir"]
    assert settings.search_models == ["MiniLM", str(folder / "models" / "mine")]
    assert settings.discovery_dir == "from-env" and settings.spill_dir == "from-flag"
