"""`python -m mcp_manifold` is the `manifold` command."""

from mcp_manifold._cli import main

main()
