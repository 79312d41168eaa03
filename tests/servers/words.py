"""words: a small text-processing MCP server, with one 60-character tool name to exercise name shortening.

Tools ``upper``, ``reverse``, ``count_words`` and ``LONG_TOOL_NAME`` (exactly 60 characters), all taking ``text``.

Run: ``python tests/servers/words.py`` (stdio) or ``python tests/servers/words.py --http PORT``.
"""

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer

LONG_TOOL_NAME = "really_long_tool_name_for_testing_name_shortening_in_gateway"
assert len(LONG_TOOL_NAME) == 60

server = MCPServer("words", version="1.0.0", log_level="WARNING")


@server.tool(structured_output=False)
def upper(text: str) -> str:
    """Convert text to upper case."""
    return text.upper()


@server.tool(structured_output=False)
def reverse(text: str) -> str:
    """Reverse the characters of the text."""
    return text[::-1]


@server.tool()
def count_words(text: str) -> int:
    """Count the whitespace-separated words in the text."""
    return len(text.split())


@server.tool(name=LONG_TOOL_NAME, structured_output=False)
def long_named(text: str) -> str:
    """Return the text unchanged; exists only for its 60-character name."""
    return text


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
