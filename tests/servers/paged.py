"""paged: an MCP server that lists everything a few items per page, for cursor-following tests.

``--count N`` (default 23) tools ``t01``.. (each returns its own name), resources ``paged://r01``.. (text
``resource rNN``), templates ``paged://tpl01/{x}``.. and prompts ``p01``.. (each with one message); every
list answers ``--page-size K`` (default 4) items per page with an opaque ``next_cursor``. A cursor it did
not hand out is an invalid-params error, as the spec asks.

Built on the SDK's low-level ``Server``: ``MCPServer`` always answers a list in one page.

Run: ``python tests/servers/paged.py [--count N] [--page-size K]`` (stdio) or add ``--http PORT``.
"""

import base64
from typing import Any

import _common  # noqa: F401 - must come before the SDK (see _common._preload_stdlib_numbers)
import anyio
import mcp_types as types
from _common import HOST, HTTP_PATH, exit_at_once, make_parser
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

parser = make_parser(__doc__.splitlines()[0])
parser.add_argument("--count", type=int, default=23, help="items of each kind (default 23)")
parser.add_argument("--page-size", type=int, default=4, help="items per page (default 4)")
args = parser.parse_args()
NUMBERS = [f"{i:02d}" for i in range(1, args.count + 1)]


def page(items: list[Any], params: types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
    """One page of `items` from the cursor in `params`, and the cursor of the next page (None at the end)."""
    start = 0
    if params is not None and params.cursor is not None:
        try:
            start = int(base64.urlsafe_b64decode(params.cursor.encode()).decode().removeprefix("offset:"))
        except ValueError:
            raise MCPError(code=types.INVALID_PARAMS, message=f"invalid cursor {params.cursor!r}") from None
    end = start + args.page_size
    cursor = base64.urlsafe_b64encode(f"offset:{end}".encode()).decode() if end < len(items) else None
    return items[start:end], cursor


async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    tools = [
        types.Tool(name=f"t{n}", description=f"Paged tool number {n}.", input_schema={"type": "object"})
        for n in NUMBERS
    ]
    items, cursor = page(tools, params)
    return types.ListToolsResult(tools=items, next_cursor=cursor)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])


async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    resources = [types.Resource(uri=f"paged://r{n}", name=f"r{n}") for n in NUMBERS]
    items, cursor = page(resources, params)
    return types.ListResourcesResult(resources=items, next_cursor=cursor)


async def list_templates(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    templates = [types.ResourceTemplate(uri_template=f"paged://tpl{n}/{{x}}", name=f"tpl{n}") for n in NUMBERS]
    items, cursor = page(templates, params)
    return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor)


async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
    uri = str(params.uri)
    text = f"resource {uri.removeprefix('paged://')}"
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text)])


async def list_prompts(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    items, cursor = page([types.Prompt(name=f"p{n}") for n in NUMBERS], params)
    return types.ListPromptsResult(prompts=items, next_cursor=cursor)


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"prompt {params.name}"))
    return types.GetPromptResult(messages=[message])


server: Server[Any] = Server(
    "paged",
    version="1.0.0",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read_resource,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if args.http is None:
        anyio.run(serve_stdio)
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(host=HOST, streamable_http_path=HTTP_PATH), host=HOST, port=args.http)
    exit_at_once()
