"""`manifold auth`: credentials for a shared gateway."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from mcp_manifold._cli.common import auth_app, err


@auth_app.command("new-key")
def auth_new_key(principal: Annotated[str, typer.Argument(help="Who the key is for (its principal).")]) -> None:
    """Make a random API key: give the key to its holder, put the SHA-256 in the config's auth.api_keys."""
    import secrets

    from mcp_manifold._config.security import hash_key

    key = f"mfk_{secrets.token_urlsafe(32)}"
    err.print("Give this key to its holder (it is not shown again):", markup=False)
    print(key)
    err.print("Add this to the config (only the hash is stored):", markup=False)
    err.print(json.dumps({"auth": {"api_keys": {principal: {"sha256": hash_key(key)}}}}, indent=2), markup=False)
