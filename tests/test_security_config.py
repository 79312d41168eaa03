"""The `auth` and `profiles` sections: read, checked with every problem at once, and never a key printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp_manifold._config import check_config, load_config
from mcp_manifold._config.security import hash_key

KEY = "a-long-random-api-key-0123456789"


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}, **data}))
    return path


def test_a_good_security_config_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "manifold": {"profile": "readonly", "expose": ["direct", "proxy"]},
            "auth": {
                "api_keys": {"alice": {"sha256": hash_key(KEY)}, "ci": "${CI_KEY}", "bob": {"key": KEY + "b"}},
                "oauth": {
                    "issuer": "https://login.example.com/",
                    "jwks_url": "https://login.example.com/jwks",
                    "resource_url": "https://gw.example.com/mcp",
                },
            },
            "profiles": {
                "readonly": {"servers": "git", "tools": ["git_*", "!git_push"], "surfaces": ["direct"]},
                "admins": {"principals": ["claim:groups=admins", "root"]},
            },
        },
    )
    config = load_config(path, env={"CI_KEY": KEY + "ci"})
    assert {key.principal for key in config.auth.api_keys} == {"alice", "ci", "bob"}
    assert all(len(key.sha256) == 64 for key in config.auth.api_keys)
    assert KEY not in repr(config.auth)  # only hashes are kept
    assert config.auth.oauth is not None and config.auth.oauth.audience == ("https://gw.example.com/mcp",)
    readonly = config.profiles["readonly"]
    assert readonly.servers == ("git",) and readonly.allows_tool("git", "git_status")
    assert not readonly.allows_tool("git", "git_push") and not readonly.allows_surface("proxy")
    assert config.settings.profile == "readonly" and config.settings.pinning == "warn"


def test_every_problem_is_reported_and_no_key_is_quoted(tmp_path: Path) -> None:
    short = "tooshort"
    path = write(
        tmp_path,
        {
            "manifold": {"profile": "nobody", "pinning": "sometimes"},
            "auth": {
                "api_keys": {
                    "alice": short,
                    "bob": {"sha256": "xyz"},
                    "carol": {"key": KEY, "sha256": hash_key(KEY)},
                    "dave": {"key": "clé-secrète-0123456789abcdef"},  # no client could send it as UTF-8
                },
                "oauth": {"jwks_url": "https://x/jwks", "jwks_file": "/k.json", "algorithms": ["HS256"]},
                "tokens": [],
            },
            "profiles": {
                "dev": {"tools": "git_*", "principals": ["claim:groups"], "colour": "red"},
                "ops": {"surfaces": ["hub"]},
                "bad name!": {},
            },
        },
    )
    problems = [str(problem) for problem in check_config(path, env={})]
    text = "\n".join(problems)
    expected = [
        "field 'pinning': must be one of 'off', 'warn', 'enforce'",
        "field 'auth.api_keys.alice': is too short to be a key",
        "field 'auth.api_keys.bob.sha256': must be 64 hexadecimal digits",
        "field 'auth.api_keys.carol': needs exactly one of 'sha256'",
        "field 'auth.api_keys.dave.key': must be printable ASCII (a bearer token in an HTTP header)",
        "field 'auth.oauth.issuer': is required",
        "field 'auth.oauth.audience': needs 'audience' or 'resource_url'",
        "field 'auth.oauth.jwks_url': give exactly one of 'jwks_url'",
        "field 'auth.oauth.algorithms': unsupported 'HS256'",
        "field 'auth.tokens': unknown field",
        "field 'profiles.ops.surfaces': surface 'hub' is not exposed",
        "field 'profiles.dev.principals': 'claim:groups' must look like 'claim:NAME=VALUE'",
        "field 'profiles.dev.colour': unknown field",
        "field 'profiles': profile names must be",
        "field 'profile': names no profile: 'nobody' (profiles: ops)",
    ]
    for fragment in expected:
        assert fragment in text, (fragment, text)
    assert short not in text and KEY not in text and "secrète" not in text


def test_operators_and_the_operator_scope_are_read_and_checked(tmp_path: Path) -> None:
    oauth = {"issuer": "https://login.example.com/", "jwks_url": "https://login.example.com/jwks", "audience": "gw"}
    good = write(
        tmp_path,
        {
            "auth": {
                "api_keys": {"ops": KEY},
                "oauth": {**oauth, "operator_scope": "gateway:admin"},
                "operators": ["ops", "oauth:*@ops.example.com", "claim:groups=sre"],
            }
        },
    )
    auth = load_config(good).auth
    assert auth.operators == ("ops", "oauth:*@ops.example.com", "claim:groups=sre")
    assert auth.oauth is not None and auth.oauth.operator_scope == "gateway:admin"
    assert load_config(write(tmp_path, {"auth": {"oauth": oauth}})).auth.oauth.operator_scope == "manifold:operator"  # type: ignore[union-attr]

    bad = write(
        tmp_path,
        {
            "auth": {
                "api_keys": {"oauth:alice": KEY, "bob": KEY + "b"},
                "oauth": {**oauth, "operator_scope": "two scopes"},
                "operators": ["ops", "claim:groups"],
            }
        },
    )
    text = "\n".join(str(problem) for problem in check_config(bad, env={}))
    for fragment in (
        "field 'auth.api_keys.oauth:alice': an API key's principal may not start with 'oauth:'",
        "field 'auth.oauth.operator_scope': must be one OAuth scope (no spaces), not 'two scopes'",
        "field 'auth.operators': 'claim:groups' must look like 'claim:NAME=VALUE'",
    ):
        assert fragment in text, (fragment, text)
    alone = "\n".join(str(p) for p in check_config(write(tmp_path, {"auth": {"operators": "ops"}}), env={}))
    assert "field 'auth.operators': needs 'api_keys' or 'oauth' beside it: without authentication every" in alone
    wrong = "\n".join(str(p) for p in check_config(write(tmp_path, {"auth": {"api_keys": {"a": KEY}, "operators": 3}})))
    assert "field 'auth.operators': must be a list of non-empty strings (globs), not" in wrong


def test_revoked_tokens_are_read_and_checked(tmp_path: Path) -> None:
    oauth = {"issuer": "https://login.example.com/", "jwks_url": "https://login.example.com/jwks", "audience": "gw"}
    good = write(tmp_path, {"auth": {"oauth": oauth, "revoked": ["oauth:mallory", "jti:4f1c"]}})
    auth = load_config(good).auth
    assert auth.revoked == {"oauth:mallory", "jti:4f1c"}
    assert auth.revokes("oauth:mallory", {}) and auth.revokes("oauth:erin", {"jti": "4f1c"})
    assert not auth.revokes("oauth:erin", {"jti": "other"}) and not auth.revokes("oauth:mallory", None)  # a key

    revoked = ["alice", "mallory", "jti:", "oauth:", "oauth:dave ", " jti:4f1c"]
    bad = write(tmp_path, {"auth": {"api_keys": {"alice": KEY}, "revoked": revoked}})
    text = "\n".join(str(problem) for problem in check_config(bad, env={}))
    for fragment in (
        "field 'auth.revoked': 'alice' is an API key's principal: take its key out of api_keys to revoke it",
        "field 'auth.revoked': 'mallory' is neither a token's principal ('oauth:<claim>') nor a token id",
        "field 'auth.revoked': 'jti:' is neither",
        "field 'auth.revoked': 'oauth:' is neither",
        # Pasted with a space, it matched no token: the config passed and the token it named went on working.
        "field 'auth.revoked': 'oauth:dave ' has white space at its start or end: an entry is matched exactly",
        "field 'auth.revoked': ' jti:4f1c' has white space",
        "field 'auth.revoked': names tokens, but no oauth is configured (an API key is revoked by taking it out)",
    ):
        assert fragment in text, (fragment, text)
    wrong = "\n".join(str(p) for p in check_config(write(tmp_path, {"auth": {"oauth": oauth, "revoked": "x"}})))
    assert "field 'auth.revoked': must be a list of token principals and token ids, not" in wrong


def test_a_missing_key_variable_names_its_place(tmp_path: Path) -> None:
    path = write(tmp_path, {"auth": {"api_keys": {"ci": "${CI_KEY}"}}})
    [problem] = check_config(path, env={})
    assert problem.field == "auth.api_keys.ci" and "CI_KEY" in problem.message


def test_auth_new_key_prints_a_key_and_its_hash() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_manifold", "auth", "new-key", "alice"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    key = done.stdout.strip()
    snippet = json.loads(done.stderr[done.stderr.index("{") :])
    assert len(key) > 32 and snippet == {"auth": {"api_keys": {"alice": {"sha256": hash_key(key)}}}}


def test_config_check_names_principals_that_match_no_key_and_no_token(tmp_path: Path) -> None:
    """Token principals are `oauth:<sub>`: an entry written for a bare subject matches nobody, which fails
    closed but silently, so `config check` says so (and passes: it is a warning)."""
    path = write(
        tmp_path,
        {
            "mcpServers": {"one": {"command": sys.executable}},  # a config that serves nothing is warned of too
            "auth": {
                "api_keys": {"alice": {"sha256": hash_key(KEY)}},
                "oauth": {
                    "issuer": "https://login.example.com/",
                    "jwks_url": "https://login.example.com/jwks",
                    "resource_url": "https://gw.example.com/mcp",
                },
                "operators": ["root", "oauth:ops@example.com"],
            },
            "profiles": {
                "dev": {"principals": ["alice", "carol@example.com", "*@dev.example.com", "claim:groups=dev"]},
                "bots": {"principals": ["oauth:bot-*", "ali*"]},
            },
        },
    )
    command = [sys.executable, "-m", "mcp_manifold", "config", "check", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr
    said = " ".join(result.stderr.split())  # rich may wrap the lines
    assert "profile 'dev' names principal 'carol@example.com', which is no API key's and no token's" in said
    assert "did you mean 'oauth:carol@example.com'?" in said
    assert "auth.operators names principal 'root'" in said
    for fine in ("'alice'", "*@dev.example.com", "claim:groups=dev", "oauth:bot-*", "'ali*'", "oauth:ops@"):
        assert f"principal {fine}" not in said and f"names principal {fine}" not in said, fine
    assert said.count("warning:") == 2, said


def test_config_check_names_a_client_secret_no_issuer_binds(tmp_path: Path) -> None:
    """Without `issuer`, a remote server's OAuth client secret goes to whichever authorization server the
    server names (the SDK warns of it for one grant, and mcp 3.0 will require `issuer`): said per server."""
    secret = {"type": "oauth", "client_id": "gw", "client_secret": "s3cret-value"}
    servers = {
        "billing": {"url": "https://billing.example/mcp", "auth": {**secret, "grant": "client_credentials"}},
        "wiki": {"url": "https://wiki.example/mcp", "auth": secret},
        "bound": {"url": "https://b.example/mcp", "auth": {**secret, "issuer": "https://login.example"}},
        "public": {"url": "https://p.example/mcp", "auth": {"type": "oauth"}},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    command = [sys.executable, "-m", "mcp_manifold", "config", "check", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr
    said = " ".join(result.stderr.split())
    for name in ("billing", "wiki"):
        assert f"server {name!r}: auth has a client_secret but no issuer" in said, said
    assert said.count("warning:") == 2 and "s3cret-value" not in said, said
