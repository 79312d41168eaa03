"""never_ready: a process that never answers anything, for initialize-timeout tests.

Over stdio it reads (and ignores) every line on stdin and keeps sleeping even after stdin closes, so only a
signal ends it. With ``--http PORT`` it accepts TCP connections on 127.0.0.1:PORT and never responds.
It is not an MCP server at all and does not import the SDK.

Run: ``python tests/servers/never_ready.py`` (stdio) or ``python tests/servers/never_ready.py --http PORT``.
"""

import socket
import sys
import time

from _common import HOST, make_parser


def swallow_stdin() -> None:
    for _line in sys.stdin.buffer:
        pass


def swallow_connections(port: int) -> None:
    held: list[socket.socket] = []  # kept open (and unread) forever
    with socket.create_server((HOST, port)) as listener:
        while True:
            connection, _address = listener.accept()
            held.append(connection)


if __name__ == "__main__":
    args = make_parser(__doc__.splitlines()[0]).parse_args()
    if args.http is None:
        swallow_stdin()
    else:
        swallow_connections(args.http)
    while True:
        time.sleep(3600)
