"""exits_early: a server that dies at start-up, for spawn-failure tests.

It writes ``fatal: missing API key`` to stderr and exits with code 2 at once, before reading anything,
whether started for stdio or with ``--http PORT``. It does not import the SDK.

Run: ``python tests/servers/exits_early.py`` (stdio) or ``python tests/servers/exits_early.py --http PORT``.
"""

import sys

from _common import make_parser

if __name__ == "__main__":
    make_parser(__doc__.splitlines()[0]).parse_args()
    sys.stderr.write("fatal: missing API key\n")
    sys.stderr.flush()
    sys.exit(2)
