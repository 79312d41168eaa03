"""The `auth` and `profiles` sections: who may connect over HTTP, and what each client may see and use.

```yaml
auth:
  api_keys:
    alice: {sha256: 9f86d081...}     # a key kept as its SHA-256 (`manifold auth new-key alice` makes one)
    ci: ${CI_GATEWAY_KEY}            # or the key itself, from the environment; hashed when read
  oauth:
    issuer: https://login.example.com/
    jwks_url: https://login.example.com/.well-known/jwks.json    # or jwks_file
    resource_url: https://gateway.example.com/mcp                 # RFC 9728; the default audience
    operator_scope: manifold:operator                             # (the default) a token with it is an operator's
  operators: [alice, "oauth:*@ops.example.com"]  # who may read /metrics and the dashboard's overview and calls
  revoked: ["oauth:mallory@example.com", "jti:4f1c..."]  # tokens refused before their exp
profiles:
  readonly:
    principals: [ci, "oauth:robot@example.com", "claim:groups=auditors"]
    servers: [git]
    tools: ["git_*", "!git_push"]
```

Like the server entries, every field is checked and every problem reported at once; no message
ever quotes a key. Cross-checks with the settings (the `profile` setting names a profile, a
profile's surfaces are exposed) are in `check_against_settings`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from mcp_manifold._config.model import ApiKey, AuthConfig, OAuthConfig
from mcp_manifold._config.problems import Invalid, Problems, kind, unknown
from mcp_manifold._config.settings import SURFACE_NAMES, Settings
from mcp_manifold._config.values import as_float, as_str, http_url_problem, non_negative
from mcp_manifold._config.variables import expand_fields
from mcp_manifold._core.profiles import TOKEN_PRINCIPAL_PREFIX, Profile, claim_matcher_problem

AUTH_FIELDS = ("api_keys", "oauth", "operators", "revoked")
OAUTH_FIELDS = (
    "issuer",
    "audience",
    "resource_url",
    "jwks_url",
    "jwks_file",
    "principal_claim",
    "algorithms",
    "required_scopes",
    "leeway",
    "operator_scope",
)
API_KEY_FIELDS = ("sha256", "key")
PROFILE_FIELDS = ("principals", "servers", "tools", "resources", "prompts", "surfaces")
# Asymmetric algorithms only: a shared-secret (HS*) token could be forged by anyone who can verify one.
JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MIN_KEY_LENGTH = 16
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_HEADER_TEXT = re.compile(r"[\x20-\x7e]+\Z")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")


def hash_key(key: str) -> str:
    """The SHA-256 (hex) a key is kept and compared as. API keys are long random strings, so a fast
    hash is enough: there is nothing to guess a dictionary of."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _globs(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]  # a single glob is a list of one
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) and item for item in value):
        raise Invalid(f"must be a list of non-empty strings (globs), not {kind(value)}")
    return tuple(value)


# --- auth ----------------------------------------------------------------------------------------


def parse_auth(raw: Mapping[Any, Any], env: Mapping[str, str], problems: Problems) -> AuthConfig:
    # Expanded under its own name, so a missing ${VAR} is reported as `auth.api_keys.ci`.
    values = expand_fields({"auth": raw}, env, problems)[0].get("auth", {})
    for key in values:
        if key not in AUTH_FIELDS:
            problems.add(None, f"auth.{key}", unknown("field", str(key), AUTH_FIELDS))
    keys = _api_keys(values.get("api_keys"), problems)
    oauth = _oauth(values["oauth"], problems) if values.get("oauth") is not None else None
    operators = _operators(values, problems)
    revoked = _revoked(values, keys, problems)
    return AuthConfig(api_keys=keys, oauth=oauth, operators=operators, revoked=revoked)


_TOKEN_ID_PREFIX = "jti:"


def _revoked(values: Mapping[Any, Any], keys: tuple[ApiKey, ...], problems: Problems) -> frozenset[str]:
    """`auth.revoked`: token principals (`oauth:alice`) and token ids (`jti:...`), exactly (no globs: a
    revocation names what it refuses)."""
    raw = values.get("revoked")
    if raw is None:
        return frozenset()
    if not isinstance(raw, list | tuple) or not all(isinstance(item, str) for item in raw):
        problems.add(None, "auth.revoked", f"must be a list of token principals and token ids, not {kind(raw)}")
        return frozenset()
    key_principals = {key.principal for key in keys}
    for entry in raw:
        if entry in key_principals:
            problems.add(
                None, "auth.revoked", f"{entry!r} is an API key's principal: take its key out of api_keys to revoke it"
            )
        elif entry != entry.strip():  # pasted with a space: it matched no token, and the leaked one went on working
            problems.add(
                None,
                "auth.revoked",
                f"{entry!r} has white space at its start or end: an entry is matched exactly, so it would revoke "
                "no token (write it without)",
            )
        elif not any(entry.startswith(prefix) and entry[len(prefix) :].strip() for prefix in _REVOCABLE):
            problems.add(
                None,
                "auth.revoked",
                f"{entry!r} is neither a token's principal ('{TOKEN_PRINCIPAL_PREFIX}<claim>') nor a token id "
                f"('{_TOKEN_ID_PREFIX}<its jti claim>')",
            )
    if raw and values.get("oauth") is None:
        problems.add(
            None, "auth.revoked", "names tokens, but no oauth is configured (an API key is revoked by taking it out)"
        )
    return frozenset(raw)


_REVOCABLE = (TOKEN_PRINCIPAL_PREFIX, _TOKEN_ID_PREFIX)


def _operators(values: Mapping[Any, Any], problems: Problems) -> tuple[str, ...]:
    """`auth.operators`: principal globs and `claim:` matchers, as a profile's `principals`."""
    raw = values.get("operators")
    if raw is None:
        return ()
    try:
        operators = _globs(raw)
    except Invalid as exc:
        problems.add(None, "auth.operators", str(exc))
        return ()
    for matcher in operators:
        if problem := claim_matcher_problem(matcher):
            problems.add(None, "auth.operators", problem)
    if values.get("api_keys") is None and values.get("oauth") is None:
        problems.add(
            None,
            "auth.operators",
            "needs 'api_keys' or 'oauth' beside it: without authentication every local user is an operator",
        )
    return operators


def _api_keys(raw: Any, problems: Problems) -> tuple[ApiKey, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problems.add(None, "auth.api_keys", f"must be a mapping of principals to keys, not {kind(raw)}")
        return ()
    keys: list[ApiKey] = []
    owners: dict[str, str] = {}
    for principal, entry in raw.items():
        where = f"auth.api_keys.{principal}"
        if not isinstance(principal, str) or not principal.strip():
            problems.add(None, "auth.api_keys", f"principals must be non-empty strings, not {principal!r}")
            continue
        if problem := key_principal_problem(principal):
            problems.add(None, where, problem)
            continue
        try:
            hashes = _key_hashes(entry)
        except Invalid as exc:
            problems.add(None, f"{where}.{exc.path}" if exc.path else where, str(exc))
            continue
        for digest in hashes:
            first = owners.setdefault(digest, principal)
            if first != principal:
                problems.add(None, where, f"the same key is also given to principal {first!r}; a key names one")
                continue
            keys.append(ApiKey(principal, digest))
    return tuple(keys)


def key_principal_problem(principal: str) -> str | None:
    """Why `principal` cannot name an API key, or None (`manifold auth new-key` asks it too)."""
    if not principal.strip():
        return "an API key's principal must be a non-empty name"
    if principal.startswith(TOKEN_PRINCIPAL_PREFIX):
        # That name space is the tokens': a key named so could pass for a token's subject.
        return f"an API key's principal may not start with {TOKEN_PRINCIPAL_PREFIX!r}"
    return None


def _key_hashes(entry: Any) -> list[str]:
    """The hashes of one principal's key(s): a key, `{key: ...}` or `{sha256: hex or [hex, ...]}`."""
    if isinstance(entry, str):
        return [_hashed_key(entry, None)]
    if not isinstance(entry, Mapping):
        raise Invalid(f"must be a key (a string, e.g. ${{MY_KEY}}) or a mapping with 'sha256', not {kind(entry)}")
    for key in entry:
        if key not in API_KEY_FIELDS:
            raise Invalid(unknown("field", str(key), API_KEY_FIELDS), str(key))
    if ("key" in entry) == ("sha256" in entry):
        raise Invalid("needs exactly one of 'sha256' (the key's SHA-256, hex) or 'key' (the key itself)")
    if "key" in entry:
        return [_hashed_key(entry["key"], "key")]
    digests = entry["sha256"] if isinstance(entry["sha256"], list) else [entry["sha256"]]
    result = []
    for digest in digests:
        if not isinstance(digest, str) or not _SHA256.match(digest.strip().lower()):
            raise Invalid("must be 64 hexadecimal digits (the key's SHA-256), or a list of them", "sha256")
        result.append(digest.strip().lower())
    return result


def _hashed_key(key: Any, path: str | None) -> str:
    if not isinstance(key, str):
        raise Invalid(f"must be a string, not {kind(key)}", path)
    if len(key.strip()) < MIN_KEY_LENGTH:
        # Never quote the key: this message may end up in a log.
        raise Invalid(f"is too short to be a key: use at least {MIN_KEY_LENGTH} random characters", path)
    if not _HEADER_TEXT.match(key.strip()):
        # The key travels in an HTTP header, whose bytes are read as Latin-1: a key with another character
        # was hashed as UTF-8 here, and no client sending it as UTF-8 (or at all, for most) could match it.
        raise Invalid("must be printable ASCII (a bearer token in an HTTP header): it has another character", path)
    return hash_key(key.strip())


def _oauth(raw: Any, problems: Problems) -> OAuthConfig | None:
    if not isinstance(raw, Mapping):
        problems.add(
            None, "auth.oauth", f"must be a mapping with 'issuer' and 'jwks_url' or 'jwks_file', not {kind(raw)}"
        )
        return None
    before = len(problems.items)

    def field(key: str) -> str:
        return f"auth.oauth.{key}"

    for key in raw:
        if key not in OAUTH_FIELDS:
            problems.add(None, field(str(key)), unknown("field", str(key), OAUTH_FIELDS))

    def get(key: str, convert: Any, default: Any = None) -> Any:
        if raw.get(key) is None:
            return default
        try:
            return convert(raw[key])
        except Invalid as exc:
            problems.add(None, field(key), str(exc))
            return default

    def url(value: Any) -> str:
        text = as_str(value).strip()
        if problem := http_url_problem(text):
            raise Invalid(problem)
        return text

    def algorithms(value: Any) -> tuple[str, ...]:
        names = _globs(value)
        bad = [name for name in names if name not in JWT_ALGORITHMS]
        if bad:
            raise Invalid(f"unsupported {', '.join(map(repr, bad))}: pick from {', '.join(JWT_ALGORITHMS)}")
        return names

    issuer = get("issuer", url)
    if raw.get("issuer") is None:
        problems.add(None, field("issuer"), "is required: the URL of the authorization server that issues tokens")
    resource_url = get("resource_url", url)
    audience = get("audience", _globs, (resource_url,) if resource_url else ())
    if not audience:
        problems.add(
            None,
            field("audience"),
            "needs 'audience' or 'resource_url': tokens must be issued for this gateway (RFC 8707)",
        )
    jwks_url = get("jwks_url", url)
    jwks_file = get("jwks_file", lambda value: as_str(value).strip())
    if (raw.get("jwks_url") is None) == (raw.get("jwks_file") is None):
        problems.add(None, field("jwks_url"), "give exactly one of 'jwks_url' (the issuer's JWKS) or 'jwks_file'")
    config = OAuthConfig(
        issuer=issuer or "",
        audience=tuple(audience or ()),
        resource_url=resource_url,
        jwks_url=jwks_url,
        jwks_file=jwks_file,
        principal_claim=get("principal_claim", lambda value: as_str(value).strip() or "sub", "sub"),
        algorithms=get("algorithms", algorithms, ("RS256", "ES256")),
        required_scopes=get("required_scopes", _globs, ()),
        leeway=get("leeway", lambda value: _checked_float(value), 30.0),
        operator_scope=get("operator_scope", _scope_name, "manifold:operator"),
    )
    return config if len(problems.items) == before else None


def _scope_name(value: Any) -> str:
    text = as_str(value).strip()
    if not text or any(char.isspace() for char in text):
        raise Invalid(f"must be one OAuth scope (no spaces), not {value!r}")
    return text


def _checked_float(value: Any) -> float:
    number = as_float(value)
    if problem := non_negative(number):
        raise Invalid(problem)
    return number


# --- profiles ------------------------------------------------------------------------------------


def parse_profiles(raw: Mapping[Any, Any], env: Mapping[str, str], problems: Problems) -> dict[str, Profile]:
    profiles: dict[str, Profile] = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not _PROFILE_NAME.match(name):
            problems.add(None, "profiles", f"profile names must be 1-64 letters, digits, '_', '-' or '.', not {name!r}")
            continue
        profile = _profile(name, entry, env, problems)
        if profile is not None:
            profiles[name] = profile
    return profiles


def _profile(name: str, entry: Any, env: Mapping[str, str], problems: Problems) -> Profile | None:
    where = f"profiles.{name}"
    if entry is None:
        entry = {}  # `readonly:` with nothing under it: everything
    if not isinstance(entry, Mapping):
        problems.add(None, where, f"must be a mapping of {', '.join(PROFILE_FIELDS)}, not {kind(entry)}")
        return None
    before = len(problems.items)
    values = expand_fields({where: entry}, env, problems)[0].get(where, {})
    fields: dict[str, Any] = {}
    for key, value in values.items():
        if key not in PROFILE_FIELDS:
            problems.add(None, f"{where}.{key}", unknown("field", str(key), PROFILE_FIELDS))
            continue
        try:
            fields[key] = _globs(value)
        except Invalid as exc:
            problems.add(None, f"{where}.{key}", str(exc))
            continue
        if key == "surfaces":
            bad = [surface for surface in fields[key] if surface not in SURFACE_NAMES]
            if bad:
                problems.add(
                    None,
                    f"{where}.surfaces",
                    f"unknown {', '.join(map(repr, bad))}: pick from {', '.join(SURFACE_NAMES)}",
                )
        if key == "principals":
            for matcher in fields[key]:
                if problem := claim_matcher_problem(matcher):
                    problems.add(None, f"{where}.principals", problem)
    if len(problems.items) > before:
        return None
    return Profile(name=name, **fields)


def check_against_settings(
    profiles: Mapping[str, Profile],
    settings: Settings,
    problems: Problems,
    profile_given: tuple[Problems, str] | None = None,
) -> None:
    """What only holds together with the settings: the profile setting names a profile, and each
    profile's surfaces are exposed. `profile_given`: where the profile setting came from (`given_in`), so a
    `--profile` typo is not reported as the file's."""
    if settings.profile is not None and settings.profile not in profiles:
        known = ", ".join(profiles) or "none are defined"
        where, label = profile_given or (problems, "profile")
        where.add(None, label, f"names no profile: {settings.profile!r} (profiles: {known})")
    for profile in profiles.values():
        for surface in profile.surfaces or ():
            if surface not in settings.expose:
                problems.add(
                    None,
                    f"profiles.{profile.name}.surfaces",
                    f"surface {surface!r} is not exposed (expose: {', '.join(settings.expose)})",
                )
