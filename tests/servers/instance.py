"""instance: a named MCP server for the hub tests, one per "running project instance".

Tools: ``whoami`` (returns the name), ``add``, ``progress``, ``slow`` (counts the calls that were
cancelled), ``cancellations`` (that count), ``shout`` (logs its text to the client, after an optional
delay), ``ask_later`` (elicits an answer, after an optional delay), ``instances_list``
(named like the hub's tool, to test that the hub's wins), ``scripts/list`` (a Brummer-style name
no client accepts as it is), and one tool named ``only_<name>`` so tests can tell two instances' lists
apart. Resources ``instance://info`` and ``instance://files/docs/`` (a folder, with its ``/``), resource
template ``instance://notes/{topic}``, prompts ``review`` and ``scripts/explain`` (its argument completed:
``build``, ``test``).

Run: ``python tests/servers/instance.py --name alpha --http PORT`` (or stdio without ``--http``).
"""

from typing import Annotated

import anyio
from _common import make_parser, report_steps, run
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
    UserMessage,
)
from mcp.types import Completion, CompletionArgument, PromptReference, ResourceTemplateReference
from pydantic import BaseModel

parser = make_parser(__doc__.splitlines()[0])
parser.add_argument("--name", default="instance", help="the instance's name (also in its only_<name> tool)")
args = parser.parse_args()
NAME: str = args.name

server = MCPServer(f"instance-{NAME}", version="1.0.0", log_level="WARNING")
cancelled = 0


@server.tool(structured_output=False)
def whoami() -> str:
    """Return this instance's name."""
    return NAME


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(structured_output=False)
async def progress(ctx: Context, steps: int = 3) -> str:
    """Report progress `steps` times, then return "done <steps>"."""
    return await report_steps(ctx, steps)


@server.tool(structured_output=False)
async def slow(seconds: float = 30) -> str:
    """Sleep for `seconds`; a cancelled call is counted (see `cancellations`)."""
    global cancelled
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        cancelled += 1
        raise
    return "slept"


@server.tool(structured_output=False)
def cancellations() -> str:
    """How many `slow` calls were cancelled so far."""
    return str(cancelled)


class Answer(BaseModel):
    answer: str


async def answer_later(question: str, delay: float = 0) -> Elicit[Answer]:
    await anyio.sleep(delay)
    return Elicit(question, Answer)


# Resolve: asked mid-call in a session, with input_required at 2026-07-28 (the SDK picks by the request).
@server.tool(structured_output=False)
def ask_later(
    question: str, reply: Annotated[ElicitationResult[Answer], Resolve(answer_later)], delay: float = 0
) -> str:
    """After `delay` seconds, ask the user `question` (elicitation); return what they answered."""
    return f"answered: {reply.data.answer}" if isinstance(reply, AcceptedElicitation) else reply.action


@server.tool(structured_output=False)
async def shout(ctx: Context, text: str, delay: float = 0) -> str:
    """After `delay` seconds, send `text` to the client as a warning log message; return "shouted"."""
    await anyio.sleep(delay)
    await ctx.log("warning", text, logger_name=NAME)
    return "shouted"


@server.tool(name="instances_list", structured_output=False)
def clashing_list() -> str:
    """Named like the hub's own tool, which must win."""
    return f"{NAME}'s own instances_list"


def only() -> str:
    return f"only on {NAME}"


server.add_tool(only, name=f"only_{NAME}", description=f"A tool only {NAME} has.", structured_output=False)


def scripts() -> str:
    return f"{NAME} scripts: build, test"


# Brummer's instance tools are named like this; several clients and model APIs refuse the `/`.
server.add_tool(scripts, name="scripts/list", description="List the project's scripts.", structured_output=False)


@server.resource("instance://info", name="info", description="Who this instance is.", mime_type="text/plain")
def info() -> str:
    return f"instance {NAME}"


@server.resource(
    "instance://files/docs/", name="docs", description="A folder, listed with its '/'.", mime_type="text/plain"
)
def docs() -> str:
    return f"{NAME} docs folder"


@server.resource("instance://notes/{topic}", name="notes", description="Notes on a topic.", mime_type="text/plain")
def notes(topic: str) -> str:
    return f"{NAME} notes on {topic}"


@server.prompt()
def review(topic: str) -> list[UserMessage]:
    """Ask for a review of a topic in this instance's project."""
    return [UserMessage(f"Review {topic} in project {NAME}.")]


# A Brummer-style prompt name, shown by the hub as `scripts_explain`.
@server.prompt(name="scripts/explain", description="Explain one of the scripts.")
def explain(script: str) -> list[UserMessage]:
    return [UserMessage(f"Explain the {script} script of project {NAME}.")]


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: object
) -> Completion | None:
    """The scripts for `scripts/explain`'s argument, under its own name only: asked under any other, none."""
    if isinstance(ref, PromptReference) and ref.name == "scripts/explain" and argument.name == "script":
        return Completion(values=[name for name in ("build", "test") if name.startswith(argument.value)])
    return None


if __name__ == "__main__":
    run(server, args)
