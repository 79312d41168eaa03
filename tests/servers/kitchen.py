"""kitchen: the full-feature fixture MCP server for the gateway's end-to-end tests.

It has one tool per protocol feature (content types, structured output, progress, logging, sampling,
elicitation, roots, cancellation, crashes, huge results, errors, list_changed, resource updates, stderr),
static resources of each kind plus a template, resource subscriptions, and two prompts.

Run: ``python tests/servers/kitchen.py`` (stdio) or ``python tests/servers/kitchen.py --http PORT``.
"""

import json
import os
import sys
from typing import Annotated, Any

import anyio
from _common import advertise_list_changed, lowlevel, make_parser, report_steps, run
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    Image,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
    UserMessage,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    CreateMessageResult,
    EmbeddedResource,
    EmptyResult,
    ListRootsResult,
    LoggingLevel,
    ResourceUpdatedNotification,
    ResourceUpdatedNotificationParams,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    ToolListChangedNotification,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

# A valid 1x1 PNG (one opaque red RGBA pixel).
PNG_1X1 = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
    b"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)
HUGE_PATTERN = "0123456789abcdefghijklmnopqrstuvwxyz"

server = MCPServer("kitchen", version="1.0.0", instructions="Full-feature MCP test fixture.", log_level="WARNING")
advertise_list_changed(server, tools=True)
subscriptions: set[str] = set()  # URIs a handshake-era client subscribed to (touch notifies regardless)
LOG_LEVELS: list[LoggingLevel] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
min_log_level: LoggingLevel = "debug"  # set by logging/setLevel


def is_modern(ctx: Context) -> bool:
    """Whether this request speaks the 2026-07-28 protocol (change events go to subscriptions/listen)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


# --- plain tools ---------------------------------------------------------------------------------


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the given text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers (structured output: {"result": a + b} plus a text block)."""
    return a + b


@server.tool()
def image() -> Image:
    """Return a 1x1 PNG image."""
    return Image(data=PNG_1X1, format="png")


@server.tool()
def embedded() -> EmbeddedResource:
    """Return an embedded text resource (kitchen://embedded)."""
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(uri="kitchen://embedded", mime_type="text/plain", text="embedded text"),
    )


@server.tool()
def mixed() -> list[TextContent | Image]:
    """Return a text block followed by an image block."""
    return [TextContent(type="text", text="here is an image"), Image(data=PNG_1X1, format="png")]


@server.tool(structured_output=False)
def huge(size: int = 1_000_000) -> str:
    """Return one text block of exactly `size` characters (a repeated pattern)."""
    return (HUGE_PATTERN * (size // len(HUGE_PATTERN) + 1))[:size]


@server.tool(structured_output=False)
def fail(message: str = "boom") -> str:
    """Always fail: the result has isError=true and its text contains `message`."""
    raise ToolError(message)


@server.tool(structured_output=False)
def stderr(text: str) -> str:
    """Write `text` (plus a newline) to the server's stderr and return "ok"."""
    print(text, file=sys.stderr, flush=True)
    return "ok"


@server.tool(structured_output=False)
def crash() -> str:
    """Kill the server process immediately (exit code 3) after writing "crashing now" to stderr."""
    sys.stderr.write("crashing now\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(structured_output=False)
async def slow(seconds: float = 5) -> str:
    """Sleep for `seconds` (cancellable), then return "slept"."""
    await anyio.sleep(seconds)
    return "slept"


# --- tools that talk back to the client during the call ---------------------------------------


@server.tool(structured_output=False)
async def progress(ctx: Context, steps: int = 3) -> str:
    """Report progress `steps` times (i of `steps`, with a message), then return "done {steps}"."""
    return await report_steps(ctx, steps)


@server.tool(structured_output=False)
async def log(ctx: Context, message: str, level: LoggingLevel = "info") -> str:
    """Send `message` to the client as a notifications/message log entry at `level`, then return "logged".

    Entries below the level set with logging/setLevel are dropped (the result is still "logged").
    """
    if LOG_LEVELS.index(level) >= LOG_LEVELS.index(min_log_level):
        await ctx.log(level, message, logger_name="kitchen")
    return "logged"


async def on_set_level(ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
    global min_log_level
    min_log_level = params.level
    return EmptyResult()


# Registering logging/setLevel makes the server advertise the logging capability.
lowlevel(server).add_request_handler("logging/setLevel", SetLevelRequestParams, on_set_level)


class Answer(BaseModel):
    answer: str


def ask_question(question: str) -> Elicit[Answer]:
    return Elicit(question, Answer)


def sampling_request(prompt: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=100)


def roots_request() -> ListRoots:
    return ListRoots()


# Resolve(...) parameters are filled by the SDK before the body runs and are not part of the input schema:
# handshake-era clients get a real elicitation/sampling/roots request mid-call, 2026-07-28 clients an
# InputRequiredResult that `Client.call_tool` answers through the same callbacks and retries.


@server.tool(structured_output=False)
def elicit(question: str, reply: Annotated[ElicitationResult[Answer], Resolve(ask_question)]) -> str:
    """Ask the user `question` (a form with one string field "answer"); report what they did."""
    if isinstance(reply, AcceptedElicitation):
        return f"accepted: {reply.data.answer}"
    return "declined" if isinstance(reply, DeclinedElicitation) else "cancelled"


@server.tool(structured_output=False)
def sample(prompt: str, result: Annotated[CreateMessageResult, Resolve(sampling_request)]) -> str:
    """Ask the client's LLM to answer `prompt` (sampling/createMessage) and return its text."""
    return result.content.text if isinstance(result.content, TextContent) else f"<{result.content.type}>"


@server.tool(structured_output=False)
def roots(result: Annotated[ListRootsResult, Resolve(roots_request)]) -> str:
    """Ask the client for its roots and return their URIs, one per line."""
    return "\n".join(str(root.uri) for root in result.roots)


# --- tools that send change notifications --------------------------------------------------------


@server.tool(structured_output=False)
async def add_tool(ctx: Context, name: str) -> str:
    """Register a new tool called `name` (it returns "dynamic tool <name>") and announce tools/list_changed."""

    def dynamic() -> str:
        return f"dynamic tool {name}"

    server.add_tool(dynamic, name=name, description=f"Tool {name}, added at run time.", structured_output=False)
    await ctx.notify_tools_changed()
    if not is_modern(ctx):
        # Sent on this request's stream so it reaches the client before the result, on HTTP too.
        await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)
    return f"added {name}"


@server.tool(structured_output=False)
async def touch(ctx: Context, uri: str) -> str:
    """Send notifications/resources/updated for `uri` (subscribed or not) and return "touched <uri>"."""
    await ctx.notify_resource_updated(uri)
    if not is_modern(ctx):
        notification = ResourceUpdatedNotification(params=ResourceUpdatedNotificationParams(uri=uri))
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
    return f"touched {uri}"


# --- resources -----------------------------------------------------------------------------------


@server.resource("kitchen://text", name="text", description="A plain text resource.", mime_type="text/plain")
def text_resource() -> str:
    return "hello from kitchen"


@server.resource(
    "kitchen://config.json", name="config", description="JSON text served as text/plain.", mime_type="text/plain"
)
def config_resource() -> str:
    return '{"debug": true, "level": 3}'


@server.resource("kitchen://blob", name="blob", description="A binary resource.", mime_type="application/octet-stream")
def blob_resource() -> bytes:
    return b"\x00\x01\x02binary"


@server.resource(
    "kitchen://greeting/{name}", name="greeting", description="A greeting for {name}.", mime_type="text/plain"
)
def greeting_resource(name: str) -> str:
    return f"Hello, {name}!"


async def on_subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
    subscriptions.add(params.uri)
    return EmptyResult()


async def on_unsubscribe(ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams) -> EmptyResult:
    subscriptions.discard(params.uri)
    return EmptyResult()


# Registering resources/subscribe makes the server advertise resources.subscribe=true.
lowlevel(server).add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
lowlevel(server).add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)


# --- prompts -------------------------------------------------------------------------------------


@server.prompt()
def greet(name: str, style: str = "plain") -> list[UserMessage]:
    """Greet someone in a given style."""
    return [UserMessage(f"Greet {name} in a {style} way.")]


@server.prompt(description="Summarize a piece of text in a few sentences.")
def summarize(text: str) -> list[UserMessage]:
    return [UserMessage(f"Summarize the following text in a few sentences:\n\n{text}")]


# --- extra tools for the dispatch tests, only with KITCHEN_EXTRAS=1 (the default tool set stays as listed) ---

if os.environ.get("KITCHEN_EXTRAS"):
    from mcp_types import ToolAnnotations

    counters = {"ticket": 0, "tick": 0}

    @server.tool()
    def document(size: int = 1_000_000) -> dict[str, str]:
        """Return {"text": ...}: `size` characters of numbered words ("w1 w2 w3 ...")."""
        words, length, count = [], 0, 0
        while length < size:
            count += 1
            words.append(f"w{count}")
            length += len(words[-1]) + 1
        return {"text": (" ".join(words) + " ")[:size]}

    @server.tool()
    def measure(text: str) -> dict[str, int]:
        """Return the number of characters and of space-separated words in `text`."""
        return {"characters": len(text), "words": len(text.split())}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def ticket() -> int:
        """A read-only tool whose answer still changes: 1, 2, 3, ... (shows whether a result was cached)."""
        counters["ticket"] += 1
        return counters["ticket"]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def confide(question: str, reply: Annotated[ElicitationResult[Answer], Resolve(ask_question)]) -> str:
        """A read-only tool whose answer is its client's: asks `question`, returns "told: <answer>"."""
        return f"told: {reply.data.answer}" if isinstance(reply, AcceptedElicitation) else "not told"

    @server.tool()
    def tick() -> int:
        """Like ticket, without annotations: 1, 2, 3, ..."""
        counters["tick"] += 1
        return counters["tick"]

    @server.tool(structured_output=False)
    def note(text: str, path: str) -> str:
        """A tool with an effect: append `text` as a line to the file `path` and return `text`."""
        with open(path, "a", encoding="utf-8") as notes:
            notes.write(text + "\n")
        return text

    @server.tool(structured_output=False)
    def request_meta(ctx: Context) -> str:
        """Return the `_meta` this call arrived with, as JSON (shows what a gateway forwards)."""
        meta = ctx.request_context.meta
        if meta is not None and not isinstance(meta, dict):
            meta = meta.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps({key: value for key, value in (meta or {}).items() if key != "progressToken"})


if __name__ == "__main__":
    run(server, make_parser(__doc__.splitlines()[0]).parse_args())
