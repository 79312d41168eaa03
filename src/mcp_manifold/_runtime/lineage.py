"""Keeps a gateway from starting itself behind itself.

A config that lists mcp-manifold serving that same config (written by hand, or copied from a client
that already goes through the gateway) would start a gateway that starts a gateway, without end.
Each gateway hands the configs it serves down to its stdio servers in one environment variable;
a gateway that finds its own config there refuses to start, and its parent reports that server as
failed with the reason. Gateways in front of gateways with other configs are fine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mcp_manifold._errors import ConfigError, ConfigProblem

LINEAGE_VAR = "MANIFOLD_LINEAGE"


def _identity(config_path: Path) -> str:
    return str(config_path.expanduser().resolve())


def served_above(env: Mapping[str, str]) -> list[str]:
    """The configs served by the gateways that started this process, outermost first."""
    return [entry for entry in env.get(LINEAGE_VAR, "").split(os.pathsep) if entry]


def check_not_nested(config_path: Path | None, env: Mapping[str, str] = os.environ) -> None:
    """Raise `ConfigError` when a gateway up the chain already serves this config."""
    if config_path is None:
        return
    if _identity(config_path) in served_above(env):
        message = (
            "a gateway serving this config started this one: the config lists mcp-manifold itself "
            "as a server; remove that entry (it would start gateways without end)"
        )
        raise ConfigError([ConfigProblem(str(config_path), None, None, message)])


def child_environment(config_path: Path | None, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What this gateway adds to the environment of the servers it starts."""
    chain = served_above(env)
    if config_path is not None:
        chain.append(_identity(config_path))
    return {LINEAGE_VAR: os.pathsep.join(chain)} if chain else {}
