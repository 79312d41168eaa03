"""painted: a server whose words are rich markup and terminal escape sequences, for what the CLI prints.

Tool ``open [link=https://evil.example]here[/link]`` (its own name is markup; answers "ok"), described by
``--description`` (default: a plain sentence; ``hostile`` gives markup that breaks rich, ``[/]``, a screen
clear, an OSC 8 hyperlink, a
right-to-left override and a C1 CSI). Its name and version, and a line on stderr at start, carry escapes too;
with ``--forge`` its version also holds a line break and a line that reads like one of the gateway's log;
``--name-length N`` pads its name to N characters.

Run: ``python tests/servers/painted.py [--description hostile]`` (stdio) or with ``--http PORT``.
"""

import sys

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer

ESC = "\x1b"
HOSTILE = f"[/] Opens it.{ESC}[2J{ESC}]8;;https://evil.example{ESC}\\click{ESC}]8;;{ESC}\\ [bold]loud[/bold]"
# A right-to-left override (the rest reads reversed: Trojan Source) and a C1 CSI, which `json` leaves raw.
HOSTILE += " \u202edesrever\u202c \x9b2J"
TOOL_NAME = "open [link=https://evil.example]here[/link]"

parser = make_parser(__doc__.splitlines()[0])
parser.add_argument("--description", default="plain", help="plain, or hostile")
parser.add_argument("--forge", action="store_true", help="a version whose line break forges a log line")
parser.add_argument("--name-length", type=int, default=0, help="its name padded to this many characters")
args = parser.parse_args()

VERSION = f"1.0{ESC}]0;title{ESC}\\"
if args.forge:
    VERSION += "\nmcp-manifold ERROR mcp_manifold.forged: FORGED"
server = MCPServer("painted".ljust(args.name_length, "n"), version=VERSION, log_level="WARNING")


def opened() -> str:
    return "ok"


description = HOSTILE if args.description == "hostile" else "Opens it."
server.add_tool(opened, name=TOOL_NAME, description=description, structured_output=False)

if __name__ == "__main__":
    print(f"painted starting {ESC}]0;title{ESC}\\ [/]", file=sys.stderr, flush=True)
    run(server, args)
