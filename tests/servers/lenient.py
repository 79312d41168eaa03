"""lenient: a file server that normalises the URIs it is asked for, as many real servers do.

Lists `file:///public/readme`, `file:///secret/key` and the folder `file:///public/`; `resources/read` and
`resources/subscribe` take any URI that normalises to one of them: the scheme's and host's case ignored,
percent-encoding decoded, dot segments resolved, repeated slashes collapsed, the host, query and fragment
dropped. So
`file:///public/../secret/key`, `FILE:///secret/key` and `file:///%73ecret/key` all read the secret. Tool
`subscribed()` answers the URIs subscribed now (normalised, a sorted JSON list). For the tests that a
profile's resource globs cannot be passed by another spelling of a URI they deny.

Run: ``python tests/servers/lenient.py`` (stdio) or ``python tests/servers/lenient.py --http PORT``.
"""

import json
import posixpath
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from _common import lowlevel, make_parser, run
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    EmptyResult,
    ReadResourceRequestParams,
    ReadResourceResult,
    SubscribeRequestParams,
    TextResourceContents,
)

FILES = {"/public/readme": "public text", "/secret/key": "SECRET-KEY-TEXT", "/public": "the public folder"}
LISTED = ("/public/", "/public/readme", "/secret/key")  # a folder as it is commonly listed, with its `/`

server = MCPServer("lenient", version="1.0.0", log_level="WARNING")
subscriptions: set[str] = set()


def _listed(path: str) -> None:
    @server.resource(f"file://{path}", name=path.strip("/").replace("/", "-"), mime_type="text/plain")
    def content() -> str:
        return FILES[normalised(f"file://{path}")]


for _path in LISTED:
    _listed(_path)


def normalised(uri: str) -> str:
    """The path `uri` names, as a lenient server reads it."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        raise MCPError(code=-32602, message=f"not a file URI: {uri}")
    path = posixpath.normpath(re.sub("/+", "/", unquote(parts.path)))
    return "/" + path.lstrip("/")


@server.tool(structured_output=False)
def subscribed() -> str:
    """The paths subscribed now, as a sorted JSON list."""
    return json.dumps(sorted(subscriptions))


async def on_read(ctx: ServerRequestContext[Any], params: ReadResourceRequestParams) -> ReadResourceResult:
    path = normalised(str(params.uri))
    if path not in FILES:
        raise MCPError(code=-32002, message=f"no such file: {path}")
    return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text=FILES[path], mime_type="text/plain")])


async def on_subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
    subscriptions.add(normalised(str(params.uri)))
    return EmptyResult()


lowlevel(server).add_request_handler("resources/read", ReadResourceRequestParams, on_read)
lowlevel(server).add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
