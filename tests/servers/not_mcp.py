"""not_mcp: a program that is not an MCP server, for start-up failure tests.

Over stdio it writes ``Error: could not load settings.toml`` to stdout (where MCP is expected), then
swallows stdin and keeps sleeping even after stdin closes, so only a signal ends it: the way a
misconfigured server that prints its complaint and waits looks to a gateway. It does not import the SDK.

Run: ``python tests/servers/not_mcp.py`` (stdio only).
"""

import sys
import time

from _common import make_parser

if __name__ == "__main__":
    make_parser(__doc__.splitlines()[0]).parse_args()
    sys.stdout.write("Error: could not load settings.toml\n")
    sys.stdout.flush()
    for _line in sys.stdin.buffer:
        pass
    while True:
        time.sleep(3600)
