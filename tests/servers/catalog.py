"""catalog: an MCP server with many generated tools, for tool search/retrieval and large-listing tests.

``--count N`` (default 200) tools named ``tool_0001`` .. ``tool_NNNN`` (``tool_0001_TAG`` with ``--tag TAG``
or ``CATALOG_TAG=TAG`` in the environment, so two instances can differ). Tool i (1-based) is described by
``describe(i)``: a fixed action such as "Create a calendar event" plus, past the first round of actions, a
qualifier, so every description is distinct and deterministic. Every tool takes ``query`` (string, required)
and ``limit`` (integer, default 10) and returns its arguments as JSON: ``{"limit": 10, "query": "..."}``.

Run: ``python tests/servers/catalog.py [--count N] [--tag TAG]`` (stdio) or add ``--http PORT``.
"""

import json
import os
from typing import Annotated

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from pydantic import Field

ACTIONS = [
    "Create a calendar event",
    "Search GitHub issues",
    "Convert currency",
    "Send an email message",
    "Get the weather forecast",
    "Translate text between languages",
    "Book a restaurant table",
    "Query a SQL database",
    "Upload a file to cloud storage",
    "Create a Jira ticket",
    "Post a message to a Slack channel",
    "Resize an image",
    "Look up a stock price",
    "Schedule a recurring reminder",
    "Summarize a PDF document",
    "Geocode a street address",
    "Compute driving directions",
    "Check a flight status",
    "Create a pull request",
    "List Kubernetes pods",
    "Restart a Docker container",
    "Fetch a web page",
    "Generate a QR code",
    "Transcribe an audio recording",
    "Validate an email address",
    "Shorten a URL",
    "Create an invoice",
    "Refund a payment",
    "Look up a word definition",
    "Add a contact to the address book",
    "Track a parcel shipment",
    "Order groceries for delivery",
    "Find nearby pharmacies",
    "Rotate an API key",
    "Read sensor data from a thermostat",
    "Turn on the living room lights",
    "Play a song on the speaker",
    "Compress files into a zip archive",
    "Spell-check a paragraph",
    "Calculate a mortgage payment",
]
QUALIFIERS = [
    "",
    " for a shared team workspace",
    " in the staging environment",
    " on behalf of another user",
    " using the archived records",
    " with an approval step",
]

server = MCPServer("catalog", version="1.0.0", log_level="WARNING")


def describe(i: int) -> str:
    """The description of tool number `i` (1-based)."""
    action = ACTIONS[(i - 1) % len(ACTIONS)]
    rounds, variant = divmod((i - 1) // len(ACTIONS), len(QUALIFIERS))
    suffix = f" (variant {rounds + 1})" if rounds else ""
    return f"{action}{QUALIFIERS[variant]}{suffix}."


def echo_arguments(
    query: Annotated[str, Field(description="What to act on.")],
    limit: Annotated[int, Field(description="Maximum number of results.")] = 10,
) -> str:
    """The body of every catalog tool: return the arguments as JSON."""
    return json.dumps({"limit": limit, "query": query}, sort_keys=True)


def add_tools(count: int, tag: str) -> None:
    suffix = f"_{tag}" if tag else ""
    for i in range(1, count + 1):
        server.add_tool(echo_arguments, name=f"tool_{i:04d}{suffix}", description=describe(i), structured_output=False)


if __name__ == "__main__":
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="number of tools (default 200)")
    parser.add_argument("--tag", default=os.environ.get("CATALOG_TAG", ""), help="suffix for every tool name")
    args = parser.parse_args()
    add_tools(args.count, args.tag)
    run(server, args)
