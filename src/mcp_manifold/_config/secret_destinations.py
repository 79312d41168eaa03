"""Client secrets that no configured issuer binds: a warning, not a config problem.

A remote server's OAuth client (`auth: {type: oauth, client_secret: ...}`) sends its secret to the
authorization server it uses. With `issuer` set, only that one ever gets it; without, it is the one the
MCP server names when the gateway first reaches it (then kept with the tokens). A server that is not
what it claims could name its own and collect the secret. The SDK warns of this for the
client-credentials grant, and will require `issuer` in mcp 3.0; `config check` and `serve` say it
for both grants, naming the server.
"""

from __future__ import annotations

from mcp_manifold._config.model import Config


def unbound_secret_warnings(config: Config) -> list[str]:
    """One line for each enabled remote server whose OAuth client secret no `issuer` binds."""
    return [
        f"server {server.name!r}: auth has a client_secret but no issuer, so the secret goes to whichever "
        "authorization server the server names when first reached; set auth.issuer to that server's issuer URL"
        for server in config.servers.values()
        if server.enabled and server.auth is not None and server.auth.client_secret and not server.auth.issuer
    ]
