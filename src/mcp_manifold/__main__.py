"""`python -m mcp_manifold` is the `manifold` command."""

from mcp_manifold.cli import main

main()
