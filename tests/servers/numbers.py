"""numbers: a small arithmetic MCP server, one of the ordinary upstreams the gateway aggregates.

Tools ``add``, ``multiply`` and ``sqrt`` (float arguments, structured output), prompt ``explain`` and
resource ``numbers://constants`` (JSON text).

Run: ``python tests/servers/numbers.py`` (stdio) or ``python tests/servers/numbers.py --http PORT``.
"""

import json
import math
from typing import Annotated

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

Number = Annotated[float, Field(description="Any real number.")]

server = MCPServer("numbers", version="1.0.0", log_level="WARNING")


@server.tool()
def add(a: Number, b: Number) -> float:
    """Add two numbers and return their sum (a + b)."""
    return a + b


@server.tool()
def multiply(a: Number, b: Number) -> float:
    """Multiply two numbers and return their product (a * b)."""
    return a * b


@server.tool()
def sqrt(x: Annotated[float, Field(description="A number greater than or equal to zero.")]) -> float:
    """Return the square root of a non-negative number x; negative x is an error."""
    if x < 0:
        raise ToolError(f"cannot take the square root of negative number {x}")
    return math.sqrt(x)


@server.prompt()
def explain(topic: Annotated[str, Field(description="The topic, e.g. 'prime numbers'.")]) -> list[UserMessage]:
    """Ask for a plain-language explanation of a mathematical topic."""
    return [UserMessage(f"Explain the mathematical topic '{topic}' in plain language, with one worked example.")]


@server.resource(
    "numbers://constants",
    name="constants",
    description="Well-known mathematical constants as a JSON object.",
    mime_type="application/json",
)
def constants() -> str:
    return json.dumps({"pi": math.pi, "e": math.e, "tau": math.tau, "sqrt2": math.sqrt(2)})


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
