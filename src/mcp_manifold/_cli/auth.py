"""`manifold auth`: credentials for a shared gateway."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from mcp_manifold._cli.common import ConfigOption, auth_app, err, load_for


@auth_app.command("new-key")
def auth_new_key(principal: Annotated[str, typer.Argument(help="Who the key is for (its principal).")]) -> None:
    """Make a random API key: give the key to its holder, put the SHA-256 in the config's auth.api_keys."""
    import secrets

    from mcp_manifold._config.security import hash_key, key_principal_problem

    if problem := key_principal_problem(principal):
        # Before, the key was made and printed, and the config it said to write was then refused.
        err.print(f"error: {problem}, not {principal!r}: no key made", markup=False, highlight=False)
        raise typer.Exit(2)
    key = f"mfk_{secrets.token_urlsafe(32)}"
    err.print("Give this key to its holder (it is not shown again):", markup=False)
    print(key)
    err.print("Add this to the config (only the hash is stored):", markup=False)
    err.print(json.dumps({"auth": {"api_keys": {principal: {"sha256": hash_key(key)}}}}, indent=2), markup=False)


@auth_app.command("login", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def auth_login(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The configured server to log in to (its entry has `auth`).")],
    config: ConfigOption = None,
) -> None:
    """Log the gateway in to a remote server behind OAuth: opens the authorization page in the browser
    ($BROWSER is honoured) and takes the redirect on a loopback port; the tokens are kept in the data dir."""
    import anyio

    from mcp_manifold._errors import ManifoldError
    from mcp_manifold._runtime.remote_auth import login_by_name

    cfg = load_for(ctx, config)
    try:
        where = anyio.run(login_by_name, cfg, server)
    except ManifoldError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    err.print(f"logged in to {server!r}; its tokens are kept in {where}", markup=False, highlight=False)
