# ruff: noqa: F811 - the fixture `home` imported from test_cli_first_hour is a parameter of the tests
"""A newcomer turning on the features (code mode, HTTP, profiles, API keys): `manifold config check`
says what `serve` would refuse, and a mistake is named with its fix.

Each test runs the real `manifold` command, as `tests/test_cli_first_hour.py` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mcp_manifold import _cli as cli
from tests.conftest import server_entry, stop_process
from tests.test_cli_first_hour import home, manifold  # noqa: F401 - home is a fixture


def test_config_check_says_the_code_surface_has_no_engine_as_serve_would(
    write_config: Any, home: Path, tmp_path: Path
) -> None:
    """`config check` passed `expose: [code]` without the QuickJS engine, which `serve` then refused."""
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "quickjs.py").write_text('raise ImportError("not installed")\n')  # stands in for a missing engine
    env = {"PYTHONPATH": os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])}
    config = write_config({"numbers": server_entry("numbers.py")}, {"expose": ["direct", "code"]})
    checked = manifold(home, "config", "check", str(config), env=env)
    assert checked.returncode == 1, checked.stdout
    assert "field 'expose': the code surface needs the QuickJS engine" in checked.stderr
    assert "pip install 'mcp-manifold[code]'" in checked.stderr and "Traceback" not in checked.stderr


def test_config_check_refuses_an_open_http_gateway_on_the_network_as_serve_would(write_config: Any, home: Path) -> None:
    """`http: true` on 0.0.0.0 without `auth`: `serve` refuses to start, and `config check` said OK."""
    config = write_config({"numbers": server_entry("numbers.py")}, {"http": True, "host": "0.0.0.0"})
    checked = manifold(home, "config", "check", str(config))
    assert checked.returncode == 1, checked.stdout
    assert "refusing to serve HTTP on 0.0.0.0 without authentication" in checked.stderr
    assert "Configure API keys or OAuth in the 'auth' section" in checked.stderr
    served = manifold(home, "serve", str(config))
    assert served.returncode != 0 and "refusing to serve HTTP on 0.0.0.0" in served.stderr  # the same refusal
    opened = write_config(
        {"numbers": server_entry("numbers.py")},
        {"http": True, "host": "0.0.0.0", "insecure_open_to_network": True},
        name="open.json",
    )
    assert manifold(home, "config", "check", str(opened)).returncode == 0  # said in so many words: allowed


def test_a_profile_naming_a_server_that_is_not_configured_is_warned_of(write_config: Any, home: Path) -> None:
    """`servers: [numbrs]` matched nothing, silently: the profile's holders saw no tools, check said OK."""
    config = write_config(
        {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")}, {"profile": "dev"}
    )
    data = json.loads(config.read_text())
    data["profiles"] = {"dev": {"servers": ["numbrs", "!words"]}, "ops": {"servers": ["num*", "db*"]}, "all": {}}
    config.write_text(json.dumps(data))
    checked = manifold(home, "config", "check", str(config))
    assert checked.returncode == 0 and "OK" in checked.stdout, checked.stderr  # a warning: it fails closed
    said = " ".join(checked.stderr.split())
    assert "profile 'dev', field 'servers': 'numbrs' matches no configured server; did you mean 'numbers'?" in said
    assert "profile 'ops', field 'servers': 'db*' matches no configured server; the servers are numbers, words" in said
    assert said.count("warning:") == 2, said  # '!words', 'num*' and the profile without servers match
    # serve warns at start too (asked on 0.0.0.0 without auth, it stops right after: no server started)
    served = manifold(home, "serve", str(config), "--http", "--host", "0.0.0.0")
    assert "'numbrs' matches no configured server; did you mean 'numbers'?" in " ".join(served.stderr.split())


def test_new_key_refuses_a_principal_the_config_would_refuse(home: Path) -> None:
    """`auth new-key oauth:alice` printed a key and a config entry that `config check` then refused."""
    made = manifold(home, "auth", "new-key", "oauth:alice")
    assert made.returncode == 2 and "mfk_" not in made.stdout, made.stdout
    assert "error: an API key's principal may not start with 'oauth:', not 'oauth:alice': no key made" in made.stderr
    assert manifold(home, "auth", "new-key", "alice").stdout.startswith("mfk_")


def test_register_with_a_config_that_has_no_hub_says_its_gateway_will_not_list_it(
    write_config: Any, tmp_path: Path
) -> None:
    """`manifold register --config` of a gateway without `hub` in expose registered silently, and that
    gateway never listed the instance."""
    config = write_config({"numbers": server_entry("numbers.py")}, {"discovery_dir": str(tmp_path / "found")})
    command = [sys.executable, "-m", "mcp_manifold", "register", "--name", "shop", "--url", "http://127.0.0.1:9/mcp"]
    register = subprocess.Popen(
        [*command, "--config", str(config)], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert register.stderr is not None
        said = [register.stderr.readline()]
        while said[-1] and not said[-1].startswith("registered "):  # what it says before it registers
            said.append(register.stderr.readline())
    finally:
        stop_process(register)
    assert said[-1].startswith("registered shop-") and len(said) == 2, said
    assert said[0].startswith(f"warning: {config} does not expose the hub (expose: direct)"), said
    assert "add 'hub' to expose" in said[0], said


def test_pins_takes_its_config_before_a_subcommand_and_as_its_argument(write_config: Any, home: Path) -> None:
    """`manifold pins --config team.yaml diff NAME` read the default config (another data dir's pins: "no
    pinned tool"), and `manifold pins team.yaml`, as every other command takes its config, was "No such
    command". In process (CliRunner), with a HOME that has no default config."""
    config = write_config({"numbers": server_entry("numbers.py")})
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None, "MANIFOLD_CONFIG": None, "MANIFOLD_DATA_DIR": None}

    def pins(*args: str) -> Any:
        return CliRunner().invoke(cli.app, ["pins", *args], env=env)

    assert CliRunner().invoke(cli.app, ["tools", str(config)], env=env).exit_code == 0  # pins the three tools
    for args in (["--config", str(config), "diff", "numbers/add"], [str(config), "diff", "numbers/add"]):
        shown = pins(*args)
        assert shown.exit_code == 0 and "numbers/add: unchanged since it was approved" in shown.output, shown.output
    listed = pins(str(config), "--json")
    assert listed.exit_code == 0 and {row["tool"] for row in json.loads(listed.output)} == {"add", "multiply", "sqrt"}
    approved = pins("--config", str(config), "approve", "numbers_add")
    assert "numbers/add: nothing to approve (it is served as approved)" in approved.output, approved.output
    assert "No such command" in pins("nosuch").output  # a subcommand's typo is still one
    for decision in ("approve", "reject"):  # a config file given last is the config, not a name
        decided = pins(decision, "numbers_add", str(config))
        assert decided.exit_code == 0, decided.output
        assert f"numbers/add: nothing to {decision} (it is served as approved)" in decided.output, decided.output
    forgot = pins("forget", "numbers", str(config))
    assert "numbers: 3 pins forgotten" in forgot.output, forgot.output
    assert CliRunner().invoke(cli.app, ["tools", str(config)], env=env).exit_code == 0  # pinned again
    forgot = pins("--config", str(config), "forget", "numbers")
    assert "numbers: 3 pins forgotten" in forgot.output, forgot.output


def test_call_and_search_take_the_config_first_as_their_usage_line_shows(write_config: Any, home: Path) -> None:
    """`Usage: manifold search [OPTIONS] [CONFIG] QUERY`, but `manifold search mcp.json "add numbers"` read
    the query as the config file ("unsupported file type ''") and the file as the query."""
    config = write_config({"numbers": server_entry("numbers.py")}, {"search_embedder": "bm25"})
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None, "MANIFOLD_CONFIG": None, "MANIFOLD_DATA_DIR": None}
    called = CliRunner().invoke(cli.app, ["call", str(config), "numbers_add", "--args", '{"a": 1, "b": 2}'], env=env)
    assert called.exit_code == 0 and called.output.strip() == "3.0", called.output
    found = CliRunner().invoke(cli.app, ["search", str(config), "add two numbers", "--json", "-n", "1"], env=env)
    assert found.exit_code == 0, found.output
    assert [match["name"] for match in json.loads(found.output)["matches"]] == ["numbers_add"]


def test_manifold_tools_names_a_profile_tool_entry_that_matches_no_tool(write_config: Any, home: Path) -> None:
    """`tools: [numbers_ad]` hid numbers_add without a word: `manifold tools --profile dev` listed 0 tools."""
    config = write_config({"numbers": server_entry("numbers.py")})
    data = json.loads(config.read_text())
    data["profiles"] = {"dev": {"tools": ["numbers_ad", "numbers_m*", "!numbers_sqr"]}}
    config.write_text(json.dumps(data))
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None, "MANIFOLD_CONFIG": None, "MANIFOLD_DATA_DIR": None}
    listed = CliRunner().invoke(cli.app, ["tools", str(config), "--profile", "dev", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    said = " ".join(listed.output.split())
    assert "warning: profile 'dev', field 'tools': 'numbers_ad' matches no tool any server lists; did you mean" in said
    assert "'!numbers_sqr' matches no tool any server lists; did you mean 'numbers_sqrt'" in said
    assert "'numbers_m*' matches" not in said and said.count("warning:") == 2, said


@pytest.mark.parametrize(
    ("auth", "said"),
    [
        (
            {"api_keys": {"alice": {"key": "mfk_" + "a" * 24}}},
            [
                "profile 'dev' names principal 'alcie', which is no API key's; did you mean 'alice'?",
                "profile 'dev' names 'claim:groups=dev', but only tokens carry claims and no oauth is configured",
            ],
        ),
        (None, ["profile 'dev' names principals, but no client authenticates (auth has no api_keys or oauth)"]),
    ],
    ids=["keys-only", "no-auth"],
)
def test_profile_principals_that_no_credential_can_name_are_warned_of(
    write_config: Any, home: Path, auth: dict[str, Any] | None, said: list[str]
) -> None:
    """With API keys only, `principals: [alcie]` (or a `claim:` matcher) matched no one; with no auth at all a
    profile's principals restricted no one (every client got everything). Both passed the check silently."""
    config = write_config({"numbers": server_entry("numbers.py")})
    data = json.loads(config.read_text())
    data["profiles"] = {"dev": {"principals": ["alcie", "claim:groups=dev"], "servers": ["numbers"]}}
    if auth is not None:
        data["auth"] = auth
    config.write_text(json.dumps(data))
    checked = CliRunner().invoke(cli.app, ["config", "check", str(config)])
    assert checked.exit_code == 0, checked.output
    shown = " ".join(checked.output.split())
    for line in said:
        assert f"warning: {config}: {line}" in shown, shown
    assert shown.count("warning:") == len(said), shown


def test_a_profile_flag_naming_no_profile_is_reported_as_the_flag_not_the_file(write_config: Any) -> None:
    """`serve --profile nope` was reported as the file's field ('mcp.json, field 'profile': names no profile:
    'nope''), so the reader looked in a file that says something else."""
    config = write_config({"numbers": server_entry("numbers.py")}, {"profile": "dev"})
    data = json.loads(config.read_text())
    data["profiles"] = {"dev": {"servers": ["numbers"]}}
    config.write_text(json.dumps(data))
    flagged = CliRunner().invoke(cli.app, ["serve", str(config), "--profile", "nope"])
    assert flagged.exit_code == 2, flagged.output
    said = " ".join(flagged.output.split())
    assert "command line, field 'profile': names no profile: 'nope' (profiles: dev)" in said, said
    assert f"{config}, field 'profile'" not in said
    variable = CliRunner().invoke(cli.app, ["config", "check", str(config)], env={"MANIFOLD_PROFILE": "nope"})
    assert "environment, field 'MANIFOLD_PROFILE': names no profile: 'nope'" in " ".join(variable.output.split())
